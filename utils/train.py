"""The one training loop: K-fold cross-validation of an encoder + pooling + head.

    python -m utils.train --train-csv data/train.csv --model roberta-base --out runs/rb-attn
    accelerate launch --num_processes 2 -m utils.train ...   # data-parallel (e.g. Kaggle T4 x2)

Outputs in OUT (each written atomically): fold{k}/ (self-contained model, its OOF and history;
a fold is finished when its folder exists), folds.csv, oof.csv, metrics.json, config.json.
Re-running the same command resumes: finished folds are skipped, an unfinished one restarts.

The competition is resolved once, at the edge (the CLI, a notebook, utils.tune), and passed
down: every function here takes the frozen Competition beside the TrainConfig.

One rule for predictions: oof.csv holds them as the submission writes them (values clipped to the
competition's target_range), and the CV (metrics.json, each fold's checkpoint choice, the log
lines) is the competition's metric of exactly those, so anyone recomputing it from oof.csv gets it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from . import backbone as bb
from . import eda, resume, runs
from .average import WeightAverage, trained_state
from .batching import (
    Batches,
    EpochBatches,
    TextDataset,
    deal_evenly,
    sorted_batches,
    start_epoch,
)
from .cli import show_progress
from .competition import Competition
from .config import (
    TrainConfig,
    check_settings,
    cli_error,
    competition_for,
    for_competition,
    identity,
    ignored_settings,
    parse_args,
)
from .data import (
    REFERENCE_ID,
    DataError,
    _rows,
    folds_fingerprint,
    pseudo_info_path,
    read_pseudo,
    read_teacher,
)
from .env import versions
from .files import atomic_dir
from .metrics import get_metric
from .model import (
    ModelSpec,
    TextModel,
    _pretrained,
    encoder_layers,
    load_tokenizer,
    max_positions,
)
from .objective import objective_of
from .runfolder import RunError, assign_folds, prepare_out, provenance
from .shapes import TextRows, shape_of
from .tables import read_split
from .trackers import accelerator_for, check_trackers, start_trackers

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
TEXT_ROWS = TextRows()


class TrainingError(RuntimeError):
    """A fold that produced no usable model (e.g. every validation score NaN)."""


# ----------------------------------------------------------------------------- data


def se_cols(cfg: TrainConfig, comp: Competition) -> list:
    """The extra target column loss 'se' reads: the competition's per-row standard error."""
    return [comp.standard_error_col or "standard_error"] if cfg.loss == "se" else []


def load_train(cfg: TrainConfig, comp: Competition) -> pd.DataFrame:
    """Validated training frame (the competition's file and the tables it joins) after the
    optional reference-row drop and subsample."""
    df = read_split(comp, cfg.train_csv, "train", extra_cols=tuple(se_cols(cfg, comp)))
    if cfg.drop_reference:
        df = df[df[comp.id_col] != REFERENCE_ID].reset_index(drop=True)
    if cfg.max_rows and cfg.max_rows < len(df):
        df = df.sample(n=cfg.max_rows, random_state=cfg.fold_seed).reset_index(drop=True)
    return df


def class_labels(cfg: TrainConfig, comp: Competition, df: pd.DataFrame) -> list | None:
    """Sorted class labels (a classifier; None otherwise), checked against --num-labels; the
    option columns of multiple choice; a retriever's catalogue ids, in the catalogue's order."""
    items = shape_of(comp, cfg).items(comp, Path(cfg.train_csv).parent)  # a retriever's catalogue
    order = items["id"].tolist() if items is not None else comp.options or comp.classes
    try:
        return objective_of(comp).labels(df[comp.target_cols[0]], cfg.num_labels, Path(cfg.train_csv).name,
                                         order)
    except ValueError as e:
        raise DataError(str(e)) from None


def targets_of(cfg: TrainConfig, comp: Competition, df: pd.DataFrame, labels=None) -> np.ndarray:
    """(N, T) float targets (plus the standard error column for loss 'se'), or (N,) class ids."""
    return objective_of(comp).targets(df, comp.target_cols, labels, se_cols(cfg, comp))


# ----------------------------------------------------------------------------- metrics


def scores(comp: Competition, y: np.ndarray, pred: np.ndarray) -> dict:
    """What a validation scores (the one place that decides), for predictions (N, outputs): the
    loss's own figures (log-loss and accuracy, or RMSE), then the competition's metric (labels
    under its default rule: nothing is fitted on the rows scored), which always wins its name;
    'score' is what checkpoints minimise: the competition's metric, as a loss."""
    obj, m = objective_of(comp), get_metric(comp.metric_name)
    out = obj.own_scores(y, pred, comp.target_cols)
    truth, given = obj.truth(y, len(comp.target_cols)), obj.scored(y, pred)
    out[m.name] = m.score(truth, given)
    out["score"] = m.loss(truth, given)
    return out


def as_submitted(comp, pred: np.ndarray) -> np.ndarray:
    """Predictions (N, outputs) as the submission writes them: values clipped to the competition's
    target_range (utils.outputs' submission_columns), so the CV is what the submission would
    score; class probabilities, and a competition without a range, unchanged."""
    rng = comp.target_range
    return pred if objective_of(comp).classes or not rng else np.clip(pred, rng[0], rng[1])


def compute_loss(cfg: TrainConfig, comp: Competition, preds: torch.Tensor, y: torch.Tensor,
                 weight=None) -> torch.Tensor:
    """Training loss in fp32 (utils.objective's): preds (B, outputs), y (B, T[+1]) or (B,) class
    ids; `weight` (B,): per-row weights (pseudo rows mixed with real ones)."""
    return objective_of(comp).loss(preds, y, weight, len(comp.target_cols), cfg.loss, cfg.min_se)


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


