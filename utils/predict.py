"""Inference: every finished fold of each run, folds averaged, runs blended; works fully offline.

    python -m utils.predict --test-csv data/test.csv --runs runs/a runs/b --blend blend.json \
        --out submission.csv

The runs know their competition (columns, input text, task, metric, submission): the test file is
read, and the submission written, as its description says: sample_submission.csv's columns and row
order, labels made with the decision rule fitted on the out-of-fold predictions, values clipped
to the targets' range. With no sample submission beside the test file it stops, unless told
--no-sample-submission (then the test file's order, unchecked, said in a note).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

from . import backbone as bb
from .batching import sorted_batches
from .cli import HelpFormatter, cli_error, first_paragraph, show_progress
from .competition import Competition, is_reranker, load_competition
from .data import DataError, load_csv
from .ensemble import blend_weights, normalize_weights, read_blend
from .files import fold_dirs, write_csv
from .model import load_fold
from .objective import get_objective, objective_of
from .runs import (  # noqa: F401 (check_runs_agree, run_competition, run_spec: re-exported)
    BLEND,
    check_runs,
    check_runs_agree,
    read_metrics,
    run_competition,
    run_spec,
)
from .search import similarities
from .shapes import TextRows, blank_texts, shape_of  # noqa: F401 (blank_texts: re-exported)
from .tables import read_split

TEXT_ROWS = TextRows()


@torch.no_grad()
def predict_model(model, tokenizer, texts, max_len: int, batch_size=64, precision="auto",
                  progress=False, desc="predict", fit: str = "head", shape: TextRows = TEXT_ROWS) -> np.ndarray:
    """(N, outputs) predictions of one loaded model (a retriever's: embeddings); batches sorted by
    length, results in input order; texts longer than max_len fitted as in training (`fit`), in
    `precision` as the backbone's family runs it on this device (utils.backbone.precision_for).
    `shape` (utils.shapes): what a row is (a text; a multiple-choice row's options)."""
    device = next(model.parameters()).device
    prec = precision if isinstance(precision, bb.Precision) else bb.precision_for(
        precision, bb.family_of(model.backbone.config), device.type, training=False)
    ds = shape.dataset(texts, tokenizer, max_len, fit=fit)
    dl = DataLoader(ds, batch_sampler=sorted_batches(ds.lengths, batch_size),
                    collate_fn=shape.eval_collator(tokenizer, torch.float32))
    out = None
    # A span task's activation depends on its competition (start/end softmax or a sigmoid per token): its
    # shape holds that objective; the others' is the model's task alone.
    objective = getattr(shape, "objective", None) or get_objective(model.spec.task)
    for batch in tqdm(dl, desc=desc, disable=not show_progress(progress), leave=False):
        batch = {k: v.to(device) for k, v in batch.items()}
        with prec.autocast(device.type):
            p = shape.forward(model, batch).float()
        p = objective.activate(p).cpu().numpy()
        if out is None:  # an output per token (a span task's): as wide as the longest sequence
            out = np.zeros((len(ds), *((max(ds.lengths),) if p.ndim == 3 else ()), *p.shape[-1:]), dtype=np.float64)
        w = min(p.shape[1], out.shape[1])  # past the longest sequence: padding only
        out[batch["index"].cpu().numpy(), :w] = p[:, :w]
    return ds.per_text(out)  # windows of a long text averaged (a span task's: into character scores)


def predict_replicas(models, tokenizer, texts, max_len: int, batch_size=64, precision="auto",
                     progress=False, desc="predict", fit: str = "head", shape: TextRows = TEXT_ROWS) -> np.ndarray:
    """predict_model with one replica of a model per device (Kaggle's T4 x2): the texts dealt
    between them (every n-th), each replica in its own thread (CUDA releases the GIL), the rows
    put back in input order. One replica: predict_model itself."""
    if len(models) == 1:
        return predict_model(models[0], tokenizer, texts, max_len, batch_size, precision, progress, desc, fit, shape)
    from concurrent.futures import ThreadPoolExecutor

    parts = [np.arange(i, len(texts), len(models)) for i in range(len(models))]

    def one(k):
        return predict_model(models[k], tokenizer, [texts[j] for j in parts[k]], max_len, batch_size,
                             precision, progress and k == 0, f"{desc} [{len(models)} devices]", fit, shape)

    with ThreadPoolExecutor(len(models)) as pool:
        outs = list(pool.map(one, range(len(models))))
    width = max(o.shape[1] for o in outs)  # character scores: each part as wide as its longest text
    out = np.zeros((len(texts), width, *outs[0].shape[2:]))
    for idx, o in zip(parts, outs):
        if o.ndim == 3 and o.shape[1] < width:
            o = np.pad(o, ((0, 0), (0, width - o.shape[1]), (0, 0)))
        out[idx] = o
    return out


def predict_folds(run, texts, batch_size=64, device=None, precision="auto", max_len=None,
                  progress=True, base_model=None, devices=None, items=None, skip=None) -> dict:
    """{fold number: (N, outputs) predictions of that fold's model}. `texts`: the rows as the run's
    competition reads them (utils.shapes' inputs: texts, or a multiple-choice row's options);
    `items`: a retriever's catalogue texts, each fold's outputs then the (N, items) similarities.

    A blank text gets the fold's training mean (saved with the fold) instead of a prediction,
    where its shape says so (utils.shapes: a ranking's rows are read even when blank).
    Without a `device`, every GPU is used (utils.model.placement: data-parallel replicas, or one
    model split across them); `devices` gives the replicas' devices explicitly. `base_model`:
    a LoRA fold's base model folder (else found: utils.backbone.find_base). `skip`: {fold: (N,) bool}
    rows that fold's model does not read, NaN in its predictions (fold k's own rows, which its model
    validated on: a student's fold k never trains on them).
    """
    comp = run_competition(run)
    blank = shape_of(comp).blank(texts)
    out = {}
    for i, folder in enumerate(fold_dirs(run)):
        k = int(folder.name[4:])
        left = np.asarray(skip[k], bool) if skip and k in skip else np.zeros(len(blank), bool)
        usable = [t for t, b, s in zip(texts, blank, left) if not (b or s)]
        fold = load_fold(folder, device, base_model, precision, devices)
        record, models, tokenizer, prec = fold.record, fold.models, fold.tokenizer, fold.precision
        if i == 0 and fold.devices[0].type == "cuda" and prec.note.startswith("warning"):
            print(prec.note, file=sys.stderr, flush=True)
        shape = shape_of(comp, record.train)  # as the fold read its rows (e.g. options listed in the text)
        note = shape.unseen(texts, record.saved.get("seen") or {}) if i == 0 else ""  # said once, for the run
        if note:
            print(f"warning: {run}: {note}", file=sys.stderr, flush=True)
        length = max_len or record.max_len
        desc = f"{Path(run).name}/{folder.name}"
        width = record.spec.num_outputs
        if usable:
            rows = predict_replicas(models, tokenizer, usable, length, batch_size, prec, progress, desc,
                                    record.fit, shape)
            if items is not None:  # a query's outputs: its similarity to every item
                rows = similarities(rows, predict_replicas(models, tokenizer, list(items), length, batch_size,
                                                           prec, progress, f"{desc} items"))
            width = rows.shape[1]
        p = np.zeros((len(blank), *(rows.shape[1:] if usable else (width,))))
        if usable:
            p[~blank & ~left] = rows
        # Runs saved before the mean was recorded: the mean prediction of the usable rows.
        if blank.any():
            p[blank] = record.target_mean or (p[~blank & ~left].mean(0) if usable else 0.0)
        p[left] = np.nan
        out[k] = p
        del models, fold
    return out


def predict_run(run, texts, **kw) -> np.ndarray:
    """Average over a run's folds: (N,) for one target, (N, T) for several, (N, K) class probs.
    Keywords as predict_folds."""
    p = np.mean(list(predict_folds(run, texts, **kw).values()), axis=0)
    return get_objective(run_spec(run)["task"]).outputs.run_output(p)


def decision_rule(runs, blend: dict | None = None) -> dict | None:
    """How labels are made from the predictions: the blend's rule (fitted on the blended
    out-of-fold predictions) or the one run's (its metrics.json); None: the default rule (argmax,
    rounding), said on stderr when the metric has a fitted one."""
    if blend and blend.get("rule"):
        return blend["rule"]
    rules = [read_metrics(r).get("rule") for r in runs]
    if len(runs) == 1 and rules[0]:
        return rules[0]
    if any(rules):
        default = get_objective(run_spec(runs[0])["task"]).default_rule
        print(f"note: several runs without a {BLEND} rule: labels by the default rule ({default}); "
              "utils.ensemble fits the rule on the blend's out-of-fold predictions",
              file=sys.stderr, flush=True)
    return None


def predict(runs, texts, weights=None, timings: dict | None = None, **kw) -> np.ndarray:
    """Blend of runs (each the mean of its folds) with non-negative weights normalised to sum 1."""
    check_runs(runs)  # from saved files, before any model loads: one competition, the same outputs
    w = normalize_weights(weights, len(runs))
    # Several runs blend what their out-of-fold files weighed (a retriever's: its top candidates by rank).
    weighed = objective_of(run_competition(runs[0])).outputs.blend_scores if len(runs) > 1 else (lambda p: p)
    total = 0.0
    for run, wi in zip(runs, w):
        t0 = time.time()
        total = total + wi * weighed(predict_run(run, texts, **kw))
        if timings is not None:
            timings[Path(run).name] = time.time() - t0
    return total


def check_submission(sub: pd.DataFrame, test: pd.DataFrame, id_col="id") -> None:
    """Refuse a submission whose ids differ from test.csv's (order included) or with non-finite values."""
    if len(sub) != len(test) or (sub[id_col].astype(str).to_numpy() != test[id_col].astype(str).to_numpy()).any():
        extra = set(sub[id_col].astype(str)) ^ set(test[id_col].astype(str))
        detail = f"; ids not in both: {sorted(extra)[:5]}" if extra else " (order differs)"
        raise DataError(f"submission ids differ from test.csv ids{detail}")
    values = sub.drop(columns=[id_col]).to_numpy(dtype=float)
    if not np.isfinite(values).all():
        rows = np.flatnonzero(~np.isfinite(values).all(axis=1))[:5]
        raise DataError(f"submission has non-finite predictions at rows {rows.tolist()}")


def submission_frame(comp: Competition, test: pd.DataFrame, preds: np.ndarray, spec: dict | None = None,
                     rule: dict | None = None) -> pd.DataFrame:
    """What the competition's submission holds, in test order: values (clipped to target_range),
    labels (made by `rule`; scores clipped to the range) or class probabilities."""
    preds = np.asarray(preds, dtype=float)
    preds = preds if preds.ndim == 3 else preds.reshape(len(test), -1)  # (N, C, heads): a span task's characters
    sub = pd.DataFrame({comp.id_col: test[comp.id_col].astype(str).to_numpy()})
    names = list((spec or {}).get("target_names") or comp.target_cols)
    for col, values in objective_of(comp).outputs.submission_columns(comp, preds, names, rule, test).items():
        sub[col] = values
    return sub


def match_sample(sub: pd.DataFrame, sample_path, comp: Competition) -> pd.DataFrame:
    """The submission in sample_submission.csv's columns and row order (the same columns in another
    order are written in the sample's); one line naming the file when its columns or ids disagree
    with the description and the test file, or it repeats an id."""
    sample_path = Path(sample_path)
    sample = load_csv(sample_path, comp.id_col)  # an id reading NA is that id, as in the test file
    want, made = list(map(str, sample.columns)), list(map(str, sub.columns))
    if sorted(want) != sorted(made):
        missing, extra = [c for c in want if c not in made], [c for c in made if c not in want]
        raise DataError(f"{sample_path.name} has columns {want} but the competition's description ({comp.slug}) "
                        f"makes {made} (missing: {missing or 'none'}; not in the sample: {extra or 'none'}): "
                        "fix id_col / target_cols / submission in its competition.json")
    sub = sub.set_axis(made, axis=1)[want]  # the sample's column order
    ids, mine = sample[comp.id_col].astype(str), sub[comp.id_col].astype(str)
    dup = ids[ids.duplicated()]
    if len(dup):
        raise DataError(f"{sample_path.name}: column {comp.id_col!r} repeats ids {sorted(set(dup))[:5]} "
                        f"({len(dup)} repeated rows): a sample submission has one row per test id")
    if len(ids) != len(mine) or set(ids) != set(mine):
        odd = sorted(set(ids) ^ set(mine))[:5]
        raise DataError(f"{sample_path.name}'s ids differ from the test file's ({len(ids)} vs {len(mine)} "
                        f"rows; ids in only one: {odd}): use the test file that came with it")
    return sub.set_index(mine).loc[ids.to_numpy()].reset_index(drop=True)


def check_sample(sample) -> Path:
    """The sample submission's path; one line naming it when it is not there (nothing would check
    the submission's columns and row order)."""
    if not Path(sample).is_file():
        raise DataError(f"no sample submission at {sample}: it checks the submission's columns and row "
                        "order; put the competition's beside the test file, or pass --no-sample-submission "
                        "(submit(..., sample_submission=False)) to write in the test file's order unchecked")
    return Path(sample)


def write_submission(path, test: pd.DataFrame, preds: np.ndarray, comp: Competition | None = None,
                     spec: dict | None = None, rule: dict | None = None, sample=None) -> pd.DataFrame:
    """Check and write the competition's submission (CommonLit's `id,target` by default), in
    `sample` (sample_submission.csv)'s columns and order (an error when that file is not there);
    None: in test order, said in a note on stderr; atomically."""
    comp = comp or load_competition()
    sub = submission_frame(comp, test, preds, spec, rule)
    numeric = sub.drop(columns=[comp.id_col]).select_dtypes("number")
    check_submission(sub[[comp.id_col]].join(numeric), test, comp.id_col)
    if sample is not None:
        sub = match_sample(sub, check_sample(sample), comp)
    else:
        print(f"note: no {comp.sample_submission}: the submission's columns ({', '.join(sub.columns)}) and "
              "row order (the test file's) were not checked against one", file=sys.stderr, flush=True)
    write_csv(path, sub)
    return sub


def submit(runs, test_csv, out="submission.csv", weights=None, blend_json=None, timings=None,
           sample_submission: bool = True, **kw) -> pd.DataFrame:
    """The whole submission: the runs' competition read from them, its test file read (a blank text
    as its shape predicts one: the training mean; a ranking's from the empty text), folds averaged
    and runs blended (`weights`, or blend.json's), labels by the fitted rule, checked against the
    sample submission beside the test file (an error when there is none; sample_submission=False:
    the test file's order, unchecked), written to `out`. Everything read from disk is checked
    before the first model loads; a reranker run is refused (utils.rerank predicts with one)."""
    spec = check_runs(runs)
    comp = run_competition(runs[0])
    reranker = next((r for r in runs if is_reranker(run_competition(r))), None)
    if reranker is not None:
        raise DataError(f"{reranker} is a reranker (it reorders a retriever's candidates): predict with python -m "
                        f"utils.rerank predict --retriever RETRIEVER --reranker {reranker} --test-csv {test_csv}")
    blend = read_blend(blend_json) if blend_json else None
    if blend is not None:
        weights = blend_weights(blend_json, runs, blend)[0]
    normalize_weights(weights, len(runs))
    rule = decision_rule(runs, blend)
    test = read_split(comp, test_csv, "test", blank=shape_of(comp).blank_note)
    sample = check_sample(Path(test_csv).parent / comp.sample_submission) if sample_submission else None
    catalogue = shape_of(comp).items(comp, Path(test_csv).parent)
    if catalogue is not None:  # a retriever ranks the catalogue beside the test file: its ids are the answers
        kw["items"] = catalogue["text"].tolist()
        spec = {**spec, "target_names": catalogue["id"].tolist()}
    preds = predict(runs, shape_of(comp).inputs(comp, test), weights, timings, **kw)
    return write_submission(out, test, preds, comp, spec, rule, sample)


def main(argv=None) -> int:
    """CLI entry point: errors a user can act on are one line on stderr and exit code 2."""
    p = argparse.ArgumentParser(prog="python -m utils.predict", description=first_paragraph(__doc__),
                                formatter_class=HelpFormatter)
    p.add_argument("--test-csv", required=True, help="the competition's test file; its sample submission beside it "
                   "sets the columns and row order")
    p.add_argument("--runs", nargs="+", required=True, help="run folders (each with fold*/)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--weights", nargs="+", type=float, help="one blend weight per run")
    g.add_argument("--blend", help=f"{BLEND} from the ensembling notebook")
    p.add_argument("--no-sample-submission", action="store_true",
                   help="no sample submission beside the test file: write the test file's order, the "
                   "columns and order unchecked")
    p.add_argument("--out", default="submission.csv", help="the submission to write")
    p.add_argument("--batch-size", type=int, default=64, help="texts per batch (sorted by length)")
    p.add_argument("--precision", default="auto", choices=("auto", "fp32", "fp16", "bf16"),
                   help="auto: fp16/bf16 autocast on a GPU, fp32 on CPU")
    p.add_argument("--device", default=None, help="cuda, cpu, cuda:1, ... (empty: every GPU there is: a "
                   "replica on each, or a model too large for one split across them)")
    p.add_argument("--base-model", default=None, help="a LoRA run's base model folder (empty: the recorded one, "
                   "or a Kaggle Model / dataset attached that holds it)")
    args = p.parse_args(argv)
    timings: dict = {}
    if not show_progress(True):  # a log file: no bar redraws (transformers' weight loading too)
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    try:
        sub = submit(args.runs, args.test_csv, args.out, args.weights, args.blend, timings,
                     not args.no_sample_submission, batch_size=args.batch_size, device=args.device,
                     precision=args.precision,
                     base_model=args.base_model)
    except (DataError, ValueError, OSError) as e:
        return cli_error(e)
    for run, sec in timings.items():
        print(f"{run}: {sec:.1f}s for {len(sub)} rows")
    print(f"wrote {args.out} ({len(sub)} rows: {', '.join(sub.columns)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
