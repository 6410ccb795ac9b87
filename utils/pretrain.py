"""Continued masked-LM ("in-task") pretraining of a backbone on the competition's own excerpts.

    python -m utils.pretrain --texts data/train.csv data/test.csv --model roberta-base \
        --out backbones/roberta-base-itpt
    python -m utils.train --train-csv data/train.csv --model backbones/roberta-base-itpt \
        --out runs/rb-itpt

The texts of all CSVs are deduplicated (equal after whitespace normalisation); a seeded
--valid-fraction of them is held out and never trained on, and its masked-LM loss is measured
before and after training on one fixed masking, so the two numbers compare.

OUT (written atomically) is a backbone folder that `--model OUT` takes as it is: config.json,
the encoder's weights (the same keys as the input checkpoint; the MLM head is left out), the
tokenizer, pretrain.json (held-out loss before/after, text counts, settings, versions) and
pretrain_texts.csv (every row read: source, row, id, split = train | valid | duplicate).

Re-running the same command resumes: after every epoch but the last, the whole training state
(weights, optimizer, schedule, loss scaler, random generators) is saved atomically to
OUT.resume.pt beside OUT; a rerun with the same settings and texts continues from the next epoch
and ends where an uninterrupted run would, and the file is removed once OUT is written.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from .backbone import precision_for
from .batching import EpochBatches, TextDataset, sorted_batches, start_epoch
from .cli import HelpFormatter, cli_error, show_progress
from .config import PRECISIONS, add_fields, differences
from .data import DataError, read_csv
from .env import versions
from .files import atomic_dir, atomic_file, content_sha256, write_csv, write_json
from .model import _pretrained, load_tokenizer
from .models import resolve
from .trackers import accelerator_for

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# OUT's own files, beside the backbone's (the model's config.json, weights and tokenizer).
PRETRAIN_JSON = "pretrain.json"  # held-out loss before/after, counts, settings, versions
TEXTS_CSV = "pretrain_texts.csv"  # every row read: source, row, id, split


@dataclass(frozen=True)
class PretrainConfig:
    texts: tuple = ()  # CSVs whose text column is pretrained on (e.g. train.csv and test.csv)
    model: str = ""  # hub name or local folder of the backbone to continue from
    out: str = ""  # the new backbone folder
    text_col: str = "excerpt"  # the column holding the text in every CSV
    id_col: str = "id"  # optional: a CSV without it is read all the same
    epochs: int = 2  # passes over the texts
    mlm_probability: float = 0.15  # share of tokens masked (BERT's 80/10/10 replacement)
    max_len: int = 256  # tokens per text (longer texts keep their first tokens)
    batch_size: int = 16  # texts per batch (per process)
    lr: float = 5e-5  # peak learning rate
    weight_decay: float = 0.01  # not on biases and norms
    warmup: float = 0.06  # fraction of steps of linear warmup, then linear decay to 0
    max_grad_norm: float = 1.0  # 0 = no clipping
    seed: int = 42  # the split, the fresh head's initialisation, masking and batch order
    valid_fraction: float = 0.1  # held-out texts (never trained on) for the MLM loss
    precision: str = "auto"  # auto = bf16/fp16 AMP on CUDA, fp32 on CPU; or fp32 | fp16 | bf16
    overwrite: bool = False  # replace an OUT written by an earlier pretraining
    progress: bool = True  # tqdm bar

    def __post_init__(self):
        for name in ("texts", "model", "out"):
            if not getattr(self, name):
                raise ValueError(f"PretrainConfig.{name} is required")
        if self.precision not in PRECISIONS:
            raise ValueError(
                f"unknown precision {self.precision!r}; valid: {', '.join(PRECISIONS)}"
            )
        if not 0 <= self.valid_fraction < 1:
            raise ValueError(f"valid_fraction must be in [0, 1), got {self.valid_fraction}")
        if not 0 < self.mlm_probability < 1:
            raise ValueError(f"mlm_probability must be in (0, 1), got {self.mlm_probability}")
        if self.epochs < 1 or self.batch_size < 1 or self.max_len < 8:
            raise ValueError("epochs and batch_size must be >= 1, max_len >= 8")


# ----------------------------------------------------------------------------- texts


def read_texts(path, text_col: str = "excerpt", id_col: str = "id") -> pd.DataFrame:
    """One CSV's rows, validated like every CSV of the kit; the id column is optional."""
    try:
        columns = pd.read_csv(path, encoding="utf-8-sig", nrows=0).columns
    except Exception:  # missing, empty or unreadable: read_csv says which, in the kit's words
        columns = [id_col]
    return read_csv(path, text_col, target_cols=(), id_col=id_col if id_col in columns else None)


