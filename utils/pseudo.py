"""Pseudo-labels that keep the CV honest: fold k's label of a text comes only from models that
never saw fold k's validation rows.

    python -m utils.pseudo --runs runs/teacher-a runs/teacher-b --texts extra.csv \
        --train-csv data/train.csv --out pseudo.csv [--blend blend.json] [--max-std 0.3]
    python -m utils.train ... --pseudo-csv pseudo.csv [--pseudo-epochs 1 | --pseudo-weight 0.5]

Any teachers the kit trains: encoders, or decoders with LoRA adapters (each fold's adapters on
its base model, found as utils.predict finds it; --base-model to give its folder). Any
competition the teachers were trained for: the texts are read as its test file is (its id
and text columns), and every output gets its columns: the target (one regression target), each
target of several (per target), or each class's probability `prob_<label>` (soft labels).
Writes OUT and OUT's .json twin (the folds it was made with: training refuses the file for other
folds; the runs, the weights and what was dropped). OUT's columns: id, the text columns, and per
fold k and output O
- O_fold{k}: the blend of the runs' fold-k models, with blend.json's weights_per_fold[k]
  (fitted without fold k's rows); empty where --max-std left the text out of fold k;
- O_std_fold{k}: the spread of the runs' fold-k models (how much the teachers disagree, seen
  only by models that never saw fold k's validation rows: what --max-std filters fold k on, on
  every output);
then O (the mean of the fold columns) and O_std (the spread over every fold model, for figures
only: fold j's models saw fold k's validation rows, so no fold's rows are chosen by it).

Distillation: `--training-rows` labels the training file's own rows instead (no --texts), for a
student (`utils.train --distil-csv OUT`): a row's O_fold{k} is the fold-k models' prediction, made
by models trained on exactly the rows fold k's student trains on, so no student sees a signal from
a model that trained on its validation rows; O_fold{k} is left empty on fold k's own rows (its
student validates on them). The .json twin says `"rows": "training"` and names the teachers by
identity (utils.runs.identity), which the student's run records.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from .cli import HelpFormatter, cli_error, first_paragraph
from .data import DataError, folds_fingerprint, pseudo_info_path
from .eda import plain_texts
from .ensemble import blend, blend_weights, normalize_weights, read_blend
from .files import run_names, write_csv, write_json
from .objective import get_objective, signal_not_made
from .predict import blank_texts, check_runs, check_runs_agree, predict_folds, run_competition
from .runs import BLEND, FOLDS, finished_folds, identity, read_folds
from .shapes import shape_of
from .tables import read_split


def normalized(text: str) -> str:
    """A text compared with others: whitespace runs collapsed, ends stripped."""
    return re.sub(r"\s+", " ", str(text)).strip()


def teachers_folds(runs) -> tuple[list, str]:
    """(fold numbers, folds fingerprint) shared by all runs; an error naming the run that differs."""
    first, ref = None, None
    for run in runs:
        f = read_folds(run)
        mine = (finished_folds(run), folds_fingerprint(f.index, f.to_numpy()))
        if first is None:
            first, ref = run, mine
        elif mine != ref:
            what = FOLDS if mine[1] != ref[1] else "finished folds"
            raise DataError(f"{run} has other {what} than {first}: pseudo-labels per fold need "
                            "runs trained on the same folds (same --fold-seed or --folds-csv), "
                            "each with the same folds finished")
    return ref


def check_teachers(runs) -> list:
    """The teachers' common outputs as pseudo-label columns (utils.outputs' pseudo_columns:
    the targets, or prob_<label> per class): the same task and targets for all (read from the
    saved configs, no model loaded); an error naming the run that differs."""
    spec = check_runs_agree(runs)
    return get_objective(spec["task"]).outputs.pseudo_columns(spec["target_names"])


def check_max_std(runs, max_std) -> None:
    """--max-std filters fold k on the spread of the runs' fold-k models: it needs two runs."""
    if max_std is not None and len(runs) < 2:
        raise DataError("--max-std needs two teacher runs or more: fold k's texts are filtered on "
                        "the spread of the runs' fold-k models, the only ones that never saw fold "
                        "k's validation rows (one run has one fold-k model, so no spread)")


