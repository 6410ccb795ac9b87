"""The one training loop: K-fold cross-validation of an encoder + pooling + head.

    python -m utils.train --train-csv data/train.csv --model roberta-base --out runs/rb-attn
    accelerate launch --num_processes 2 -m utils.train ...   # data-parallel (e.g. Kaggle T4 x2)

Outputs in OUT (each written atomically): fold{k}/ (self-contained model, its OOF and history;
a fold is finished when its folder exists), folds.csv, oof.csv, metrics.json, config.json.
Re-running the same command resumes: finished folds are skipped, an unfinished one restarts.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from . import __version__
from .batching import (
    Batches,
    Collator,
    EpochBatches,
    TextDataset,
    deal_evenly,
    sorted_batches,
    start_epoch,
)
from .cli import show_progress
from .competition import read_split
from .config import (
    CONTENT_KEYS,
    TrainConfig,
    cli_error,
    config_from_args,
    differences,
    identity,
    resolve,
)
from .data import (
    REFERENCE_ID,
    DataError,
    folds_fingerprint,
    make_folds,
    read_folds,
    read_pseudo,
)
from .files import atomic_dir, fold_dirs, write_csv, write_json
from .metrics import get_metric, rmse
from .model import (
    ModelSpec,
    TextModel,
    amp_precision,
    encoder_layers,
    load_tokenizer,
    max_positions,
)

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class RunError(RuntimeError):
    """A run folder that cannot be resumed with these arguments."""


class TrainingError(RuntimeError):
    """A fold that produced no usable model (e.g. every validation score NaN)."""


# ----------------------------------------------------------------------------- data


def load_train(cfg: TrainConfig) -> pd.DataFrame:
    """Validated training frame (the competition's file and the tables it joins) after the
    optional reference-row drop and subsample."""
    cfg, comp = resolve(cfg)
    extra = (cfg.standard_error_col,) if cfg.loss == "se" else ()
    df = read_split(comp, cfg.train_csv, "train", extra_cols=extra)
    if cfg.drop_reference:
        df = df[df[cfg.id_col] != REFERENCE_ID].reset_index(drop=True)
    if cfg.max_rows and cfg.max_rows < len(df):
        df = df.sample(n=cfg.max_rows, random_state=cfg.fold_seed).reset_index(drop=True)
    return df


def class_labels(cfg: TrainConfig, df: pd.DataFrame) -> list:
    """Sorted class labels (classification), checked against --num-labels."""
    labels = sorted(df[cfg.target_cols[0]].unique().tolist())
    if cfg.num_labels and len(labels) > cfg.num_labels:
        raise DataError(
            f"{Path(cfg.train_csv).name}: column {cfg.target_cols[0]!r} has {len(labels)} "
            f"classes but --num-labels is {cfg.num_labels}"
        )
    return labels


def targets_of(cfg: TrainConfig, df: pd.DataFrame, labels=None) -> np.ndarray:
    """(N, T) float targets (plus the standard error column for loss 'se'), or (N,) class ids."""
    if cfg.task == "classification":
        return df[cfg.target_cols[0]].map({v: i for i, v in enumerate(labels)}).to_numpy()
    cols = list(cfg.target_cols) + ([cfg.standard_error_col] if cfg.loss == "se" else [])
    return df[cols].to_numpy(dtype=np.float32)


# ----------------------------------------------------------------------------- metrics


def scores(cfg: TrainConfig, y: np.ndarray, pred: np.ndarray, metric: str = "") -> dict:
    """Metrics for predictions (N, outputs): the loss's (log-loss and accuracy, or RMSE), and
    the competition's `metric` (labels under its default rule: nothing is fitted on the rows
    scored); 'score' is the one checkpoints minimise: the metric, as a loss."""
    if cfg.task == "classification":
        p = np.clip(pred, 1e-15, 1.0)
        logloss = float(-np.mean(np.log(p[np.arange(len(y)), y.astype(int)])))
        acc = float(np.mean(pred.argmax(1) == y))
        out = {"score": logloss, "log_loss": logloss, "accuracy": acc}
    else:
        per = {c: rmse(y[:, i], pred[:, i]) for i, c in enumerate(cfg.target_cols)}
        out = {"score": float(np.mean(list(per.values()))), "rmse": float(np.mean(list(per.values())))}
        if len(cfg.target_cols) > 1:
            out["rmse_per_target"] = per
    if metric and metric not in out:
        m = get_metric(metric)
        truth = y if cfg.task == "classification" else y[:, : len(cfg.target_cols)]
        out[metric] = m.score(truth, pred)
        out["score"] = m.loss(truth, pred)
    return out


def compute_loss(cfg: TrainConfig, preds: torch.Tensor, y: torch.Tensor, weight=None) -> torch.Tensor:
    """Training loss in fp32: preds (B, outputs), y (B, T[+1]) or (B,) class ids; `weight` (B,):
    per-row weights of a mean squared error (pseudo rows mixed with real ones)."""
    preds = preds.float()
    if cfg.task == "classification":
        # Class ids (B,), or class probabilities (B, K): soft pseudo-labels, the real rows one-hot.
        logp = F.log_softmax(preds, -1)
        per_row = -(y * logp).sum(1) if y.ndim == 2 else F.nll_loss(logp, y.long(), reduction="none")
        if weight is None:
            return per_row.mean()
        return (weight * per_row).sum() / weight.sum().clamp(min=1e-8)
    t = len(cfg.target_cols)
    if cfg.loss == "se":
        # KL(N(target, se) || N(pred, se)) = (pred - target)^2 / (2 se^2): the model is trained
        # against the target's distribution, trusting precise targets more.
        se = y[:, t].clamp(min=cfg.min_se)
        return ((preds[:, 0] - y[:, 0]) ** 2 / (2 * se**2)).mean()
    if weight is None:
        mse = F.mse_loss(preds, y[:, :t])
    else:
        per_row = ((preds - y[:, :t]) ** 2).mean(1)
        mse = (weight * per_row).sum() / weight.sum().clamp(min=1e-8)
    return torch.sqrt(mse + 1e-8) if cfg.loss == "rmse" else mse


# ----------------------------------------------------------------------------- optimisation


def build_optimizer(model: TextModel, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW with layer-wise lr decay for the encoder and its own lr for pooling + head.

    Layer i from the top gets lr * llrd**i, embeddings the smallest; no weight decay on biases
    and norms.
    """
    n = len(encoder_layers(model.backbone))
    groups: dict = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if not name.startswith("backbone."):
            lr = cfg.head_lr
        else:
            m = re.search(r"\.layers?\.(\d+)\.", name)
            depth = n - 1 - int(m.group(1)) if m else (n if "embed" in name else 0)
            lr = cfg.lr * cfg.llrd**depth
        wd = 0.0 if p.ndim < 2 else cfg.weight_decay
        groups.setdefault((lr, wd), []).append(p)
    params = [{"params": ps, "lr": lr, "weight_decay": wd} for (lr, wd), ps in groups.items()]
    return torch.optim.AdamW(params, lr=cfg.lr)