def normalise(text: str) -> str:
    """The text with every run of whitespace made one space: what deduplication compares."""
    return " ".join(str(text).split())


def collect_texts(paths, text_col: str = "excerpt", id_col: str = "id") -> pd.DataFrame:
    """Every row of every CSV: source, row (as a spreadsheet numbers it), id, text, duplicate
    (True for a text already seen, in file order, after whitespace normalisation)."""
    parts = []
    for path in paths:
        df = read_texts(path, text_col, id_col)
        ids = df[id_col].astype(str) if id_col in df.columns else ""
        parts.append(
            pd.DataFrame(
                {
                    "source": str(path),
                    "row": np.arange(len(df)) + 2,
                    "id": ids,
                    "text": df[text_col].to_numpy(),
                }
            )
        )
    rows = pd.concat(parts, ignore_index=True)
    rows["duplicate"] = rows["text"].map(normalise).duplicated()
    return rows


def split_texts(n: int, valid_fraction: float, seed: int) -> np.ndarray:
    """(n,) bool, True for the held-out texts: a seeded random share, at least one if any."""
    n_valid = min(n, max(1, round(n * valid_fraction))) if valid_fraction > 0 else 0
    valid = np.zeros(n, dtype=bool)
    valid[np.random.default_rng(seed).permutation(n)[:n_valid]] = True
    return valid


@dataclass
class Texts:
    """The texts of a pretraining, as the data stage splits them."""

    rows: pd.DataFrame  # every row read: source, row, id, text, duplicate, split
    train: list  # the distinct texts trained on
    valid: list  # the distinct texts held out (never trained on)
    n_duplicates: int  # rows whose text was seen before

    def counts(self) -> dict:
        """The counts pretrain.json records."""
        n_texts = len(self.train) + len(self.valid)
        return {"n_rows": len(self.rows), "n_duplicates": self.n_duplicates, "n_texts": n_texts,
                "n_train": len(self.train), "n_valid": len(self.valid)}


def pretrain_texts(cfg: PretrainConfig) -> Texts:
    """Stage 1, data: every CSV's rows, duplicates dropped, a seeded share of the distinct texts
    held out; an error when none is left to train on."""
    rows = collect_texts(cfg.texts, cfg.text_col, cfg.id_col)
    unique = rows[~rows["duplicate"]]
    valid = split_texts(len(unique), cfg.valid_fraction, cfg.seed)
    if valid.all():
        raise DataError(
            f"{len(unique)} distinct text(s) in {', '.join(map(str, cfg.texts))}: none left to "
            f"train on after holding out --valid-fraction {cfg.valid_fraction}"
        )
    rows["split"] = "duplicate"
    rows.loc[unique.index, "split"] = np.where(valid, "valid", "train")
    texts = unique["text"].tolist()
    train = [t for t, v in zip(texts, valid) if not v]
    held = [t for t, v in zip(texts, valid) if v]
    return Texts(rows, train, held, int(rows["duplicate"].sum()))


# ----------------------------------------------------------------------------- model