def check_not_ranking(comp, training_rows: bool = False) -> None:
    """Pseudo-labels are values, class or label probabilities, or a span task's character scores; a
    student's signal of the training rows also a row's option probabilities (utils.objective's
    `signals`); a catalogue's ranking has none yet. Refused in one line before any model loads."""
    why = signal_not_made(comp, "training" if training_rows else "texts")
    if why:
        raise DataError(why)


def make_pseudo(runs, texts: pd.DataFrame, weights=None, progress: bool = True, fold_weights: dict | None = None,
                max_std: float | None = None, comp=None, base_model: str | None = None,
                skip: dict | None = None) -> pd.DataFrame:
    """The id column, the text columns, O_fold{k}, O_std_fold{k}, O, O_std per output O, for `texts` (ids
    and text columns, read as the competition `comp` (default: the runs') reads them), from `runs`.

    Fold k's columns use only the runs' fold-k models, blended with `fold_weights[k]` (weights
    fitted without fold k's rows, one per run or one per run and target; else `weights`);
    `max_std` blanks fold k's labels of a text whose fold-k models disagree more on any output
    (needs two runs or more), and drops texts left with no label. `base_model`: a LoRA teacher's
    base model folder (else the recorded one is found: utils.backbone.find_base). `skip`: {fold: (N,)
    bool} rows fold k's models do not predict (their O_fold{k} empty: the training rows they validate
    on). A span task's O_fold{k} are each text's character scores of a head (utils.outputs), no spread.
    """
    folds, _ = teachers_folds(runs)
    names = check_teachers(runs)
    check_max_std(runs, max_std)
    comp = comp or run_competition(runs[0])
    check_not_ranking(comp, skip is not None)
    outputs = comp.objective.outputs
    values = shape_of(comp).inputs(comp, texts)  # a row as the runs read it (a question's options too)
    per_run = [predict_folds(run, values, progress=progress, base_model=base_model, skip=skip) for run in runs]
    out = pd.DataFrame({comp.id_col: texts[comp.id_col].astype(str).to_numpy()})  # as the test file
    for c in comp.text_cols:
        out[c] = texts[c].to_numpy()
    overall = normalize_weights(weights, len(runs))
    for k in folds:
        # A fold the blend did not cover (its runs shared other folds): the overall weights were
        # fitted without its rows.
        w = (fold_weights or {}).get(k, overall)
        fold_k = np.stack([preds[k] for preds in per_run], axis=1)  # (N, runs, outputs)
        made = ~np.asarray(skip[k], bool) if skip and k in skip else np.ones(len(texts), bool)  # (own rows: none)
        check_finite(fold_k, made, runs, k, texts[comp.id_col])
        label = blend(fold_k, w)
        if not outputs.signal_numbers:  # character scores: a cell per row and head, nothing left out
            for j, o in enumerate(names):
                column = np.full(len(texts), None, dtype=object)
                column[made] = outputs.signal_column(label[made], j, texts[made])
                out[f"{o}_fold{k}"] = column
            continue
        spread = fold_k.std(axis=1)
        if max_std is not None:
            label[~(spread <= max_std).all(axis=1)] = np.nan
        for j, o in enumerate(names):
            out[f"{o}_fold{k}"], out[f"{o}_std_fold{k}"] = label[:, j], spread[:, j]
    if not outputs.signal_numbers:
        return out
    every_model = np.stack([p for preds in per_run for p in preds.values()], axis=1)
    for j, o in enumerate(names):
        out[o] = out[[f"{o}_fold{k}" for k in folds]].mean(axis=1)  # NaN-skipping: folds that kept it
        out[f"{o}_std"] = np.nanstd(every_model[:, :, j], axis=1)  # (NaN: a fold's own rows, not predicted)
    fold_cols = [f"{names[0]}_fold{k}" for k in folds]  # a fold keeps or drops all outputs of a text
    empty = [k for k, col in zip(folds, fold_cols) if out[col].isna().all()]
    if empty == folds:
        smallest = min(out[[f"{o}_std_fold{k}" for o in names]].max(axis=1).min() for k in folds)
        raise DataError(f"--max-std {max_std:g} leaves none of the {len(out)} texts in any fold "
                        f"(the smallest spread is {smallest:.3g}): nothing written; raise --max-std")
    if empty:
        print(f"warning: --max-std {max_std:g} leaves no text for fold(s) "
              f"{', '.join(map(str, empty))}: a student's fold there trains on its real rows only",
              file=sys.stderr, flush=True)
    return out[out[fold_cols].notna().any(axis=1)].reset_index(drop=True)