def backbone_config(cfg: TrainConfig):
    """The backbone's transformers config (its family: utils.backbone.family_of)."""
    from transformers import AutoConfig

    return _pretrained(AutoConfig, cfg.model)


def check_backbone(cfg: TrainConfig) -> bb.Precision:
    """What this backbone cannot do with these options, refused in one line before any work: a
    pooling it cannot use, gradient checkpointing its model lacks (MPNet), 4-bit loading without a
    CUDA GPU and bitsandbytes, fp16 without CUDA.
    Returns the precision it trains in here (utils.backbone.precision_for: its `note` says why
    its family trains in another precision than an encoder would, or warns of an fp16 it breaks
    in)."""
    config = backbone_config(cfg)
    fam = bb.family_of(config)
    bb.check_pooling(cfg.pooling, fam)
    if cfg.gradient_checkpointing:
        bb.check_checkpointing(config)
    if cfg.load_in_4bit:
        bb.check_4bit()
    return bb.precision_for(cfg.precision, fam)


def memory_estimate(cfg: TrainConfig, precision: bb.Precision, device) -> str:
    """The one line said before training: the estimated peak GPU memory of this run's backbone,
    precision, LoRA / 4-bit, max_len and micro-batch against the device's memory."""
    config = backbone_config(cfg)
    hidden = config.hidden_size
    head = hidden * hidden + 3 * hidden if "attention" in cfg.pooling else hidden
    est = bb.estimate_memory(config, precision.name, cfg.batch_size, cfg.max_len, cfg.lora_r,
                             cfg.lora_targets, cfg.load_in_4bit, cfg.gradient_checkpointing, head,
                             cfg.lora_dropout)
    if device.type != "cuda":
        return bb.memory_line(est, None)
    props = torch.cuda.get_device_properties(device)
    return bb.memory_line(est, props.total_memory, props.name)


def make_accelerator(cfg: TrainConfig, precision: bb.Precision):
    """An Accelerator for this config (one process, or each process of `accelerate launch`), with
    its trackers (--log-with) writing under OUT/logs."""
    return accelerator_for(precision, cfg.grad_accum, cfg.log_with, Path(cfg.out) / "logs")


# ----------------------------------------------------------------------------- one fold


def weights_finite(model) -> bool:
    """False once any parameter holds NaN or inf (training has diverged for good)."""
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


@torch.no_grad()
def predict_loader(model, loader, accelerator, n: int, activate, shape: TextRows = TEXT_ROWS) -> np.ndarray:
    """Predictions (n, outputs) in dataset order (the shape's forward, then `activate`), gathered
    across processes."""
    model.eval()
    idx, out = [], []
    for batch in loader:
        preds = shape.forward(model, batch).float()
        out.append(activate(preds))
        idx.append(batch["index"])
    if out and out[0].ndim == 3:  # an output per token (B, S, heads): batches padded to the widest with 0
        width = max(o.shape[1] for o in out)
        out = [torch.nn.functional.pad(o, (0, 0, 0, width - o.shape[1])) for o in out]
    idx, out = torch.cat(idx), torch.cat(out)
    # Processes may hold different row counts (and token widths): pad, gather, then drop the padding (-1).
    idx = accelerator.pad_across_processes(idx, pad_index=-1)
    if out.ndim == 3:
        out = accelerator.pad_across_processes(out, dim=1)
    out = accelerator.pad_across_processes(out)
    idx, out = accelerator.gather((idx, out))
    keep = (idx >= 0).cpu().numpy()
    rows = idx.cpu().numpy()[keep]
    result = np.zeros((n, *out.shape[1:]), dtype=np.float64)
    result[rows] = out.cpu().numpy()[keep]  # repeated rows: same values
    if len(np.unique(rows)) != n:  # by index: a diverged model's NaN predictions are still rows
        raise RuntimeError("validation predictions do not cover every row")
    model.train()
    return result


def pseudo_outputs(comp: Competition, labels=None) -> list:
    """The pseudo-label columns a run reads: its targets, or prob_<label> per class."""
    obj = objective_of(comp)
    return obj.outputs.pseudo_columns(obj.output_names(comp.target_cols, labels))


TEACHER = "teacher:"  # the prefix of a --distil-csv's columns joined onto the training rows


def pseudo_rows(comp: Competition, pseudo, fold: int, labels=None):
    """(texts, (P, outputs) targets) of the pseudo-labels fold `fold` trains on: its own columns
    O_fold{k} (models that never saw its validation rows), else the shared O columns; class
    probabilities for a classifier (soft labels)."""
    df, per_fold = pseudo
    cols = [f"{o}_fold{fold}" if per_fold else o for o in pseudo_outputs(comp, labels)]
    df = df[df[cols].notna().all(axis=1)]  # left out of this fold by utils.pseudo --max-std
    obj = objective_of(comp)
    return comp.input_texts(df), obj.taught(df, obj.outputs.signal_values(df[cols]))


@dataclass
class FoldData:
    """One fold's rows, as its stages read them."""

    tokenizer: object
    labels: list | None  # class labels (a classifier), option columns, catalogue ids; else None
    y: np.ndarray  # every row's targets: (N, T[+1]) values or (N,) class ids
    tr: np.ndarray  # training row indices
    va: np.ndarray  # validation row indices
    train_ds: TextDataset  # the training rows (+ pseudo rows mixed in)
    valid_ds: TextDataset
    pseudo_ds: TextDataset | None  # pseudo rows trained on alone first (--pseudo-epochs)
    n_pseudo: int
    n_cut: int  # texts longer than max_len, of the labelled rows and the pseudo rows
    fit_note: str = ""  # how the training rows' long texts are read, where the shape decides (spans: windows)
    items_ds: TextDataset | None = None  # a retriever's catalogue, tokenized
    negatives: np.ndarray | None = None  # a retriever's mined hard negatives per training row (shape.prepare)