def load_mlm(name_or_dir: str):
    """(masked-LM model in fp32, names of the head weights the checkpoint lacked).

    A backbone saved without its MLM head (a sentence-transformers model, or any folder written
    with AutoModel) gets a freshly initialised head; the names say so.
    """
    import transformers
    from transformers import AutoConfig, AutoModelForMaskedLM

    config = _pretrained(AutoConfig, name_or_dir)  # "model not found: ..." for a bad name
    verbosity = transformers.logging.get_verbosity()
    # transformers would print its own report of the missing head (a table in 5.x); the one
    # line this module prints says it once, in words.
    transformers.logging.set_verbosity_error()
    try:
        model, info = AutoModelForMaskedLM.from_pretrained(
            resolve(name_or_dir), config=config, output_loading_info=True
        )
    except ValueError as e:  # a config class without a masked-LM model (GPT-2, T5, ...)
        first = str(e).strip().splitlines()[0][:200]
        raise ValueError(
            f"{name_or_dir} ({config.model_type}) has no masked-LM model: {first}"
        ) from None
    finally:
        transformers.logging.set_verbosity(verbosity)
    prefix = model.base_model_prefix + "."
    # Keys outside the encoder that the checkpoint lacked. The decoder's weight and bias are
    # aliases of the input embeddings and the head's bias, reported missing by some versions
    # even when the head is there.
    fresh = sorted(
        k
        for k in info["missing_keys"]
        if not k.startswith(prefix) and not k.endswith(("decoder.weight", "decoder.bias"))
    )
    return model.float(), fresh


def save_backbone(mlm_model, name_or_dir: str, tokenizer, folder: Path) -> None:
    """Write the trained encoder as `AutoModel.from_pretrained(name_or_dir)` would load it: the
    original checkpoint's model class, config and keys (its pooler kept), the trained weights."""
    from transformers import AutoModel

    base = AutoModel.from_pretrained(resolve(name_or_dir)).float()
    result = base.load_state_dict(mlm_model.base_model.state_dict(), strict=False)
    # Only the parts an MLM model does not have may keep the checkpoint's weights (the pooler).
    stale = [k for k in result.missing_keys if not k.startswith("pooler.")]
    if result.unexpected_keys or stale:
        raise RuntimeError(
            f"the masked-LM encoder of {name_or_dir} does not match its AutoModel "
            f"(unexpected {result.unexpected_keys[:3]}, not trained {stale[:3]})"
        )
    base.save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def ids_only(collator):
    """The MLM collator on the kit's dataset items, whose `index` the model must not see."""
    return lambda items: collator([{"input_ids": x["input_ids"]} for x in items])


@torch.no_grad()
def mlm_loss(model, batches, device) -> float:
    """Mean cross-entropy over all masked tokens of fixed, already masked batches."""
    was_training = model.training
    model.eval()
    total, n = 0.0, 0
    for batch in batches:
        k = int((batch["labels"] != -100).sum())
        if k:  # a batch may draw no mask at all: its loss is NaN, its weight 0
            loss = model(**{key: v.to(device) for key, v in batch.items()}).loss
            total, n = total + float(loss) * k, n + k
    model.train(was_training)
    return total / n if n else math.nan


def held_out_loss(accelerator, model, valid_batches):
    """The masked-LM loss on the fixed held-out batches; None without held-out texts."""
    if not valid_batches:
        return None
    return mlm_loss(accelerator.unwrap_model(model), valid_batches, accelerator.device)


def pretrain_model(cfg: PretrainConfig, log):
    """Stage 2, model: (tokenizer, masked-LM model, names of its freshly initialised head weights),
    seeded first so that a fresh head's initialisation is reproducible."""
    from accelerate.utils import set_seed

    tokenizer = load_tokenizer(cfg.model)
    if tokenizer.mask_token is None:
        raise ValueError(f"the tokenizer of {cfg.model} has no mask token: no masked-LM training")
    set_seed(cfg.seed)  # before the model: a fresh head's initialisation is reproducible
    model, fresh = load_mlm(cfg.model)
    if fresh:
        log(
            f"fresh masked-LM head: {cfg.model} was saved without one ({len(fresh)} weights newly "
            f"initialised, e.g. {fresh[0]}); it is trained here and left out of the output"
        )
    return tokenizer, model, fresh


