"""Pseudo-labels that keep the CV honest: fold k's label of a text comes only from models that
never saw fold k's validation rows.

    python -m utils.pseudo --runs runs/teacher-a runs/teacher-b --texts extra.csv \
        --train-csv data/train.csv --out pseudo.csv [--blend blend.json] [--max-std 0.3]
    python -m utils.train ... --pseudo-csv pseudo.csv [--pseudo-epochs 1 | --pseudo-weight 0.5]

Writes OUT and OUT's .json twin (the folds it was made with: training refuses the file for other
folds; the runs, the weights and what was dropped). OUT's columns: id, the text column, and per
fold k
- target_fold{k}: the blend of the runs' fold-k models, with blend.json's weights_per_fold[k]
  (fitted without fold k's rows); empty where --max-std left the text out of fold k;
- target_std_fold{k}: the spread of the runs' fold-k models (how much the teachers disagree, seen
  only by models that never saw fold k's validation rows: what --max-std filters fold k on);
then target (the mean of the fold columns) and target_std (the spread over every fold model, for
figures only: fold j's models saw fold k's validation rows, so no fold's rows are chosen by it).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from .cli import HelpFormatter
from .config import cli_error
from .data import DataError, folds_fingerprint, pseudo_info_path, read_csv
from .files import fold_dirs, run_names, write_csv, write_json
from .predict import blank_texts, blend_weights, normalize_weights, predict_folds, run_spec


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


def check_teachers(runs) -> None:
    """Every teacher predicts one regression target: read from the saved configs, no model loaded."""
    for run in runs:
        spec = run_spec(run)
        if spec.get("task") != "regression" or spec.get("num_outputs") != 1:
            raise DataError(f"{run} predicts {spec.get('task')} {list(spec.get('target_names', []))}: "
                            "pseudo-labels come from runs with a single regression target")


def check_max_std(runs, max_std) -> None:
    """--max-std filters fold k on the spread of the runs' fold-k models: it needs two runs."""
    if max_std is not None and len(runs) < 2:
        raise DataError("--max-std needs two teacher runs or more: fold k's texts are filtered on "
                        "the spread of the runs' fold-k models, the only ones that never saw fold "
                        "k's validation rows (one run has one fold-k model, so no spread)")


def make_pseudo(runs, texts: pd.DataFrame, text_col: str = "excerpt", weights=None,
                progress: bool = True, fold_weights: dict | None = None,
                max_std: float | None = None) -> pd.DataFrame:
    """id, text, target_fold{k}, target_std_fold{k}, target, target_std for `texts` (ids and
    texts), from `runs`.

    Fold k's column uses only the runs' fold-k models, blended with `fold_weights[k]` (weights
    fitted without fold k's rows; else `weights`); `max_std` blanks fold k's label of a text whose
    fold-k models disagree more (needs two runs or more), and drops texts left with no label.
    """
    folds, _ = teachers_folds(runs)
    check_teachers(runs)
    check_max_std(runs, max_std)
    values = texts[text_col].tolist()
    per_run = [predict_folds(run, values, progress=progress) for run in runs]
    out = pd.DataFrame({"id": texts["id"].astype(str).to_numpy(), text_col: values})
    overall = normalize_weights(weights, len(runs))
    for k in folds:
        # A fold the blend did not cover (its runs shared other folds): the overall weights were
        # fitted without its rows.
        w = (fold_weights or {}).get(k, overall)
        fold_k = np.stack([preds[k][:, 0] for preds in per_run], axis=1)  # (N, runs)
        label, spread = fold_k @ w, fold_k.std(axis=1)
        if max_std is not None:
            label = np.where(spread <= max_std, label, np.nan)
        out[f"target_fold{k}"], out[f"target_std_fold{k}"] = label, spread
    fold_cols = [f"target_fold{k}" for k in folds]
    out["target"] = out[fold_cols].mean(axis=1)  # NaN-skipping: the folds that kept the text
    every_model = np.stack([p[:, 0] for preds in per_run for p in preds.values()], axis=1)
    out["target_std"] = every_model.std(axis=1)
    empty = [k for k, col in zip(folds, fold_cols) if out[col].isna().all()]
    if empty == folds:
        smallest = min(out[f"target_std_fold{k}"].min() for k in folds)
        raise DataError(f"--max-std {max_std:g} leaves none of the {len(out)} texts in any fold "
                        f"(the smallest spread is {smallest:.3g}): nothing written; raise --max-std")
    if empty:
        print(f"warning: --max-std {max_std:g} leaves no text for fold(s) "
              f"{', '.join(map(str, empty))}: a student's fold there trains on its real rows only",
              file=sys.stderr, flush=True)
    return out[out[fold_cols].notna().any(axis=1)].reset_index(drop=True)


def main(argv=None) -> int:
    """CLI entry point: errors a user can act on are one line on stderr and exit code 2."""
    p = argparse.ArgumentParser(prog="python -m utils.pseudo", description=__doc__.split("\n")[0], formatter_class=HelpFormatter)
    p.add_argument("--runs", nargs="+", required=True, help="teacher run folders (same folds)")
    p.add_argument("--texts", required=True, help="CSV of texts to label (id + text column)")
    p.add_argument("--train-csv", required=True, help="the labelled data: its texts are dropped")
    p.add_argument("--out", required=True, help="pseudo-label CSV to write (+ its .json)")
    p.add_argument("--text-col", default="excerpt", help="the text column of --texts and --train-csv")
    p.add_argument("--blend", help="blend.json: weights of the runs (default: equal)")
    p.add_argument("--max-std", type=float,
                   help="leave a text out of fold k when the runs' fold-k models disagree more "
                        "(standard deviation; needs two runs or more)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    try:
        # Everything that can be checked on saved files comes before any model loads.
        folds, fingerprint = teachers_folds(args.runs)
        check_teachers(args.runs)
        run_names(args.runs)
        weights, fold_weights = blend_weights(args.blend, args.runs) if args.blend else (None, None)
        if args.blend and fold_weights is None:
            print(f"note: {Path(args.blend).name} has no weights_per_fold: its weights serve every "
                  "fold, honest only if they were not fitted on these runs' out-of-fold rows",
                  file=sys.stderr)
        check_max_std(args.runs, args.max_std)
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
        out = make_pseudo(args.runs, texts, args.text_col, weights, not args.no_progress,
                          fold_weights, args.max_std)
        n_labelled = len(texts)
        kept = {k: int(out[f"target_fold{k}"].notna().sum()) for k in folds}
        if args.max_std is not None:
            print(f"--max-std {args.max_std:g} on each fold's own models: "
                  + ", ".join(f"fold {k} keeps {n}" for k, n in kept.items())
                  + f"; {n_labelled - len(out)} texts dropped from every fold, {len(out)} kept")
        info = {"folds": folds, "folds_fingerprint": fingerprint,
                "runs": run_names(args.runs),
                "weights": normalize_weights(weights, len(args.runs)).tolist(),
                "weights_per_fold": ({str(k): w.tolist() for k, w in fold_weights.items()}
                                     if fold_weights else None),
                "n_rows_per_fold": {str(k): n for k, n in kept.items()},
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