def check_finite(fold_k: np.ndarray, made: np.ndarray, runs, k: int, ids: pd.Series) -> None:
    """Fold k's teachers' predictions (N, runs, ...) of the rows it predicts (`made`) are finite; one
    line naming the run and the rows when not (a model that diverged, an fp16 overflow): written,
    they would teach a student NaN, or a span student "no span" everywhere."""
    bad = ~np.isfinite(fold_k.reshape(len(fold_k), len(runs), -1)).all(axis=2) & made[:, None]
    if bad.any():
        r = int(np.flatnonzero(bad.any(axis=0))[0])
        rows = np.flatnonzero(bad[:, r])
        raise DataError(f"{runs[r]}: fold {k}'s model predicts NaN or infinity for {len(rows)} of the "
                        f"{int(made.sum())} texts (e.g. id {ids.iloc[rows[0]]!r}): it diverged in training, or "
                        "overflowed in fp16; nothing written")


def texts_to_label(comp, texts_csv, train_csv) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """(the texts to label, read as the competition's test file, the train duplicates dropped
    (same words, other whitespace) and the blank ones; the dropped duplicates' mask, the blank
    texts' mask), said on stdout; one line when no text is left."""
    texts = read_split(comp, texts_csv, "test", blank="dropped (nothing to label)")
    train = read_split(comp, train_csv, "train")
    plain = plain_texts(comp.input_texts(texts))
    blank = blank_texts(plain)
    known = set(map(normalized, plain_texts(comp.input_texts(train))))
    dup = np.array([normalized(t) in known for t in plain]) & ~blank
    texts = texts[~blank & ~dup].reset_index(drop=True)
    print(f"{Path(texts_csv).name}: {int(dup.sum())} texts already in {Path(train_csv).name} "
          f"dropped, {int(blank.sum())} blank dropped, {len(texts)} to label")
    if len(texts) == 0:
        raise DataError(f"{Path(texts_csv).name}: no text left to label")
    return texts, dup, blank


def training_rows(comp, train_csv, runs) -> pd.DataFrame:
    """The training file's rows the teachers' folds hold, as the teachers read them (all of them,
    or the subset a teacher trained with --max-rows or --drop-reference took, said in one line);
    one line when the folds hold a row the file has not (a teacher of another file)."""
    rows = read_split(comp, train_csv, "train")
    ids = rows[comp.id_col].astype(str)
    theirs = set(read_folds(runs[0]).index.astype(str))
    missing = sorted(theirs - set(ids))
    if missing:
        raise DataError(f"{Path(train_csv).name} has no row {missing[0]!r} of {runs[0]}'s folds ({len(missing)} of "
                        f"their {len(theirs)} rows missing): a student distils the teachers' predictions of the rows "
                        "they trained on, from the same training file")
    held = ids.isin(theirs).to_numpy()
    if not held.all():
        print(f"{Path(train_csv).name}: the {int(held.sum())} of its {len(rows)} rows the teachers trained on "
              "(their folds) are labelled")
    return rows[held].reset_index(drop=True)


def own_fold_rows(rows: pd.DataFrame, comp, runs) -> dict:
    """{fold k: (N,) bool} the training rows of fold k itself: fold k's student validates on them and
    never trains, so fold k's models do not predict them (their O_fold{k} is left empty)."""
    fold_of = read_folds(runs[0])
    fold_of.index = fold_of.index.astype(str)
    own = fold_of.loc[rows[comp.id_col].astype(str)].to_numpy()
    return {k: own == k for k in finished_folds(runs[0])}


