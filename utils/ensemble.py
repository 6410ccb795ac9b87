"""Blending runs: non-negative weights fitted on out-of-fold predictions, scored honestly.

    python -m utils.ensemble --runs runs/rb-s42 runs/rb-s1 runs/rl-s42 --out runs/blend.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from .data import DataError
from .files import run_names, write_json
from .metrics import rmse


def load_oofs(runs, target="target") -> pd.DataFrame:
    """One frame: id, target, fold and one prediction column per run (named after its folder).

    The runs must share folds (same folds.csv), or the blend's CV estimate would leak. Runs with
    other finished folds are blended on the folds they all have, at least two (said on stderr);
    fewer would leave no rows to fit fold k's weights without fold k.
    """
    names = run_names(runs)
    merged, folds0, done = None, None, {}
    for run, name in zip(runs, names):
        run = Path(run)
        for f in ("oof.csv", "folds.csv"):
            if not (run / f).is_file():
                raise DataError(f"{run} has no {f}: not a run folder with a finished fold")
        oof = pd.read_csv(run / "oof.csv", dtype={"id": str})
        missing = [c for c in ("id", target, "fold", "pred") if c not in oof.columns]
        if any(str(c).startswith("prob_") for c in oof.columns):
            # Its `pred` holds class labels: a weighted mean of labels is no prediction.
            raise DataError(f"{run} is a classification run (oof.csv has class probabilities): "
                            "blending takes runs with one regression target")
        if missing:
            raise DataError(f"{run}/oof.csv has no column {', '.join(map(repr, missing))} "
                            f"(found: {', '.join(oof.columns)}): blending takes runs with one "
                            f"regression target named {target!r} (--target)")
        folds = pd.read_csv(run / "folds.csv", dtype={"id": str}).set_index("id")["fold"]
        if folds0 is None:
            folds0 = folds
        elif not folds.sort_index().equals(folds0.sort_index()):
            raise DataError(f"{run}/folds.csv differs from {Path(runs[0])}/folds.csv: "
                            "train both runs with the same --fold-seed or --folds-csv")
        done[run] = sorted(int(k) for k in oof["fold"].unique())
        part = oof[["id", target, "fold", "pred"]].rename(columns={"pred": name})
        merged = part if merged is None else merged.merge(part[["id", name]], on="id", how="inner")
    shared = sorted(set.intersection(*(set(d) for d in done.values())))
    each = "; ".join(f"{r} has {', '.join(map(str, d))}" for r, d in done.items())
    if len(shared) < 2:  # fold k's weights are fitted on the other shared folds' rows
        raise DataError(f"the runs share {len(shared)} finished fold(s) ({each}): an honest "
                        "blend needs at least two shared folds; finish the same folds in each")
    if any(d != shared for d in done.values()):
        print(f"note: blending on folds {', '.join(map(str, shared))}, the ones every run has "
              f"({each})", file=sys.stderr, flush=True)
    if len(merged) == 0:
        raise DataError("the runs have no out-of-fold rows in common")
    return merged.reset_index(drop=True)


def fit_weights(preds: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Weights w >= 0, sum(w) = 1 minimising RMSE(preds @ w, y); preds is (N, M)."""
    m = preds.shape[1]
    res = minimize(
        lambda w: rmse(y, preds @ w),
        x0=np.full(m, 1.0 / m),
        method="SLSQP",
        bounds=[(0.0, 1.0)] * m,
        constraints=({"type": "eq", "fun": lambda w: w.sum() - 1.0},),
    )
    w = np.clip(res.x, 0.0, None)
    return w / w.sum()


def cv_blend(preds: np.ndarray, y: np.ndarray, folds: np.ndarray):
    """Honest blend estimate: weights fitted on the other folds, applied to each held-out fold.

    Returns (blended OOF predictions (N,), {fold: weights}).
    """
    out = np.zeros(len(y))
    per_fold = {}
    for k in np.unique(folds):
        held = folds == k
        w = fit_weights(preds[~held], y[~held])
        out[held] = preds[held] @ w
        per_fold[int(k)] = w.tolist()
    return out, per_fold


def add_oof(oofs: pd.DataFrame, name: str, pred: pd.Series) -> pd.DataFrame:
    """`oofs` with one more prediction column `name` from `pred` (indexed by id): e.g. a TF-IDF
    baseline's out-of-fold predictions, made on the runs' own folds (or the CV leaks)."""
    if name in oofs.columns:
        raise DataError(f"two blend members are named {name!r}")
    col = oofs["id"].map(pred.rename(index=str))
    if col.isna().any():
        raise DataError(f"{name} has no out-of-fold prediction for {int(col.isna().sum())} of the "
                        f"runs' ids, e.g. {oofs['id'][col.isna()].iloc[0]}")
    return oofs.assign(**{name: col.to_numpy(dtype=float)})


def blend_report(runs, target="target", extra: dict | None = None) -> dict:
    """RMSE of each member, of their equal-weight average, of the fitted blend (in-sample and CV),
    the weights and the correlation of the members' OOF predictions.

    Members: the runs (any number: seeds, poolings, backbones; they must share folds), then the
    `extra` out-of-fold predictions ({name: Series indexed by id}, made on the same folds).
    """
    df = load_oofs(runs, target)
    for name, pred in (extra or {}).items():
        df = add_oof(df, name, pred)
    names = run_names(runs) + list(extra or {})
    P, y, folds = df[names].to_numpy(), df[target].to_numpy(), df["fold"].to_numpy()
    w = fit_weights(P, y)
    cv_pred, per_fold = cv_blend(P, y, folds)
    return {
        "runs": names,
        "weights": w.tolist(),
        "n_rows": len(df),
        "folds": sorted(int(k) for k in np.unique(folds)),
        "rmse": {n: rmse(y, P[:, i]) for i, n in enumerate(names)},
        "rmse_equal_average": rmse(y, P.mean(axis=1)),
        "rmse_blend_in_sample": rmse(y, P @ w),
        "rmse_blend_cv": rmse(y, cv_pred),
        "weights_per_fold": per_fold,
        "correlation": np.corrcoef(P.T).reshape(len(names), len(names)).tolist(),
    }


def summary(report: dict) -> pd.DataFrame:
    """The report's RMSEs as a one-column table: each member, the average, both blend estimates."""
    rows = {**report["rmse"],
            "equal-weight average": report["rmse_equal_average"],
            "blend, weights fitted on all OOF (optimistic)": report["rmse_blend_in_sample"],
            "blend, weights fitted inside CV (honest)": report["rmse_blend_cv"]}
    return pd.DataFrame({"RMSE": rows})


def save_blend(path, report: dict) -> None:
    """blend.json in the predict CLI's format: {"runs": [...], "weights": [...]} (+ the report)."""
    write_json(path, report)


def main(argv=None) -> int:
    """CLI: fit the blend of the runs, print the table, write blend.json (for utils.predict)."""
    p = argparse.ArgumentParser(prog="python -m utils.ensemble", description=__doc__.split("\n")[0])
    p.add_argument("--runs", nargs="+", required=True, help="run folders trained on the same folds")
    p.add_argument("--out", required=True, help="blend.json to write")
    p.add_argument("--target", default="target")
    args = p.parse_args(argv)
    try:
        report = blend_report(args.runs, args.target)
    except (DataError, ValueError, OSError) as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)  # utils.config needs torch
        return 2
    print(summary(report).to_string(float_format="{:.4f}".format))
    print("weights:", ", ".join(f"{n} {w:.3f}" for n, w in zip(report["runs"], report["weights"])))
    save_blend(args.out, report)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