def fold_data(cfg: TrainConfig, comp, df: pd.DataFrame, folds: np.ndarray, fold: int, pseudo=None) -> FoldData:
    """Stage 1, data: the fold's training and validation rows, tokenized; pseudo rows mixed in
    (losses weighted by --pseudo-weight) or kept apart (--pseudo-epochs)."""
    obj, shape = objective_of(comp), shape_of(comp, cfg)
    labels = class_labels(cfg, comp, df)
    y = targets_of(cfg, comp, df, labels)
    tr, va = np.flatnonzero(folds != fold), np.flatnonzero(folds == fold)
    tr = tr[obj.trainable(y[tr])]  # e.g. a reranker's row whose candidates miss the true item: validated only
    tokenizer = load_tokenizer(cfg.model)
    texts = shape.inputs(comp, df)
    train_texts, train_y, weights, pseudo_ds, p_texts = [texts[i] for i in tr], y[tr], None, None, []
    own = [f"{TEACHER}{o}_fold{fold}" for o in pseudo_outputs(comp, labels)]
    if own and own[0] in df.columns:  # --distil-csv: the fold-k teachers' predictions, made without fold k's rows
        teacher = obj.outputs.signal_values(df[own].iloc[tr])
        train_y = obj.distilled(train_y, teacher, cfg.distil_weight, cfg.distil_temperature)
    if pseudo is not None:
        p_texts, p_y = pseudo_rows(comp, pseudo, fold, labels)
        if labels is not None and train_y.ndim == 1:  # soft labels: the real rows' classes as one-hot probabilities
            train_y = obj.soft(train_y, len(labels))
        if cfg.pseudo_epochs:
            pseudo_ds = shape.dataset(p_texts, tokenizer, cfg.max_len, p_y, fit=cfg.fit)
        else:
            weights = [1.0] * len(train_texts) + [cfg.pseudo_weight] * len(p_texts)
            train_texts, train_y = train_texts + p_texts, np.concatenate([train_y, p_y])
    train_ds = shape.dataset(train_texts, tokenizer, cfg.max_len, train_y, weights, cfg.fit)
    valid_ds = shape.dataset([texts[i] for i in va], tokenizer, cfg.max_len, y[va], fit=cfg.fit)
    items = shape.items(comp, Path(cfg.train_csv).parent)  # a retriever's catalogue, as long as a query may be
    items_ds = None if items is None else TextDataset(items["text"].tolist(), tokenizer, cfg.max_len)
    return FoldData(tokenizer, labels, y, tr, va, train_ds, valid_ds, pseudo_ds, len(p_texts),
                    sum(ds.n_truncated for ds in (train_ds, valid_ds, pseudo_ds) if ds is not None),
                    getattr(train_ds, "fit_note", ""), items_ds)


def fold_model(cfg: TrainConfig, comp: Competition, data: FoldData,
               precision: bb.Precision) -> tuple[TextModel, np.ndarray]:
    """Stage 2, model: the backbone with a fresh pooling layer and head (after seeding), and the
    labelled training rows' mean output (class shares): what a blank text is predicted as, and
    where --head-bias-mean starts the head (targets far from 0, such as scores 1-5, are then
    there from the first step, not reached through the head's weights and the encoder's
    features)."""
    obj = objective_of(comp)
    n_out = obj.num_outputs(comp.target_cols, data.labels, cfg.num_labels)
    spec = ModelSpec(
        pooling=cfg.pooling,
        attention_scorer=cfg.attention_scorer,
        layers=cfg.layers,
        num_outputs=n_out,
        task=obj.name,
        head_dropout=cfg.head_dropout,
        target_names=obj.output_names(comp.target_cols, data.labels),
        lora_r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        lora_targets=cfg.lora_targets,
        load_in_4bit=cfg.load_in_4bit,
    )
    model = TextModel.from_backbone(
        cfg.model, spec, cfg.backbone_dropout, cfg.reinit_layers, cfg.gradient_checkpointing, precision
    )
    target_mean = obj.target_mean(data.y[data.tr], len(comp.target_cols), n_out)
    if cfg.head_bias_mean and n_out:
        with torch.no_grad():
            model.head.bias.copy_(torch.as_tensor(obj.head_bias(target_mean), dtype=model.head.bias.dtype))
    return model, target_mean


def fold_batches(cfg: TrainConfig, comp: Competition, data: FoldData, fold: int, accelerator, soft: bool) -> dict:
    """The batches: {phase: DataLoader} for the training phases ("labelled", and "pseudo"
    with --pseudo-epochs), their samplers (each epoch draws its order from them), the validation
    loader, and the phases in order: the pseudo rows alone first (1st place's order), then the
    real rows."""
    shape, dtype = shape_of(comp, cfg), objective_of(comp).target_dtype(soft)
    collate = shape.collator(data.tokenizer, dtype, data, cfg.seed + fold)
    samplers, loaders = {}, {}
    for phase, ds in (("labelled", data.train_ds), ("pseudo", data.pseudo_ds)):
        if ds is not None:
            samplers[phase] = EpochBatches(ds.lengths, cfg.batch_size, cfg.seed + fold, cfg.group_by_length,
                                           accelerator.num_processes)
            loaders[phase] = DataLoader(ds, batch_sampler=samplers[phase], collate_fn=collate,
                                        num_workers=cfg.num_workers)
    # Every process gets at least one batch (a repeat if need be; the gather drops repeated rows).
    valid_batches = Batches(deal_evenly(sorted_batches(data.valid_ds.lengths, cfg.eval_batch_size),
                                        accelerator.num_processes))
    valid = DataLoader(data.valid_ds, batch_sampler=valid_batches,
                       collate_fn=shape.eval_collator(data.tokenizer, dtype))
    phases = ["pseudo"] * (cfg.pseudo_epochs if data.pseudo_ds is not None else 0) + ["labelled"] * cfg.epochs
    return {"loaders": loaders, "samplers": samplers, "valid": valid, "phases": phases, "collate": collate,
            "extra": shape.loaders(data, cfg.eval_batch_size, data.tokenizer, accelerator.num_processes)}