def main(argv=None) -> int:
    """CLI entry point: errors a user can act on are one line on stderr and exit code 2."""
    p = argparse.ArgumentParser(prog="python -m utils.pseudo", description=first_paragraph(__doc__),
                                formatter_class=HelpFormatter)
    p.add_argument("--runs", nargs="+", required=True, help="teacher run folders (same folds)")
    p.add_argument("--texts", help="CSV of texts to label: the id and text columns of "
                   "the teachers' competition, as in its test file")
    p.add_argument("--training-rows", action="store_true", help="label the training file's own rows instead "
                   "(no --texts): a student's targets, utils.train --distil-csv; each row's fold-k column from "
                   "the fold-k models, empty on fold k's own rows")
    p.add_argument("--train-csv", required=True, help="the labelled data: its texts are dropped from --texts; "
                   "with --training-rows, the rows labelled")
    p.add_argument("--out", required=True, help="pseudo-label CSV to write (+ its .json)")
    p.add_argument("--blend", help=f"{BLEND}: weights of the runs (default: equal)")
    p.add_argument("--max-std", type=float,
                   help="leave a text out of fold k when the runs' fold-k models disagree more "
                        "(standard deviation; needs two runs or more)")
    p.add_argument("--base-model", default=None, help="a LoRA teacher's base model folder (empty: the recorded "
                   "one, or a Kaggle Model / dataset attached that holds it)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    try:
        # Everything that can be checked on saved files comes before any model loads.
        check_runs(args.runs)  # finished folds, one competition, the same outputs
        folds, fingerprint = teachers_folds(args.runs)
        names = check_teachers(args.runs)
        comp = run_competition(args.runs[0])
        check_not_ranking(comp, args.training_rows)
        run_names(args.runs)
        saved = read_blend(args.blend) if args.blend else None
        weights, fold_weights = blend_weights(args.blend, args.runs, saved) if saved else (None, None)
        if saved and fold_weights is None and not saved.get("equal"):  # equal weights: nothing fitted
            print(f"note: {Path(args.blend).name} has no weights_per_fold: its weights serve every "
                  "fold, honest only if they were not fitted on these runs' out-of-fold rows",
                  file=sys.stderr)
        check_max_std(args.runs, args.max_std)
        if args.max_std is not None and not comp.objective.outputs.signal_numbers:
            raise DataError("--max-std filters on the spread of numbers: a span task's teachers write character "
                            "scores, with no spread")
        if args.max_std is not None and args.training_rows:
            raise DataError("--max-std with --training-rows: a student needs its teacher's prediction of every row "
                            "it trains on; --max-std filters pseudo-labels of other texts (--texts)")
        if args.training_rows == bool(args.texts):
            raise DataError("give --texts (texts to pseudo-label) or --training-rows (the training file's own "
                            "rows, a student's distillation targets), one of the two")
        skip = None
        if args.training_rows:
            texts = training_rows(comp, args.train_csv, args.runs)
            dup, blank = np.zeros(len(texts), bool), np.zeros(len(texts), bool)
            skip = own_fold_rows(texts, comp, args.runs)
        else:
            texts, dup, blank = texts_to_label(comp, args.texts, args.train_csv)
        out = make_pseudo(args.runs, texts, weights, not args.no_progress,
                          fold_weights, args.max_std, comp, args.base_model, skip)
        n_labelled = len(texts)
        kept = {k: int(out[f"{names[0]}_fold{k}"].notna().sum()) for k in folds}
        if args.max_std is not None:
            print(f"--max-std {args.max_std:g} on each fold's own models: "
                  + ", ".join(f"fold {k} keeps {n}" for k, n in kept.items())
                  + f"; {n_labelled - len(out)} texts dropped from every fold, {len(out)} kept")
        info = {"folds": folds, "folds_fingerprint": fingerprint, "outputs": names,
                "competition": comp.slug,
                "runs": run_names(args.runs),
                "weights": normalize_weights(weights, len(args.runs)).tolist(),
                "weights_per_fold": ({str(k): w.tolist() for k, w in fold_weights.items()}
                                     if fold_weights else None),
                "n_rows_per_fold": {str(k): n for k, n in kept.items()},
                "texts": Path(args.texts or args.train_csv).name, "n_rows": len(out),
                "rows": "training" if args.training_rows else "texts",
                "teachers": [{"run": n, "identity": identity(r)} for n, r in zip(run_names(args.runs), args.runs)],
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