@dataclass
class MlmBatches:
    """The batches of a pretraining."""

    sampler: EpochBatches  # each epoch's order of the training batches
    train: DataLoader  # training texts, masked afresh in every batch
    valid: list  # the held-out texts' batches, masked once
    n_masked: int  # masked tokens in `valid`
    n_truncated: int  # texts longer than max_len


def pretrain_batches(cfg: PretrainConfig, texts: Texts, tokenizer, accelerator, log) -> MlmBatches:
    """Stage 3, batches: the training loader (masks drawn per batch) and the held-out batches,
    masked once from their own seeded generator."""
    from transformers import DataCollatorForLanguageModeling

    train_ds = TextDataset(texts.train, tokenizer, cfg.max_len)
    valid_ds = TextDataset(texts.valid, tokenizer, cfg.max_len)
    n_cut = train_ds.n_truncated + valid_ds.n_truncated
    if n_cut:
        log(f"{n_cut} of {texts.counts()['n_texts']} texts truncated to max_len {cfg.max_len}")
    collate = ids_only(
        DataCollatorForLanguageModeling(
            tokenizer, mlm_probability=cfg.mlm_probability, pad_to_multiple_of=8
        )
    )
    # One fixed masking of the held-out texts, drawn from its own seeded RNG (training's is left
    # as it was): loss_before and loss_after are measured on the very same masked tokens.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        valid_batches = [
            collate([valid_ds[i] for i in b])
            for b in sorted_batches(valid_ds.lengths, cfg.batch_size)
        ]
    n_masked = sum(int((b["labels"] != -100).sum()) for b in valid_batches)
    sampler = EpochBatches(
        train_ds.lengths, cfg.batch_size, cfg.seed, True, accelerator.num_processes
    )
    train_dl = DataLoader(train_ds, batch_sampler=sampler, collate_fn=collate)
    return MlmBatches(sampler, train_dl, valid_batches, n_masked, n_cut)


def pretrain_optimisation(cfg: PretrainConfig, model, train_dl, accelerator):
    """Stage 4, optimisation: AdamW (no decay on biases and norms) and linear warmup then decay,
    prepared by accelerate; returns (model, optimizer, train_dl, scheduler, total steps)."""
    from transformers import get_linear_schedule_with_warmup

    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": cfg.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=cfg.lr,
    )
    model, optimizer, train_dl = accelerator.prepare(model, optimizer, train_dl)
    total = len(train_dl) * cfg.epochs
    # Not prepared: stepped exactly once per optimizer step, on every process alike.
    scheduler = get_linear_schedule_with_warmup(optimizer, int(cfg.warmup * total), total)
    return model, optimizer, train_dl, scheduler, total


# ----------------------------------------------------------------------------- the run


def check_out(out: Path, overwrite: bool) -> None:
    """Refuse an OUT that an earlier pretraining wrote (unless overwrite) or that holds
    anything else (never deleted)."""
    if not out.exists():
        return
    if not out.is_dir():
        raise FileExistsError(f"{out} exists and is not a folder")
    if (out / PRETRAIN_JSON).is_file():
        if not overwrite:
            raise FileExistsError(
                f"{out} holds an earlier pretraining; use another --out or --overwrite"
            )
    elif any(out.iterdir()):
        raise FileExistsError(
            f"{out} is not empty and was not written by utils.pretrain; use another --out"
        )


# Settings that do not change what is trained: a resume may differ in them.
NOT_TRAINING = ("out", "overwrite", "progress")


def resume_path(out: Path) -> Path:
    """Where an unfinished pretraining into `out` keeps its state between epochs."""
    return out.with_name(out.name + ".resume.pt")