def eval_period(cfg: TrainConfig, best: float) -> int:
    """Steps until the next validation: from the schedule given the best score so far."""
    for threshold, every in cfg.eval_schedule:
        if best >= threshold:
            return every
    return cfg.eval_every if not cfg.eval_schedule else cfg.eval_schedule[-1][1]


def mixed_precision(cfg: TrainConfig) -> str:
    """accelerate's mixed_precision value for cfg.precision on this machine."""
    return accelerate_precision(cfg.precision)


def accelerate_precision(precision: str) -> str:
    """accelerate's mixed_precision value for a --precision value on this machine."""
    cuda = torch.cuda.is_available()
    precision = amp_precision() if precision == "auto" else precision
    if precision == "fp16" and not cuda:
        raise ValueError("--precision fp16 needs a CUDA GPU; on CPU use bf16 or fp32")
    return {"fp32": "no", "fp16": "fp16", "bf16": "bf16"}[precision]


def make_accelerator(cfg: TrainConfig):
    """An Accelerator for this config (one process, or each process of `accelerate launch`), with
    its trackers (--log-with) writing under OUT/logs."""
    return accelerator_for(cfg.precision, cfg.grad_accum, cfg.log_with, Path(cfg.out) / "logs")


def start_trackers(accelerator, cfg: TrainConfig) -> None:
    """accelerate's trackers for --log-with, the run's settings as their config (scalars)."""
    if not cfg.log_with:
        return
    if "wandb" in cfg.log_with.split(","):
        from .env import detect

        if detect() == "kaggle":  # no network in a submission kernel: logs stay in the run
            os.environ.setdefault("WANDB_MODE", "offline")
    config = {k: v if isinstance(v, (int, float, str, bool)) else json.dumps(v) for k, v in identity(cfg).items()}
    accelerator.init_trackers(Path(cfg.out).name, config=config)