def fold_optimisation(cfg: TrainConfig, comp: Competition, data: FoldData, model, fold: int, accelerator,
                      soft: bool):
    """Stage 3, optimisation: the batches (fold_batches), AdamW and the warmup + cosine schedule
    over the optimizer steps of every phase, prepared by accelerate; returns (model, optimizer,
    scheduler, {"loaders", "samplers", "phases", "valid", "total"})."""
    from transformers import get_cosine_schedule_with_warmup

    b = fold_batches(cfg, comp, data, fold, accelerator, soft or bool(cfg.distil_csv))  # distilled: soft targets
    optimizer = build_optimizer(model, cfg)
    model, optimizer, train_dl, valid_dl = accelerator.prepare(model, optimizer, b["loaders"]["labelled"], b["valid"])
    loaders = {"labelled": train_dl}
    if "pseudo" in b["loaders"]:
        loaders["pseudo"] = accelerator.prepare(b["loaders"]["pseudo"])
    extra = {name: accelerator.prepare(dl) for name, dl in b["extra"].items()}  # e.g. a catalogue's items
    total = sum(math.ceil(len(loaders[ph]) / cfg.grad_accum) for ph in b["phases"])
    if cfg.max_steps:
        total = min(total, cfg.max_steps)
    # Not prepared: stepped exactly once per optimizer step, on every process alike.
    scheduler = get_cosine_schedule_with_warmup(optimizer, int(cfg.warmup * total), total)
    return model, optimizer, scheduler, {**b, "loaders": loaders, "valid": valid_dl, "total": total, "extra": extra}


def truncation_note(cfg: TrainConfig, fold: int, n_cut: int, n_rows: int, fit_note: str = "") -> str:
    """The line saying how many texts are longer than max_len, and what --fit keeps of them (or,
    where the shape decides, `fit_note`: a span task reads them whole in windows)."""
    if fit_note:
        return f"fold {fold}: {n_cut} of {n_rows} texts longer than max_len {cfg.max_len}, {fit_note}"
    kept = {"head": "their first tokens kept", "head_tail": "their first and last tokens kept",
            "windows": "read in overlapping windows, predictions averaged"}[cfg.fit]
    return f"fold {fold}: {n_cut} of {n_rows} texts truncated to max_len {cfg.max_len} ({kept})"


