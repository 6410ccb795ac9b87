"""Pseudo-labels that keep the CV honest: fold k's label of a text comes only from models that
never saw fold k's validation rows.

    python -m utils.pseudo --runs runs/teacher-a runs/teacher-b --texts extra.csv \
        --train-csv data/train.csv --out pseudo.csv [--blend blend.json] [--max-std 0.3]
    python -m utils.train ... --pseudo-csv pseudo.csv [--pseudo-epochs 1 | --pseudo-weight 0.5]

Writes OUT (id, the text column, target_fold{k} per fold k: the blend of the runs' fold-k models;
target: the mean of the fold columns; target_std: the spread over every fold model, i.e. how much
the teachers disagree) and OUT's .json twin: the folds it was made with (training refuses the
file for other folds), the runs, the weights and what was dropped.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from .config import cli_error
from .data import DataError, folds_fingerprint, pseudo_info_path, read_csv
from .files import fold_dirs, write_csv, write_json
from .predict import blank_texts, load_blend, normalize_weights, predict_folds


def normalized(text: str) -> str:
    """A text compared with others: whitespace runs collapsed, ends stripped."""
    return re.sub(r"\s+", " ", str(text)).strip()


def teachers_folds(runs) -> tuple[list, str]:
    """(fold numbers, folds fingerprint) shared by all runs; an error naming the run that differs."""
    first, ref = None, None
    for run in runs:
        f = pd.read_csv(Path(run) / "folds.csv", dtype={"id": str})
        mine = (sorted(int(p.name[4:]) for p in fold_dirs(run)), folds_fingerprint(f["id"], f["fold"]))
        if first is None:
            first, ref = run, mine
        elif mine != ref:
            what = "folds.csv" if mine[1] != ref[1] else "finished folds"
            raise DataError(f"{run} has other {what} than {first}: pseudo-labels per fold need "
                            "runs trained on the same folds (same --fold-seed or --folds-csv), "
                            "each with the same folds finished")
    return ref


def make_pseudo(runs, texts: pd.DataFrame, text_col: str = "excerpt", weights=None,
                progress: bool = True) -> pd.DataFrame:
    """id, text, target_fold{k}, target, target_std for `texts` (ids and texts), from `runs`."""
    folds, _ = teachers_folds(runs)
    w = normalize_weights(weights, len(runs))
    values = texts[text_col].tolist()
    per_run = [predict_folds(run, values, progress=progress) for run in runs]
    for run, preds in zip(runs, per_run):
        if next(iter(preds.values())).shape[1] != 1:
            raise DataError(f"{run} does not predict a single regression target")
    out = pd.DataFrame({"id": texts["id"].astype(str).to_numpy(), text_col: values})
    for k in folds:
        out[f"target_fold{k}"] = sum(wi * preds[k][:, 0] for wi, preds in zip(w, per_run))
    out["target"] = out[[f"target_fold{k}" for k in folds]].mean(axis=1)
    every_model = np.stack([p[:, 0] for preds in per_run for p in preds.values()], axis=1)
    out["target_std"] = every_model.std(axis=1)
    return out


def main(argv=None) -> int:
    """CLI entry point: errors a user can act on are one line on stderr and exit code 2."""
    p = argparse.ArgumentParser(prog="python -m utils.pseudo", description=__doc__.split("\n")[0])
    p.add_argument("--runs", nargs="+", required=True, help="teacher run folders (same folds)")
    p.add_argument("--texts", required=True, help="CSV of texts to label (id + text column)")
    p.add_argument("--train-csv", required=True, help="the labelled data: its texts are dropped")
    p.add_argument("--out", required=True, help="pseudo-label CSV to write (+ its .json)")
    p.add_argument("--text-col", default="excerpt")
    p.add_argument("--blend", help="blend.json: weights of the runs (default: equal)")
    p.add_argument("--max-std", type=float, help="drop texts the fold models disagree on more")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    try:
        teachers_folds(args.runs)  # before any slow work
        texts = read_csv(args.texts, args.text_col, (), "id", blank="dropped (nothing to label)")
        train = read_csv(args.train_csv, args.text_col, (), "id")
        blank = blank_texts(texts[args.text_col].tolist())
        known = set(map(normalized, train[args.text_col]))
        dup = texts[args.text_col].map(normalized).isin(known).to_numpy() & ~blank
        texts = texts[~blank & ~dup].reset_index(drop=True)
        print(f"{Path(args.texts).name}: {int(dup.sum())} texts already in "
              f"{Path(args.train_csv).name} dropped, {int(blank.sum())} blank dropped, "
              f"{len(texts)} to label")
        if len(texts) == 0:
            raise DataError(f"{Path(args.texts).name}: no text left to label")
        weights = load_blend(args.blend, args.runs) if args.blend else None
        out = make_pseudo(args.runs, texts, args.text_col, weights, not args.no_progress)
        n_labelled = len(out)
        if args.max_std is not None:
            out = out[out["target_std"] <= args.max_std].reset_index(drop=True)
            print(f"--max-std {args.max_std:g}: {n_labelled - len(out)} texts dropped, {len(out)} kept")
        folds, fingerprint = teachers_folds(args.runs)
        info = {"folds": folds, "folds_fingerprint": fingerprint,
                "runs": [Path(r).name for r in args.runs],
                "weights": normalize_weights(weights, len(args.runs)).tolist(),
                "texts": Path(args.texts).name, "n_rows": len(out),
                "n_dropped_train_duplicates": int(dup.sum()), "n_dropped_blank": int(blank.sum()),
                "max_std": args.max_std, "n_dropped_max_std": n_labelled - len(out)}
        write_csv(args.out, out)
        write_json(pseudo_info_path(args.out), info)
    except (DataError, ValueError, OSError) as e:
        return cli_error(e)
    print(f"wrote {args.out} ({len(out)} rows, folds {folds}) and {pseudo_info_path(args.out).name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