def training_identity(cfg: PretrainConfig, train_texts, valid_texts, processes: int = 1,
                      mixed_precision: str = "") -> dict:
    """What a resume must match: the settings that shape training, the texts themselves, the
    backbone folder's files, the number of processes (which sets the batches of each optimizer
    step) and the precision as resolved on this machine (`auto` is fp16 on a T4, bf16 on an A100,
    so the same command on another GPU is another run)."""
    digest = hashlib.sha256()
    for t in [*train_texts, "\0", *valid_texts]:
        digest.update(t.encode("utf-8") + b"\0")
    # The texts by content, not by the paths they were read from.
    skip = (*NOT_TRAINING, "texts")
    settings = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in skip}
    settings["precision"] = mixed_precision or cfg.precision
    return {**settings, "texts_sha256": digest.hexdigest(), "processes": processes,
            "model_sha256": content_sha256(cfg.model)}


def load_resume(path: Path, identity: dict):
    """The saved state of an unfinished run with this identity; None when there is none."""
    if not path.is_file():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise ValueError(
            f"{path} (an unfinished pretraining's state) cannot be read ({type(e).__name__}); "
            f"delete it to start over"
        ) from None
    saved = state["identity"]
    diff = differences(saved, identity, limit=3)
    if diff:
        raise ValueError(
            f"{path} holds an unfinished pretraining with other settings or texts ({diff}); "
            f"rerun with its settings to resume, or delete it to start over"
        )
    return state


def rng_state() -> dict:
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def restore(state: dict, accelerator, model, optimizer, scheduler) -> tuple[float | None, list]:
    """An unfinished pretraining's weights, optimizer, schedule, loss scaler and this process's
    random generators put back; returns (loss_before, history)."""
    accelerator.unwrap_model(model).load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    if accelerator.scaler is not None and "scaler" in state:
        accelerator.scaler.load_state_dict(state["scaler"])
    set_rng_state(state["rng"][accelerator.process_index])
    return state["loss_before"], state["history"]


def pretrain(cfg: PretrainConfig) -> dict:
    """Continue masked-LM training of cfg.model on cfg.texts; returns pretrain.json's content."""
    t0 = time.time()
    accelerator = accelerator_for(precision_for(cfg.precision))
    log = accelerator.print
    out = Path(cfg.out)
    check_out(out, cfg.overwrite)

    texts = pretrain_texts(cfg)  # stage 1, data
    log(
        f"{len(texts.rows)} rows, {texts.n_duplicates} duplicate(s) dropped: {len(texts.train)} "
        f"texts to train on, {len(texts.valid)} held out"
    )
    resume_file = resume_path(out)
    identity = training_identity(cfg, texts.train, texts.valid, accelerator.num_processes,
                                 accelerator.mixed_precision)
    state = load_resume(resume_file, identity)  # before anything slow: a mismatch fails at once
    tokenizer, model, fresh = pretrain_model(cfg, log)  # stage 2, model
    batches = pretrain_batches(cfg, texts, tokenizer, accelerator, log)  # stage 3, batches
    model, optimizer, train_dl, scheduler, total = pretrain_optimisation(  # stage 4
        cfg, model, batches.train, accelerator
    )
    if state is None:
        loss_before, history = held_out_loss(accelerator, model, batches.valid), []
        start, step = 0, 0
    else:
        loss_before, history = restore(state, accelerator, model, optimizer, scheduler)
        start, step = len(history), history[-1]["step"]
        t0 -= state["seconds"]  # the time spent before the interruption counts
        log(f"resuming from {resume_file}: epoch {start} of {cfg.epochs} done, step {step}")
    if batches.valid:
        log(
            f"held-out MLM loss before: {loss_before:.4f} ({len(texts.valid)} texts, "
            f"{batches.n_masked} masked tokens)"
        )

    # Stage 5, the loop: an epoch of masked-LM steps, the held-out loss, the state to resume from.
    bar = tqdm(total=total, initial=step, desc="pretrain",
               disable=not show_progress(cfg.progress and accelerator.is_main_process))
    model.train()
    for epoch in range(start, cfg.epochs):
        start_epoch(train_dl, batches.sampler, epoch)
        loss_sum, loss_n = 0.0, 0
        for batch in train_dl:
            loss = model(**batch).loss
            accelerator.backward(loss)
            if cfg.max_grad_norm > 0:
                accelerator.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            step += 1
            bar.update(1)
            if torch.isfinite(loss):  # fp16: a batch the loss scaler skips
                loss_sum, loss_n = loss_sum + loss.item(), loss_n + 1
        entry = {
            "epoch": epoch + 1,
            "step": step,
            "train_loss": loss_sum / max(loss_n, 1),
            "valid_loss": held_out_loss(accelerator, model, batches.valid),
        }
        history.append(entry)
        held = (
            ""
            if loss_before is None
            else (f" | held-out MLM loss {entry['valid_loss']:.4f} (before {loss_before:.4f})")
        )
        log(
            f"epoch {epoch + 1}/{cfg.epochs} step {step}/{total} | "
            f"train loss {entry['train_loss']:.4f}{held}"
        )
        if epoch + 1 < cfg.epochs:
            save_resume(accelerator, resume_file, identity, model, optimizer, scheduler,
                        loss_before, history, t0)
    bar.close()

    # Stage 6, saving: OUT with the backbone and pretrain.json, this content.
    info = {"loss_before": loss_before, "loss_after": history[-1]["valid_loss"], **texts.counts(),
            "n_valid_masked_tokens": batches.n_masked, "n_truncated": batches.n_truncated,
            "fresh_head": fresh, "steps": step, "seconds": round(time.time() - t0, 1),
            "mixed_precision": accelerator.mixed_precision, "processes": accelerator.num_processes,
            "history": history, "settings": dataclasses.asdict(cfg),
            "versions": versions("accelerate")}
    save_pretraining(accelerator, model, cfg, tokenizer, texts.rows, info)
    return info