def train_fold(cfg: TrainConfig, comp: Competition, df: pd.DataFrame, folds: np.ndarray, fold: int, accelerator,
               precision: bb.Precision, pseudo=None, on_validation=None):
    """Train one fold in `precision` (the backbone's weights as they load; the accelerator
    autocasts), from scratch or from its saved state (utils.resume); returns (model with the best
    weights, tokenizer, oof, history). The oof rows hold the predictions as the submission writes
    them (as_submitted).

    `on_validation(fold, step, metric value)`: called after each validation (a tuner's report;
    what it raises stops the run).

    `pseudo` (read_pseudo's result): extra training rows, never validated on. Mixed with the real
    rows, their losses weighted by cfg.pseudo_weight; or, with cfg.pseudo_epochs, trained on alone
    first, then the real rows for cfg.epochs.
    """
    from accelerate.utils import set_seed

    metric, obj, shape, log = get_metric(comp.metric_name), objective_of(comp), shape_of(comp, cfg), accelerator.print
    set_seed(cfg.seed + fold)  # before the model: the head's initialisation is reproducible
    data = fold_data(cfg, comp, df, folds, fold, pseudo)
    if data.n_cut:
        log(truncation_note(cfg, fold, data.n_cut, len(df) + data.n_pseudo, data.fit_note))
    model, target_mean = fold_model(cfg, comp, data, precision)
    shape.prepare(cfg, data, model, accelerator.device)  # e.g. hard negatives, mined by the untrained model
    model, optimizer, scheduler, b = fold_optimisation(cfg, comp, data, model, fold, accelerator, pseudo is not None)
    loaders, samplers, phases, valid_dl, total = b["loaders"], b["samplers"], b["phases"], b["valid"], b["total"]
    y_va = data.y[data.va]

    def embed(name, n):  # another loader's rows through the model (a catalogue's items)
        return predict_loader(model, b["extra"][name], accelerator, n, obj.activate, shape)

    # Stage 4, the loop: train, validate on schedule, keep the best weights, save (utils.resume).
    average = WeightAverage(accelerator.unwrap_model(model), cfg.ema)  # decay 0: none kept

    def keep():  # the fold's state, to resume from (every process calls it; the main one writes)
        trained = trained_state(accelerator.unwrap_model(model), cfg.lora_r > 0)
        resume.save(cfg.out, fold, dataclasses.replace(p, seconds=p.seconds + time.time() - t0), model, optimizer,
                    scheduler, accelerator, average, cfg.batch_size, trained)

    p = resume.load(cfg.out, fold, model, optimizer, scheduler, accelerator, average, b["collate"], cfg.lora_r > 0,
                    cfg.batch_size, total, cfg.num_workers) or resume.Progress(next_eval=eval_period(cfg, math.inf))
    t0, diverged = time.time(), 0
    bar = tqdm(total=total, initial=p.step, desc=f"fold {fold}",
               disable=not show_progress(cfg.progress and accelerator.is_main_process))
    model.train()
    for epoch, phase in enumerate(phases):
        dl, skip = loaders[phase], p.batches if epoch == p.epoch else 0
        if epoch < p.epoch or skip >= len(dl):
            continue
        if not skip:
            resume.restore_random(p)  # before the pass draws its seed (a no-op unless just resumed)
        start_epoch(dl, samplers[phase], epoch, skip * accelerator.num_processes)
        p.epoch = epoch
        for i, batch in enumerate(dl, start=skip):
            resume.restore_random(p)  # resumed mid-epoch: after the pass drew its seed
            with accelerator.accumulate(model):
                preds = shape.forward(model, batch)
                loss = compute_loss(cfg, comp, preds, batch["target"], batch.get("weight"))
                accelerator.backward(loss)
                if accelerator.sync_gradients and cfg.max_grad_norm > 0:
                    accelerator.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
                optimizer.step()
                optimizer.zero_grad()
            p.loss_sum, p.loss_n, p.batches, p.micro_batches = p.loss_sum + loss.item(), p.loss_n + 1, i + 1, \
                p.micro_batches + 1
            if not accelerator.sync_gradients:
                continue
            scheduler.step()
            p.step += 1
            average.update(p.step)
            bar.update(1)
            if validate := p.step >= p.next_eval or i == len(dl) - 1 or p.step == total:
                with average.validated() as started:
                    rows = predict_loader(model, valid_dl, accelerator, len(data.valid_ds), obj.activate, shape)
                    pred = as_submitted(comp, shape.outputs(data.valid_ds.per_text(rows), data, embed))
                    m = {**scores(comp, y_va, pred), "predict_seconds": time.perf_counter() - started}
                    p.finite_preds = bool(np.isfinite(pred).all())
                    improved = m["score"] < p.best
                    if improved:
                        p.best, p.best_pred = m["score"], pred
                        p.best_state = trained_state(accelerator.unwrap_model(model), cfg.lora_r > 0)
                record_validation(cfg, p, m, epoch, phase, scheduler, accelerator, fold, total, improved, metric)
                if on_validation is not None:
                    on_validation(fold, p.step, m[metric.name])
                if not math.isfinite(m["score"]) and not weights_finite(model):
                    diverged = p.step  # NaN/inf weights never recover: stop this fold now
                    break
            if cfg.save_every >= 0 and p.step < total and (validate or cfg.save_every and p.step % cfg.save_every == 0):
                keep()
            if p.step >= total:
                break
        p.batches = 0
        if p.step >= total or diverged:
            break
    bar.close()

    final = fold_best(model, p.best_state, accelerator, fold, p.step, diverged, comp, p.finite_preds)
    info = {"fold": fold, "best_score": p.best, "steps": p.step, "seconds": p.seconds + time.time() - t0,
            "predict_seconds": p.predict_seconds}
    oof, info = fold_outcome(cfg, comp, df, data, fold, p.best_pred, target_mean, info, log)
    return final, data.tokenizer, oof, {**info, "history": p.history}


def record_validation(cfg: TrainConfig, p: resume.Progress, m: dict, epoch: int, phase: str, scheduler, accelerator,
                      fold: int, total: int, improved: bool, metric) -> None:
    """A validation's entry in the fold's history, its tracker values and its log line; the
    training loss restarts and the next validation is scheduled."""
    p.predict_seconds = m.pop("predict_seconds", p.predict_seconds)  # timing: the fold's record, not the history
    entry = {"step": p.step, "epoch": epoch, "phase": phase, "train_loss": p.loss_sum / max(p.loss_n, 1)}
    entry.update({k: v for k, v in m.items() if not isinstance(v, dict)})
    entry["best"], entry["lr"] = p.best, scheduler.get_last_lr()[0]
    p.history.append(entry)
    accelerator.log({f"fold{fold}/valid_{metric.name}": m[metric.name],
                     f"fold{fold}/train_loss": entry["train_loss"], f"fold{fold}/lr": entry["lr"]}, step=p.step)
    shown = -p.best if metric.greater_is_better else p.best
    accelerator.print(
        f"fold {fold} step {p.step}/{total} | train loss {entry['train_loss']:.4f} | "
        f"valid {metric.name} {m[metric.name]:.4f} | best {shown:.4f}{' *' if improved else ''}"
    )
    p.loss_sum, p.loss_n = 0.0, 0
    p.next_eval = p.step + eval_period(cfg, p.best)


def fold_outcome(cfg: TrainConfig, comp: Competition, df: pd.DataFrame, data: FoldData, fold: int, best_pred,
                 target_mean, info: dict, log) -> tuple[pd.DataFrame, dict]:
    """Stage 5: the fold's out-of-fold frame (its best checkpoint's predictions) and its record:
    row counts, the training mean, and the shape's own figures (a retriever's seen and unseen
    items), said in one line."""
    oof = objective_of(comp).outputs.oof_frame(df[comp.id_col].iloc[data.va].to_numpy(), df.iloc[data.va],
                                               data.y[data.va], best_pred, comp.target_cols, data.labels, fold)
    info["n_train"], info["n_valid"], info["n_truncated"] = len(data.tr), len(data.va), data.n_cut
    info["n_pseudo"] = data.n_pseudo
    info["target_mean"] = target_mean.tolist()  # what a blank text is predicted as at inference
    shape = shape_of(comp, cfg)
    info["seen"] = shape.seen(shape.inputs(comp, df.iloc[data.tr]))  # kept in the record, not the history
    figures = shape.figures(comp, data, best_pred)
    if figures:
        log(f"fold {fold}: " + ", ".join(f"{k} {v:.4f}" for k, v in figures.items()))
        info["figures"] = figures
    return oof, info