def accelerator_for(precision: str, grad_accum: int = 1, log_with: str = "", project_dir=None):
    """An Accelerator for a --precision value (training here, masked-LM pretraining too)."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    mp = accelerate_precision(precision)
    if AcceleratorState._shared_state and AcceleratorState().mixed_precision != mp:
        # A notebook or test that trains twice with different precisions in one process:
        # accelerate's state is a process-wide singleton, so it is reset between runs.
        AcceleratorState._reset_state(reset_partial_state=False)
    # cpu=True without CUDA: processes started by torchrun / `accelerate launch --multi_gpu` /
    # notebook_launcher then join one gloo group (MULTI_CPU); with cpu=False each would train
    # the whole data alone and all of them would write OUT.
    cpu = not torch.cuda.is_available()
    trackers = dict(log_with=log_with.split(","), project_dir=str(project_dir)) if log_with else {}
    accelerator = Accelerator(mixed_precision=mp, gradient_accumulation_steps=grad_accum, cpu=cpu, **trackers)
    # The kit's batch samplers have no batch size (batches vary in length) and deal_evenly()
    # already gives every process the same number of batches. accelerate before 1.14 refuses
    # such a sampler unless even_batches is off (a constructor argument in some releases, a
    # DataLoaderConfiguration in others; the attribute works in all of them).
    accelerator.even_batches = False
    return accelerator


# ----------------------------------------------------------------------------- one fold


def weights_finite(model) -> bool:
    """False once any parameter holds NaN or inf (training has diverged for good)."""
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


@torch.no_grad()
def predict_loader(model, loader, accelerator, n: int, task: str) -> np.ndarray:
    """Predictions (n, outputs) in dataset order, gathered across processes."""
    model.eval()
    idx, out = [], []
    for batch in loader:
        preds = model(batch["input_ids"], batch["attention_mask"]).float()
        out.append(torch.softmax(preds, -1) if task == "classification" else preds)
        idx.append(batch["index"])
    idx, out = torch.cat(idx), torch.cat(out)
    # Processes may hold different row counts: pad, gather, then drop the padding (-1).
    idx = accelerator.pad_across_processes(idx, pad_index=-1)
    out = accelerator.pad_across_processes(out)
    idx, out = accelerator.gather((idx, out))
    keep = (idx >= 0).cpu().numpy()
    rows = idx.cpu().numpy()[keep]
    result = np.zeros((n, out.shape[1]), dtype=np.float64)
    result[rows] = out.cpu().numpy()[keep]  # repeated rows: same values
    if len(np.unique(rows)) != n:  # by index: a diverged model's NaN predictions are still rows
        raise RuntimeError("validation predictions do not cover every row")
    model.train()
    return result


def pseudo_outputs(cfg: TrainConfig, labels=None) -> list:
    """The pseudo-label columns a run reads: its targets, or prob_<label> per class."""
    return [f"prob_{lab}" for lab in labels] if cfg.task == "classification" else list(cfg.target_cols)


def pseudo_rows(cfg: TrainConfig, pseudo, fold: int, labels=None):
    """(texts, (P, outputs) targets) of the pseudo-labels fold `fold` trains on: its own columns
    O_fold{k} (models that never saw its validation rows), else the shared O columns; class
    probabilities for a classifier (soft labels)."""
    cfg, comp = resolve(cfg)
    df, per_fold = pseudo
    cols = [f"{o}_fold{fold}" if per_fold else o for o in pseudo_outputs(cfg, labels)]
    df = df[df[cols].notna().all(axis=1)]  # left out of this fold by utils.pseudo --max-std
    return comp.input_texts(df), df[cols].to_numpy(dtype=np.float32)


def train_fold(cfg: TrainConfig, df: pd.DataFrame, folds: np.ndarray, fold: int, accelerator,
               pseudo=None, on_validation=None):
    """Train one fold from scratch; returns (model with the best weights, tokenizer, oof, history).

    `on_validation(fold, step, metric value)`: called after each validation (a tuner's report;
    what it raises stops the run).

    `pseudo` (read_pseudo's result): extra training rows, never validated on. Mixed with the real
    rows, their losses weighted by cfg.pseudo_weight; or, with cfg.pseudo_epochs, trained on alone
    first, then the real rows for cfg.epochs.
    """
    from accelerate.utils import set_seed

    cfg, comp = resolve(cfg)
    metric = get_metric(comp.metric_name)
    set_seed(cfg.seed + fold)  # before the model: the head's initialisation is reproducible
    log = accelerator.print
    labels = class_labels(cfg, df) if cfg.task == "classification" else None
    y = targets_of(cfg, df, labels)
    tr, va = np.flatnonzero(folds != fold), np.flatnonzero(folds == fold)
    tokenizer = load_tokenizer(cfg.model)
    texts = comp.input_texts(df)
    train_texts, train_y, weights, pseudo_ds = [texts[i] for i in tr], y[tr], None, None
    p_texts = []
    if pseudo is not None:
        p_texts, p_y = pseudo_rows(cfg, pseudo, fold, labels)
        if labels is not None:  # soft labels: the real rows' classes as one-hot probabilities
            train_y = np.eye(len(labels), dtype=np.float32)[train_y.astype(int)]
        if cfg.pseudo_epochs:
            pseudo_ds = TextDataset(p_texts, tokenizer, cfg.max_len, p_y, fit=cfg.fit)
        else:
            weights = [1.0] * len(train_texts) + [cfg.pseudo_weight] * len(p_texts)
            train_texts, train_y = train_texts + p_texts, np.concatenate([train_y, p_y])
    train_ds = TextDataset(train_texts, tokenizer, cfg.max_len, train_y, weights, cfg.fit)
    valid_ds = TextDataset([texts[i] for i in va], tokenizer, cfg.max_len, y[va], fit=cfg.fit)
    n_cut = train_ds.n_truncated + valid_ds.n_truncated
    if n_cut:
        kept = {"head": "their first tokens kept", "head_tail": "their first and last tokens kept",
                "windows": "read in overlapping windows, predictions averaged"}[cfg.fit]
        log(f"fold {fold}: {n_cut} of {len(df)} texts truncated to max_len {cfg.max_len} ({kept})")

    n_out = (cfg.num_labels or len(labels)) if labels is not None else len(cfg.target_cols)
    spec = ModelSpec(
        pooling=cfg.pooling,
        attention_scorer=cfg.attention_scorer,
        layers=cfg.layers,
        num_outputs=n_out,
        task=cfg.task,
        head_dropout=cfg.head_dropout,
        target_names=tuple(map(str, labels)) if labels is not None else tuple(cfg.target_cols),
    )
    model = TextModel.from_backbone(
        cfg.model, spec, cfg.backbone_dropout, cfg.reinit_layers, cfg.gradient_checkpointing
    )
    # The labelled training rows' mean (class shares): what a blank text is predicted as, and where
    # --head-bias-mean starts the head (targets far from 0, such as scores 1-5, are then there from
    # the first step, not reached through the head's weights and the encoder's features).
    target_mean = (np.bincount(y[tr].astype(int), minlength=n_out) / len(tr) if cfg.task == "classification"
                   else y[tr, : len(cfg.target_cols)].astype(float).mean(0))
    if cfg.head_bias_mean:
        start = np.log(np.maximum(target_mean, 1e-6)) if cfg.task == "classification" else target_mean
        with torch.no_grad():
            model.head.bias.copy_(torch.as_tensor(start, dtype=model.head.bias.dtype))
    ydtype = torch.long if cfg.task == "classification" and pseudo is None else torch.float32
    collate = Collator(tokenizer.pad_token_id or 0, 8, ydtype)
    procs = accelerator.num_processes

    samplers = {}  # ours, not accelerate's wrappers: each epoch draws its batch order from them

    def loader(phase, ds):
        samplers[phase] = EpochBatches(ds.lengths, cfg.batch_size, cfg.seed + fold, cfg.group_by_length,
                                       procs)
        return DataLoader(ds, batch_sampler=samplers[phase], collate_fn=collate,
                          num_workers=cfg.num_workers)

    train_dl = loader("labelled", train_ds)
    # Every process gets at least one batch (a repeat if need be; the gather drops repeated rows).
    valid_batches = Batches(deal_evenly(sorted_batches(valid_ds.lengths, cfg.eval_batch_size), procs))
    valid_dl = DataLoader(valid_ds, batch_sampler=valid_batches, collate_fn=collate)

    optimizer = build_optimizer(model, cfg)
    model, optimizer, train_dl, valid_dl = accelerator.prepare(model, optimizer, train_dl, valid_dl)
    loaders = {"labelled": train_dl}
    if pseudo_ds is not None:
        loaders["pseudo"] = accelerator.prepare(loader("pseudo", pseudo_ds))
    # Epochs in order: the pseudo rows alone first (1st place's order), then the real rows.
    phases = ["pseudo"] * (cfg.pseudo_epochs if pseudo_ds is not None else 0) + ["labelled"] * cfg.epochs
    total = sum(math.ceil(len(loaders[ph]) / cfg.grad_accum) for ph in phases)
    if cfg.max_steps:
        total = min(total, cfg.max_steps)
    from transformers import get_cosine_schedule_with_warmup

    # Not prepared: stepped exactly once per optimizer step, on every process alike.
    scheduler = get_cosine_schedule_with_warmup(optimizer, int(cfg.warmup * total), total)

    best, best_state, best_pred, history, diverged = math.inf, None, None, [], 0
    step, next_eval, loss_sum, loss_n = 0, eval_period(cfg, math.inf), 0.0, 0
    t0 = time.time()
    bar = tqdm(total=total, desc=f"fold {fold}", disable=not show_progress(cfg.progress and accelerator.is_main_process))
    model.train()
    for epoch, phase in enumerate(phases):
        dl = loaders[phase]
        start_epoch(dl, samplers[phase], epoch)
        for i, batch in enumerate(dl):
            with accelerator.accumulate(model):
                preds = model(batch["input_ids"], batch["attention_mask"])
                loss = compute_loss(cfg, preds, batch["target"], batch.get("weight"))
                accelerator.backward(loss)
                if accelerator.sync_gradients and cfg.max_grad_norm > 0:
                    accelerator.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
                optimizer.step()
                optimizer.zero_grad()
            loss_sum, loss_n = loss_sum + loss.item(), loss_n + 1
            if not accelerator.sync_gradients:
                continue
            scheduler.step()
            step += 1
            bar.update(1)
            end_of_epoch = i == len(dl) - 1
            if step >= next_eval or end_of_epoch or step == total:
                pred = valid_ds.per_text(predict_loader(model, valid_dl, accelerator, len(valid_ds), cfg.task))
                m = scores(cfg, y[va], pred, metric.name)
                improved = m["score"] < best
                if improved:
                    best, best_pred = m["score"], pred
                    state = accelerator.unwrap_model(model).state_dict()
                    best_state = {k: v.detach().to("cpu", copy=True) for k, v in state.items()}
                entry = {"step": step, "epoch": epoch, "phase": phase,
                         "train_loss": loss_sum / max(loss_n, 1)}
                entry.update({k: v for k, v in m.items() if not isinstance(v, dict)})
                entry["best"], entry["lr"] = best, scheduler.get_last_lr()[0]
                history.append(entry)
                accelerator.log({f"fold{fold}/valid_{metric.name}": m[metric.name],
                                 f"fold{fold}/train_loss": entry["train_loss"], f"fold{fold}/lr": entry["lr"]},
                                step=step)
                shown = -best if metric.greater_is_better else best
                log(
                    f"fold {fold} step {step}/{total} | train loss {entry['train_loss']:.4f} | "
                    f"valid {metric.name} {m[metric.name]:.4f} | best {shown:.4f}{' *' if improved else ''}"
                )
                loss_sum, loss_n = 0.0, 0
                next_eval = step + eval_period(cfg, best)
                if on_validation is not None:
                    on_validation(fold, step, m[metric.name])
                if not math.isfinite(m["score"]) and not weights_finite(model):
                    diverged = step  # NaN/inf weights never recover: stop this fold now
                    break
            if step >= total:
                break
        if step >= total or diverged:
            break
    bar.close()

    if best_state is None:
        raise TrainingError(
            f"fold {fold}: no finite validation score in {step} steps "
            f"({'weights became NaN/inf' if diverged else 'every score was NaN/inf'} "
            f"by step {step}, precision {accelerator.mixed_precision}); nothing was saved for "
            "this fold. Try a lower --lr / --head-lr, or --precision fp32 or bf16 (fp16 can overflow)"
        )
    if diverged:
        log(f"fold {fold}: weights became NaN/inf at step {diverged}; keeping the best checkpoint")
    final = accelerator.unwrap_model(model)
    final.load_state_dict(best_state)
    accelerator.free_memory()  # drop accelerate's references before the next fold
    oof = pd.DataFrame({"id": df[cfg.id_col].iloc[va].to_numpy()})
    if cfg.task == "classification":
        oof[cfg.target_cols[0]] = df[cfg.target_cols[0]].iloc[va].to_numpy()
        # --num-labels above the classes seen: an unseen class has no name to predict
        oof["pred"] = [labels[j] for j in best_pred[:, : len(labels)].argmax(1)]
        for j, lab in enumerate(labels):
            oof[f"prob_{lab}"] = best_pred[:, j]
    elif len(cfg.target_cols) == 1:
        oof[cfg.target_cols[0]] = y[va, 0]
        oof["pred"] = best_pred[:, 0]
    else:
        for j, c in enumerate(cfg.target_cols):
            oof[c] = y[va, j]
            oof[f"pred_{c}"] = best_pred[:, j]
    oof["fold"] = fold
    info = {"fold": fold, "best_score": best, "steps": step, "seconds": time.time() - t0}
    info["n_train"], info["n_valid"], info["n_truncated"] = len(tr), len(va), n_cut
    info["n_pseudo"] = len(p_texts)
    info["target_mean"] = target_mean.tolist()  # what a blank text is predicted as at inference
    return final, tokenizer, oof, {**info, "history": history}


def train_fold_in_memory(cfg: TrainConfig, df, folds, fold: int, state: dict, pseudo=None, on_validation=None):
    """train_fold, restarted with half the micro-batch and twice the gradient accumulation after an
    out-of-memory error (accelerate's find_executable_batch_size, and its test of what such an
    error is): the effective batch, hence the optimizer steps and the schedule, stay the same.
    Said in one line; the fold's history records the micro-batch it used. `state` ({"accelerator",
    "size"}) carries the micro-batch that fits, and its accelerator, on to the next folds."""
    import inspect

    from accelerate.utils import find_executable_batch_size

    effective = cfg.batch_size * cfg.grad_accum

    def attempt(batch_size):
        if batch_size < 1 or effective % batch_size:
            raise TrainingError(f"fold {fold}: out of memory at micro-batch {state['size']}, which cannot be "
                                f"halved keeping the effective batch {effective}: lower --max-len, or "
                                "--gradient-checkpointing, or a smaller model")
        ga = effective // batch_size
        if batch_size != state["size"]:
            state["accelerator"].free_memory()
            trackers = state["accelerator"].trackers
            state["accelerator"] = accelerator_for(cfg.precision, ga)  # its accumulation steps
            state["accelerator"].trackers = trackers
            state["accelerator"].print(
                f"fold {fold}: out of memory at micro-batch {state['size']}; now {batch_size} x {ga} "
                f"accumulation steps (effective batch {effective}: the same optimizer steps and schedule)")
            state["size"] = batch_size
        result = train_fold(dataclasses.replace(cfg, batch_size=batch_size, grad_accum=ga), df, folds, fold,
                            state["accelerator"], pseudo, on_validation)
        result[3].update(batch_size=batch_size, grad_accum=ga)
        return result

    kw = {"starting_batch_size": state["size"]}
    if "reduce_batch_size_fn" in inspect.signature(find_executable_batch_size).parameters:
        kw["reduce_batch_size_fn"] = lambda: state["size"] // 2  # accelerate >= 1.x: 10% by default
    return find_executable_batch_size(attempt, **kw)()


# ----------------------------------------------------------------------------- the run


def _versions() -> dict:
    import transformers

    return {"kit": __version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "python": sys.version.split()[0]}


def _git() -> dict:
    """The kit's git commit and whether its tree had changes, when it runs from a checkout."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return {}
    try:
        run = lambda *a: subprocess.run(["git", "-C", str(root), *a], capture_output=True, text=True,  # noqa: E731
                                        timeout=10, check=True).stdout.strip()
        return {"commit": run("rev-parse", "HEAD"), "dirty": bool(run("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError):
        return {}


def _hardware() -> dict:
    """CPU model and count, GPU names (no host names)."""
    import os
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {"cpu": cpu, "cpu_count": os.cpu_count(), "gpus": gpus, "gpu_count": len(gpus)}


def provenance(cfg: TrainConfig) -> dict:
    """How to reproduce a run: the command that makes its config (and the command line it was
    started with, from a shell), the code's git commit, the hardware."""
    from .config import to_command

    out = {"command": to_command(cfg)}
    if sys.argv and Path(sys.argv[0]).resolve() == Path(__file__).resolve():  # python -m utils.train
        out["argv"] = ["python", "-m", "utils.train", *sys.argv[1:]]
    return {**out, "git": _git(), "hardware": _hardware()}


def prepare_out(cfg: TrainConfig, out: Path) -> None:
    """Check that OUT can hold this run (same arguments, or --overwrite), and record them."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(".*.tmp"):  # left by a killed process; never read
        shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink()
    saved_path = out / "config.json"
    if saved_path.exists():
        saved, current = json.loads(saved_path.read_text()), identity(cfg)
        defaults = json.loads(json.dumps({f.name: f.default for f in dataclasses.fields(TrainConfig)}))
        defaults["fit"] = "head"  # what every run did before --fit existed
        for key in list(current):
            # A run saved before a setting existed (or before its inputs were hashed): the
            # setting's default is what it ran with; its paths decide for the inputs.
            if key not in saved and (key in CONTENT_KEYS or current[key] == defaults.get(key)):
                current.pop(key)
        diff = differences(saved, current)
        # No finished fold (e.g. the last command had a typo in --model): nothing to lose, so
        # the corrected command simply starts over instead of asking for --overwrite.
        if diff and not cfg.overwrite and finished_folds(out):
            raise RunError(
                f"{out} holds a run made with different arguments or inputs ({diff}); "
                "use another --out, the same arguments and inputs, or --overwrite"
            )
        if diff:
            for p in [*out.glob("fold[0-9]*"), out / "oof.csv", out / "metrics.json", out / "folds.csv"]:
                shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
    write_json(saved_path, identity(cfg))


def assign_folds(cfg: TrainConfig, df: pd.DataFrame, out: Path) -> np.ndarray:
    """Folds from --folds-csv, else from OUT/folds.csv (resume), else as the competition makes
    them: its folds file (beside the train file), grouped by its column, or stratified."""
    cfg, comp = resolve(cfg)
    ids = df[cfg.id_col]
    source = cfg.folds_csv or (out / "folds.csv" if (out / "folds.csv").exists() else "")
    if not source and comp.folds == "file":
        source = Path(cfg.train_csv).parent / comp.folds_file
    if source:
        return read_folds(source, ids, cfg.folds)
    group = comp.group_col if comp.folds == "group" else ""
    return make_folds(df, cfg.folds, cfg.fold_seed, cfg.target_cols, cfg.task, group)


def finished_folds(out: Path) -> list:
    """Fold numbers of OUT's finished folds."""
    return [int(p.name[4:]) for p in fold_dirs(out, required=False)]


def oof_outputs(cfg: TrainConfig, oof: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(truth, predictions (N, outputs)) of an oof.csv as the metrics take them: class indices and
    probabilities (classification), or (N, T) values."""
    if cfg.task == "classification":
        labels = [c[5:] for c in oof.columns if c.startswith("prob_")]
        truth = oof[cfg.target_cols[0]].astype(str).map({lab: i for i, lab in enumerate(labels)})
        return truth.to_numpy(), oof[[f"prob_{lab}" for lab in labels]].to_numpy()
    cols = list(cfg.target_cols)
    pcols = ["pred"] if len(cols) == 1 else [f"pred_{c}" for c in cols]
    return oof[cols].to_numpy(dtype=float), oof[pcols].to_numpy(dtype=float)


def metric_summary(metric, truth: np.ndarray, pred: np.ndarray, folds: np.ndarray) -> dict:
    """The competition's metric over the OOF rows: per fold and overall. A metric that labels
    through a rule (F1's threshold, kappa's cut points) is scored with each fold's rule fitted on
    the other folds' rows only (one fold done: the default rule, said so), and the rule fitted on
    every OOF row is saved for the test set."""
    done = sorted(int(k) for k in np.unique(folds))
    res = {"metric": metric.name,
           "fold_score": {k: metric.score(truth[folds == k], pred[folds == k]) for k in done}}
    if not metric.rule:
        res["cv"] = metric.score(truth, pred)
        return res
    res["cv_at_default_rule"] = metric.score(truth, pred)
    if len(done) >= 2:
        res["cv"], rules = metric.honest_score(truth, pred, folds)
        res["rules_per_fold"], res["cv_rule"] = rules, "each fold's rule fitted on the other folds"
    else:
        res["cv"], res["cv_rule"] = res["cv_at_default_rule"], "the default rule (one fold: no other to fit it on)"
    res["rule"] = metric.fit_rule(truth, pred)
    return res


def summarize(cfg: TrainConfig, out: Path) -> dict:
    """Rebuild OUT/oof.csv and OUT/metrics.json from the finished folds."""
    cfg, comp = resolve(cfg)
    done = finished_folds(out)
    oof = pd.concat([pd.read_csv(out / f"fold{k}" / "oof.csv", dtype={"id": str}) for k in done])
    infos = {k: json.loads((out / f"fold{k}" / "history.json").read_text()) for k in done}
    write_csv(out / "oof.csv", oof)
    truth, pred = oof_outputs(cfg, oof)
    folds = oof["fold"].to_numpy()
    m = scores(cfg, truth, pred)  # the loss's own figures, beside the competition's metric
    if cfg.task == "classification":
        metrics = {"cv_log_loss": m["log_loss"], "cv_accuracy": m["accuracy"]}
        metrics["fold_log_loss"] = {k: scores(cfg, truth[folds == k], pred[folds == k])["log_loss"] for k in done}
    else:
        metrics = {"cv_rmse": m["rmse"], "fold_rmse": {k: infos[k]["best_score"] for k in done}}
        if len(cfg.target_cols) > 1:
            metrics["mcrmse"], metrics["rmse_per_target"] = m["rmse"], m["rmse_per_target"]
            metrics["fold_rmse"] = {k: scores(cfg, truth[folds == k], pred[folds == k])["rmse"] for k in done}
    metrics.update(metric_summary(get_metric(comp.metric_name), truth, pred, folds))
    metrics.update(
        competition=comp.to_dict(),
        folds_done=done,
        n_oof=len(oof),
        seconds_per_fold={k: round(infos[k]["seconds"], 1) for k in done},
        config=identity(cfg),
        versions=_versions(),
        **provenance(cfg),
    )
    write_json(out / "metrics.json", metrics)
    return metrics


def run_cv(cfg: TrainConfig, on_validation=None) -> dict:
    """Train every fold not finished yet (or just cfg.only_folds); returns metrics.json's content.
    `on_validation(fold, step, value)`: called after each validation (utils.tune's pruning)."""
    cfg, comp = resolve(cfg)  # the competition's columns, task and fit: what the run records
    accelerator = make_accelerator(cfg)
    # Says how many processes really train (`accelerate launch --num_processes 2` on a machine
    # without GPUs starts only one; see README for the CPU command).
    accelerator.print(f"{accelerator.num_processes} process(es) on {accelerator.device.type}, "
                      f"mixed precision {accelerator.mixed_precision}")
    out = Path(cfg.out)
    if accelerator.is_main_process:
        prepare_out(cfg, out)
    accelerator.wait_for_everyone()
    start_trackers(accelerator, cfg)
    if not show_progress(cfg.progress):  # transformers' own bars (loading weights) too
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    limit = max_positions(cfg.model)
    if limit and cfg.max_len > limit:
        raise ValueError(f"--max-len {cfg.max_len} is above what {cfg.model} takes ({limit} tokens): "
                         f"use --max-len {limit} or less (--fit head_tail keeps a long text's end too)")
    df = load_train(cfg)
    folds = assign_folds(cfg, df, out)
    if accelerator.is_main_process:
        write_csv(out / "folds.csv", pd.DataFrame({"id": df[cfg.id_col], "fold": folds}))
    todo = cfg.only_folds or tuple(range(cfg.folds))
    pseudo = None
    if cfg.pseudo_csv:
        fingerprint = folds_fingerprint(df[cfg.id_col], folds)
        outputs = pseudo_outputs(cfg, class_labels(cfg, df) if cfg.task == "classification" else None)
        pseudo = read_pseudo(cfg.pseudo_csv, comp.text_cols, fingerprint, todo, outputs, comp.id_col)
        if not pseudo[1]:
            accelerator.print(f"warning: {Path(cfg.pseudo_csv).name} has only '{outputs[0]}', no "
                              f"{outputs[0]}_fold{{k}}: "
                              "each fold trains on labels from models that saw its validation rows, "
                              "so the CV is optimistic")
        accelerator.print(f"{len(pseudo[0])} pseudo-labelled rows join every fold's training side "
                          + (f"({cfg.pseudo_epochs} epoch(s) alone first)" if cfg.pseudo_epochs
                             else f"(mixed, weight {cfg.pseudo_weight:g})"))
    metrics = {}
    memory = {"accelerator": accelerator, "size": cfg.batch_size}  # the micro-batch that fits
    for fold in todo:
        if (out / f"fold{fold}").is_dir():
            accelerator.print(f"fold {fold}: finished earlier, skipped")
            continue
        model, tokenizer, oof, info = train_fold_in_memory(cfg, df, folds, fold, memory, pseudo, on_validation)
        if accelerator.is_main_process:
            with atomic_dir(out / f"fold{fold}") as tmp:
                model.save(tmp, tokenizer, extra={"fold": fold, "score": info["best_score"],
                                                  "target_mean": info["target_mean"],
                                                  "train": identity(cfg), "competition": comp.to_dict()})
                write_csv(tmp / "oof.csv", oof)
                write_json(tmp / "history.json", info)
            metrics = summarize(cfg, out)
            accelerator.print(
                f"fold {fold}: best {metrics['metric']} {metrics['fold_score'][fold]:.4f} in "
                f"{info['seconds']:.0f}s | cv {metrics['metric']} over folds {metrics['folds_done']}: "
                f"{metrics['cv']:.4f}"
            )
        accelerator.wait_for_everyone()
        del model
    if accelerator.is_main_process and not metrics and finished_folds(out):
        metrics = summarize(cfg, out)
    if cfg.log_with:
        accelerator.end_training()
    return metrics


def launch(cfg: TrainConfig, num_processes: int = 1) -> dict:
    """run_cv in this process, or on `num_processes` GPUs/processes from a notebook (Kaggle T4 x2)
    through accelerate's notebook_launcher; returns the run's metrics.json content."""
    if num_processes > 1:
        from accelerate import notebook_launcher

        notebook_launcher(run_cv, args=(cfg,), num_processes=num_processes)
        return json.loads((Path(cfg.out) / "metrics.json").read_text())
    return run_cv(cfg)


def main(argv=None) -> int:
    """CLI entry point: errors a user can act on are one line on stderr and exit code 2."""
    try:
        cfg = config_from_args(argv)
        run_cv(cfg)
    except (DataError, RunError, TrainingError, ValueError, OSError) as e:
        return cli_error(e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