def save_pretraining(accelerator, model, cfg: PretrainConfig, tokenizer, rows, info: dict) -> None:
    """OUT, written atomically by the main process: the trained encoder as a backbone folder,
    pretrain_texts.csv and pretrain.json (`info`); then the state kept for a resume is removed."""
    out = Path(cfg.out)
    if accelerator.is_main_process:
        with atomic_dir(out) as tmp:
            save_backbone(accelerator.unwrap_model(model), cfg.model, tokenizer, tmp)
            write_csv(tmp / TEXTS_CSV, rows[["source", "row", "id", "split"]])
            write_json(tmp / PRETRAIN_JSON, info)
        resume_path(out).unlink(missing_ok=True)
        accelerator.print(f"backbone saved to {out} in {info['seconds']:.0f}s")
    accelerator.wait_for_everyone()


def save_resume(accelerator, path, identity, model, optimizer, scheduler, loss_before, history,
                t0) -> None:
    """The state a rerun continues from, written atomically by the main process. Every process has
    drawn its own masks and dropout: each one's random generators are kept."""
    from accelerate.utils import gather_object

    rng = gather_object([rng_state()])  # one per process, in process order
    if accelerator.is_main_process:
        state = {
            "identity": identity,
            "model": accelerator.unwrap_model(model).state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": rng,
            "loss_before": loss_before,
            "history": history,
            "seconds": time.time() - t0,
        }
        if accelerator.scaler is not None:
            state["scaler"] = accelerator.scaler.state_dict()
        with atomic_file(path) as tmp:
            torch.save(state, tmp)
    accelerator.wait_for_everyone()


def build_parser() -> argparse.ArgumentParser:
    """Command-line flags generated from PretrainConfig: one per field, --kebab-case."""
    p = argparse.ArgumentParser(
        prog="python -m utils.pretrain",
        description="Continue masked-LM pretraining of a backbone on the competition's texts.",
        formatter_class=HelpFormatter,
    )
    texts = dict(nargs="+", required=True, metavar="CSV")
    add_fields(p, PretrainConfig, required=("model", "out"), special={"texts": texts})
    return p


def main(argv=None) -> int:
    """CLI entry point: errors a user can act on are one line on stderr and exit code 2."""
    args = vars(build_parser().parse_args(argv))
    try:
        pretrain(PretrainConfig(**{**args, "texts": tuple(args["texts"])}))
    except (DataError, ValueError, OSError) as e:
        return cli_error(e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