def fold_best(model, best_state, accelerator, fold: int, step: int, diverged: int, comp: Competition,
              finite_preds: bool = True):
    """The trained model with its best checkpoint's weights; an error when no validation was
    finite (nothing is saved for the fold), blaming the metric when every prediction was finite,
    the precision when the predictions were not but the weights were, else the learning rate."""
    metric = comp.metric_name
    why = "" if diverged else (
        f"every prediction was finite but {metric} scored each validation NaN/inf: check the metric"
        + (f" ({comp.metric_file})" if comp.metric_file else "") if finite_preds else
        f"the predictions were NaN/inf with finite weights (precision {accelerator.mixed_precision})")
    if best_state is None and why:
        raise TrainingError(f"fold {fold}: no finite validation score in {step} steps: {why}; nothing was saved "
                            "for this fold" + ("" if "metric" in why else
                                               ". Try --precision fp32 or bf16 (fp16 can overflow)"))
    if best_state is None:
        raise TrainingError(
            f"fold {fold}: no finite validation score in {step} steps "
            f"({'weights became NaN/inf' if diverged else 'every score was NaN/inf'} "
            f"by step {step}, precision {accelerator.mixed_precision}); nothing was saved for "
            "this fold. Try a lower --lr / --head-lr, or --precision fp32 or bf16 (fp16 can overflow)"
        )
    if diverged:
        accelerator.print(f"fold {fold}: weights became NaN/inf at step {diverged}; keeping the best checkpoint")
    final = accelerator.unwrap_model(model)
    final.load_state_dict(best_state, strict=not final.spec.lora_r)  # LoRA: the trained part only
    accelerator.free_memory()  # drop accelerate's references before the next fold
    return final


