"""Blending runs: non-negative weights fitted on out-of-fold predictions, scored honestly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from .data import DataError
from .files import write_json
from .metrics import rmse


def load_oofs(runs, target="target") -> pd.DataFrame:
    """One frame: id, target, fold and one prediction column per run (named after its folder).

    The runs must share folds (same folds.csv), or the blend's CV estimate would leak.
    """
    merged, folds0 = None, None
    for run in runs:
        run = Path(run)
        oof = pd.read_csv(run / "oof.csv", dtype={"id": str})
        folds = pd.read_csv(run / "folds.csv", dtype={"id": str}).set_index("id")["fold"]
        if folds0 is None:
            folds0 = folds
        elif not folds.sort_index().equals(folds0.sort_index()):
            raise DataError(f"{run}/folds.csv differs from {Path(runs[0])}/folds.csv: "
                            "train both runs with the same --fold-seed or --folds-csv")
        part = oof[["id", target, "fold", "pred"]].rename(columns={"pred": run.name})
        if merged is None:
            merged = part
        else:
            merged = merged.merge(part[["id", run.name]], on="id", how="inner")
    if merged is None or len(merged) == 0:
        raise DataError("the runs have no out-of-fold rows in common")
    return merged


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


def blend_report(runs, target="target") -> dict:
    """RMSE of each run, of the 0.5/0.5 average, of the fitted blend (in-sample and CV), weights."""
    df = load_oofs(runs, target)
    names = [Path(r).name for r in runs]
    P, y, folds = df[names].to_numpy(), df[target].to_numpy(), df["fold"].to_numpy()
    w = fit_weights(P, y)
    cv_pred, per_fold = cv_blend(P, y, folds)
    return {
        "runs": names,
        "weights": w.tolist(),
        "n_rows": len(df),
        "rmse": {n: rmse(y, P[:, i]) for i, n in enumerate(names)},
        "rmse_equal_average": rmse(y, P.mean(axis=1)),
        "rmse_blend_in_sample": rmse(y, P @ w),
        "rmse_blend_cv": rmse(y, cv_pred),
        "weights_per_fold": per_fold,
        "correlation": np.corrcoef(P.T).tolist(),
    }


def save_blend(path, report: dict) -> None:
    """blend.json in the predict CLI's format: {"runs": [...], "weights": [...]} (+ the report)."""
    write_json(path, report)