def train_fold_in_memory(cfg: TrainConfig, comp: Competition, df, folds, fold: int, state: dict, pseudo=None,
                         on_validation=None):
    """train_fold, restarted with half the micro-batch and twice the gradient accumulation after an
    out-of-memory error (accelerate's find_executable_batch_size, and its test of what such an
    error is): the effective batch, hence the optimizer steps and the schedule, stay the same.
    Said in one line; the fold's history records the micro-batch it used. `state` ({"accelerator",
    "size", "precision"}) carries the micro-batch that fits, and its accelerator, on to the next
    folds."""
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
            state["accelerator"] = accelerator_for(state["precision"], ga)  # its accumulation steps
            state["accelerator"].trackers = trackers
            state["accelerator"].print(
                f"fold {fold}: out of memory at micro-batch {state['size']}; now {batch_size} x {ga} "
                f"accumulation steps (effective batch {effective}: the same optimizer steps and schedule)")
            state["size"] = batch_size
        result = train_fold(dataclasses.replace(cfg, batch_size=batch_size, grad_accum=ga), comp, df, folds, fold,
                            state["accelerator"], state["precision"], pseudo, on_validation)
        result[3].update(batch_size=batch_size, grad_accum=ga)
        return result

    # A fold resumed from its saved state goes on at the micro-batch it was trained with.
    saved = resume.saved_micro_batch(cfg.out, fold)
    if saved and saved < state["size"] and effective % saved == 0:
        trackers = state["accelerator"].trackers
        state["accelerator"].free_memory()
        state["size"], state["accelerator"] = saved, accelerator_for(state["precision"], effective // saved)
        state["accelerator"].trackers = trackers
    kw = {"starting_batch_size": state["size"]}
    if "reduce_batch_size_fn" in inspect.signature(find_executable_batch_size).parameters:
        kw["reduce_batch_size_fn"] = lambda: state["size"] // 2  # accelerate >= 1.x: 10% by default
    return find_executable_batch_size(attempt, **kw)()


# ----------------------------------------------------------------------------- the run


def check_max_len(cfg: TrainConfig, comp: Competition) -> None:
    """--max-len within what the backbone takes, and above what its special tokens use alone (a
    model that would see no text), refused in one line."""
    limit = max_positions(cfg.model)
    if limit and cfg.max_len > limit:
        raise ValueError(f"--max-len {cfg.max_len} is above what {cfg.model} takes ({limit} tokens): "
                         f"use --max-len {limit} or less (--fit head_tail keeps a long text's end too)")
    special = load_tokenizer(cfg.model).num_special_tokens_to_add(pair=comp.text_pair)
    if cfg.max_len <= special:
        raise ValueError(f"--max-len {cfg.max_len} leaves no room for text: {cfg.model} adds {special} special "
                         f"token(s) to each{' text pair' if comp.text_pair else ' text'}; use --max-len "
                         f"{special + 1} or more (e.g. 256)")


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


def own_figures(comp: Competition, truth: np.ndarray, pred: np.ndarray, folds: np.ndarray, metric) -> dict:
    """metrics.json's `per_metric`: the loss's own figures (RMSE per target, log-loss, accuracy)
    over the OOF rows and per fold, where they are not the competition's metric itself."""
    obj, done = objective_of(comp), sorted(int(k) for k in np.unique(folds))
    per_fold = {k: obj.own_scores(truth[folds == k], pred[folds == k], comp.target_cols) for k in done}
    overall = obj.own_scores(truth, pred, comp.target_cols)
    out = {}
    for name in obj.own_metrics:
        if name == metric.name and not isinstance(overall.get(f"{name}_per_target"), dict):
            continue
        out[name] = {"cv": overall[name], "fold_score": {k: per_fold[k][name] for k in done}}
        if isinstance(overall.get(f"{name}_per_target"), dict):
            out[name]["per_target"] = overall[f"{name}_per_target"]
    return out


def summarize(cfg: TrainConfig, comp: Competition, out: Path) -> dict:
    """Rebuild OUT's OOF rows and metrics from the finished folds (utils.runs writes them)."""
    done = runs.finished_folds(out)
    metric = get_metric(comp.metric_name)
    gathered = runs.collect_oof(out)
    oof = objective_of(comp).outputs.settle(out, gathered, metric)  # a span task's answers at fitted thresholds
    if oof is not gathered:
        runs.write_oof(out, oof)
    seconds = {k: round(runs.read_history(out, k)["seconds"], 1) for k in done}
    truth, pred = objective_of(comp).outputs.oof_arrays(oof, comp.target_cols)
    pred = as_submitted(comp, pred)  # oof.csv holds them so; a run's folds from before it did: clipped here
    folds = oof["fold"].to_numpy()
    metrics = metric_summary(metric, truth, pred, folds)
    if "thresholds" in oof.attrs:
        metrics["thresholds_per_fold"], metrics["rule"] = oof.attrs["thresholds"], oof.attrs["rule"]
        metrics["cv_rule"] = "each fold's threshold fitted on the other folds' character scores"
    per_metric = own_figures(comp, truth, pred, folds, metric)
    if per_metric:
        metrics["per_metric"] = per_metric
    if cfg.distil_csv:  # the teachers it distils, by identity (utils.pseudo --training-rows recorded them)
        metrics["teachers"] = json.loads(pseudo_info_path(cfg.distil_csv).read_text()).get("teachers", [])
    metrics.update(
        competition=comp.to_dict(),
        folds_done=done,
        n_oof=len(oof),
        seconds_per_fold=seconds,
        config=identity(cfg, comp),
        versions=versions(),
        **provenance(cfg, comp),
    )
    runs.write_metrics(out, metrics)
    return metrics


def run_cv(cfg: TrainConfig, comp: Competition | None = None, on_validation=None) -> dict:
    """Train every fold not finished yet (or just cfg.only_folds) for the competition `comp`
    (None: the one cfg.competition names, CommonLit when empty); returns metrics.json's content.
    `on_validation(fold, step, value)`: called after each validation (utils.tune's pruning)."""
    comp = comp if comp is not None else competition_for(cfg)
    ignored = ignored_settings(cfg, comp)
    cfg = for_competition(cfg, comp)  # --fit "" as the competition's long_text: what the run records
    check_settings(cfg, comp)
    precision = check_backbone(cfg)
    accelerator = make_accelerator(cfg, precision)
    # Says how many processes really train (`accelerate launch --num_processes 2` on a machine
    # without GPUs starts only one; docs/training.md has the CPU command).
    accelerator.print(f"{accelerator.num_processes} process(es) on {accelerator.device.type}, "
                      f"mixed precision {accelerator.mixed_precision}")
    if precision.note:
        accelerator.print(precision.note)
    for line in ignored:
        accelerator.print(line)
    out = Path(cfg.out)
    if accelerator.is_main_process:
        prepare_out(cfg, comp, out)
    accelerator.wait_for_everyone()
    start_trackers(accelerator, cfg, comp)
    if not show_progress(cfg.progress):  # transformers' own bars (loading weights) too
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    check_max_len(cfg, comp)
    accelerator.print(memory_estimate(cfg, precision, accelerator.device))
    df = load_train(cfg, comp)
    folds = assign_folds(cfg, comp, df, out)
    if accelerator.is_main_process:
        runs.write_folds(out, df[comp.id_col], folds)
    todo = cfg.only_folds or tuple(range(cfg.folds))
    df, pseudo = teachers_signals(cfg, comp, df, folds, todo, accelerator.print)
    df, folds = learnable_rows(comp, df, folds, Path(cfg.train_csv).name, accelerator.print)
    metrics = {}
    memory = {"accelerator": accelerator, "size": cfg.batch_size, "precision": precision}  # the micro-batch that fits
    for fold in todo:
        if (out / f"fold{fold}").is_dir():
            accelerator.print(f"fold {fold}: finished earlier, skipped")
            continue
        try:
            model, tokenizer, oof, info = train_fold_in_memory(cfg, comp, df, folds, fold, memory, pseudo,
                                                               on_validation)
        except TrainingError:  # nothing to go on from: the corrected command starts the fold afresh
            if accelerator.is_main_process:
                resume.remove(out, fold)
            raise
        seen = info.pop("seen")
        if accelerator.is_main_process:
            with atomic_dir(out / f"fold{fold}") as tmp:
                model.save(tmp, tokenizer, extra={"fold": fold, "score": info["best_score"],
                                                  "target_mean": info["target_mean"], "seen": seen,
                                                  "train": identity(cfg, comp), "competition": comp.to_dict()})
                runs.write_fold_summaries(tmp, oof, info)
                objective_of(comp).outputs.write_outputs(tmp, oof)  # e.g. a span task's character scores
            resume.remove(out, fold)
            metrics = summarize(cfg, comp, out)
            fitted = metrics.get("thresholds_per_fold") or {}  # a span task's: refitted as each fold lands
            at = ", ".join(f"{k}: {t:g}" for k, t in fitted.items())
            accelerator.print(
                f"fold {fold}: best {metrics['metric']} {metrics['fold_score'][fold]:.4f} in "
                f"{info['seconds']:.0f}s | cv {metrics['metric']} over folds {metrics['folds_done']}: "
                f"{metrics['cv']:.4f}" + (f" (each fold at the threshold its other folds fit: {at})" if at else "")
            )
        accelerator.wait_for_everyone()
        del model
    if accelerator.is_main_process and not metrics and runs.finished_folds(out):
        metrics = summarize(cfg, comp, out)
    line = beside_the_bar(comp, df, folds, metrics) if accelerator.is_main_process and metrics.get("cv") is not None \
        else ""
    if line:
        accelerator.print(line)
    if cfg.log_with:
        accelerator.end_training()
    return metrics


def teachers_signals(cfg: TrainConfig, comp: Competition, df: pd.DataFrame, folds: np.ndarray, todo,
                     say=print) -> tuple[pd.DataFrame, tuple | None]:
    """(the training rows, with a --distil-csv's fold-k teacher columns joined on (TEACHER prefix);
    a --pseudo-csv's rows and whether they have fold columns, or None), each file checked against
    these folds and said in one line (utils.data.read_pseudo, read_teacher)."""
    if not (cfg.pseudo_csv or cfg.distil_csv):
        return df, None
    cells = objective_of(comp).outputs
    read_cells = cells.read_signal  # numbers, or a span task's character scores
    labels = class_labels(cfg, comp, df)
    outputs = pseudo_outputs(comp, labels)
    fingerprint = folds_fingerprint(df[comp.id_col], folds)
    pseudo = None
    if cfg.pseudo_csv:
        pseudo = read_pseudo(cfg.pseudo_csv, comp.text_cols, fingerprint, todo, outputs, comp.id_col, read_cells)
        if not pseudo[1]:
            say(f"warning: {Path(cfg.pseudo_csv).name} has only '{outputs[0]}', no {outputs[0]}_fold{{k}}: each "
                "fold trains on labels from models that saw its validation rows, so the CV is optimistic")
        say(f"{len(pseudo[0])} pseudo-labelled rows join every fold's training side "
            + (f"({cfg.pseudo_epochs} epoch(s) alone first)" if cfg.pseudo_epochs
               else f"(mixed, weight {cfg.pseudo_weight:g})"))
    if cfg.distil_csv:  # fold k's teachers' predictions of the rows, as columns fold_data reads
        teacher = read_teacher(cfg.distil_csv, df[comp.id_col], folds, fingerprint, todo, outputs, comp.id_col,
                               comp.text_cols, read_cells, df[list(comp.text_cols)])
        df = pd.concat([df, teacher.add_prefix(TEACHER)], axis=1)
        softened = labels or not cells.signal_numbers  # probabilities, or a span task's character scores
        say(f"{Path(cfg.distil_csv).name}: each fold's training targets mix the labels with its own teachers' "
            f"predictions (weight {cfg.distil_weight:g}"
            + (f", temperature {cfg.distil_temperature:g}" if softened else "") + ")")
    return df, pseudo


def learnable_rows(comp: Competition, df: pd.DataFrame, folds: np.ndarray, name: str, say=print):
    """(df, folds) without the rows nothing can be learnt from nor scored on (the objective's
    `unlearnable`: a span task's blank text). Left out after the folds are made, so every other row
    keeps its fold; said in one line naming the rows."""
    drop, what, why = objective_of(comp).unlearnable(df)
    if drop is None or not drop.any():
        return df, folds
    say(f"warning: {name}: {what} at {_rows(df, drop, comp.id_col)}: left out of training and of the CV "
        f"({why}); every other row keeps its fold")
    return df[~drop].reset_index(drop=True), folds[~drop]


def beside_the_bar(comp: Competition, df: pd.DataFrame, folds: np.ndarray, metrics: dict) -> str:
    """The run's CV beside the bar a model must clear without reading a word: utils.eda's
    cheap_baselines (the most frequent answers, per question or rule too; the longest option; the
    constant) on the same finished folds' rows, each row's from the other folds. A model that
    does not clear it learnt nothing the counts do not know."""
    done = np.isin(folds, metrics["folds_done"])
    scores = eda.cheap_baselines(comp, df, folds, done)
    if not scores:
        return ""
    metric = get_metric(comp.metric_name)
    name, best, others = eda.bar_and_others(scores, comp.metric_name)
    clears = metrics["cv"] > best if metric.greater_is_better else metrics["cv"] < best
    return (f"cv {metrics['metric']} {metrics['cv']:.4f} beside the bar that reads no text (same folds): {name} "
            f"{best:.4f}" + (f"; {others}" if others else "") + ("" if clears else
                                                                 ": the model does NOT clear it"))


def launch(cfg: TrainConfig, num_processes: int = 1, comp: Competition | None = None) -> dict:
    """run_cv in this process, or on `num_processes` GPUs/processes from a notebook (Kaggle T4 x2)
    through accelerate's notebook_launcher; returns the run's metrics.json content."""
    comp = comp if comp is not None else competition_for(cfg)  # resolved here, once
    if num_processes > 1:
        from accelerate import notebook_launcher

        check_trackers(cfg.log_with)  # here, not once in each launched process
        notebook_launcher(run_cv, args=(cfg, comp), num_processes=num_processes)
        return runs.read_metrics(cfg.out)
    return run_cv(cfg, comp)


def main(argv=None) -> int:
    """CLI entry point: errors a user can act on are one line on stderr and exit code 2."""
    try:
        cfg, comp = parse_args(argv)
        run_cv(cfg, comp)
    except (DataError, RunError, TrainingError, ValueError, OSError) as e:
        return cli_error(e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
