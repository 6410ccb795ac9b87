"""Blending runs: non-negative weights fitted on out-of-fold predictions, scored honestly.

    python -m utils.ensemble --runs runs/rb-s42 runs/rb-s1 runs/rl-s42 --out runs/blend.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from .cli import HelpFormatter, cli_error, first_paragraph
from .data import DataError
from .files import run_names, write_json
from .metrics import METRICS, get_metric
from .runs import BLEND, FOLDS, check_same_competition, read_folds, read_oof
from .runs import identity as run_identity


def _predicts(oof, said: bool = False):
    """What a run's out-of-fold rows predict: its objective, outputs and metric (`said`: in words)."""
    if said:
        return f"{oof.objective.name} {list(oof.outputs)} ({oof.metric})"
    return oof.objective, oof.outputs, oof.metric


def load_members(runs, target: str = "target", min_folds: int = 2) -> dict:
    """The runs' out-of-fold predictions on the rows and folds they share: ids, folds, truth y
    ((N, T) values or (N,) class indices), P (N, members, outputs), the members' names, the
    metric, the objective and the outputs' names (each run's oof.csv read as its competition
    says, utils.runs.read_oof; `target`: the target of a folder that records no competition).

    The runs must share folds (same folds.csv), or the blend's CV estimate would leak, and
    predict the same outputs. Runs with other finished folds are blended on the folds they all
    have, at least `min_folds` (said on stderr): two, or fold k's weights would have no rows to
    be fitted on without fold k; one for an equal-weight average, which fits nothing.
    """
    names = run_names(runs)
    oofs, folds0 = [], None
    for run in map(Path, runs):
        oof = read_oof(run, target)
        if oofs and _predicts(oof) != _predicts(oofs[0]):
            raise DataError(f"{run} predicts {_predicts(oof, True)} but {Path(runs[0])} predicts "
                            f"{_predicts(oofs[0], True)}: only runs of the same competition and "
                            "targets blend")
        folds = read_folds(run)
        if folds0 is None:
            folds0 = folds
        elif not folds.sort_index().equals(folds0.sort_index()):
            raise DataError(f"{run / FOLDS} differs from {Path(runs[0]) / FOLDS}: "
                            "train both runs with the same --fold-seed or --folds-csv")
        oofs.append(oof)
    try:  # the same outputs, and the same competition (two contests' "target" never blend)
        check_same_competition(runs, target)
    except ValueError as e:
        raise DataError(str(e)) from None
    done = {Path(r): sorted(int(k) for k in o.frame["fold"].unique()) for r, o in zip(runs, oofs)}
    shared = sorted(set.intersection(*(set(d) for d in done.values())))
    each = "; ".join(f"{r} has {', '.join(map(str, d))}" for r, d in done.items())
    if not shared:
        raise DataError(f"the runs share no finished fold ({each}): finish the same folds in each")
    if len(shared) < min_folds:  # fold k's weights are fitted on the other shared folds' rows
        # equal weights fit nothing, unless the metric's labels come from a rule (fitted on other folds)
        equal = "" if get_metric(oofs[0].metric).rule else \
            ", or average them with equal weights (--equal), which fits nothing"
        raise DataError(f"the runs share {len(shared)} finished fold(s) ({each}): an honest "
                        f"blend needs at least two shared folds; finish the same folds in each{equal}")
    if any(d != shared for d in done.values()):
        print(f"note: blending on folds {', '.join(map(str, shared))}, the ones every run has "
              f"({each})", file=sys.stderr, flush=True)
    # The rows every run predicts, in the first run's order.
    first = oofs[0].frame
    common = set.intersection(*(set(o.frame["id"]) for o in oofs))
    ids = first["id"][first["id"].isin(common)].to_numpy()
    if len(ids) == 0:
        raise DataError("the runs have no out-of-fold rows in common")
    rows = [pd.Index(o.frame["id"]).get_indexer(ids) for o in oofs]
    # (truth, predictions) of each run, in its own row order, over the same outputs
    arrays = oofs[0].objective.outputs.member_arrays([o.frame for o in oofs], list(oofs[0].truth), runs)
    P = np.stack([pred[r].astype(float) for (_, pred), r in zip(arrays, rows)], axis=1)
    return {"ids": ids, "folds": first["fold"].to_numpy()[rows[0]], "y": arrays[0][0][rows[0]],
            "P": P, "names": names, "metric": oofs[0].metric, "objective": oofs[0].objective,
            "outputs": list(oofs[0].outputs), "truth": list(oofs[0].truth)}


def load_oofs(runs, target="target", min_folds: int = 2) -> pd.DataFrame:
    """One frame of runs with one output each: id, the target, fold and one prediction column
    per run (named after its folder); the checks of load_members."""
    m = load_members(runs, target, min_folds)
    if m["P"].shape[2] != 1:
        raise DataError(f"the runs predict {m['objective'].name} outputs {m['outputs']}: load_members "
                        "gives their (rows, runs, outputs) predictions")
    df = pd.DataFrame({"id": m["ids"], m["truth"][0]: m["y"][:, 0], "fold": m["folds"]})
    for i, name in enumerate(m["names"]):
        df[name] = m["P"][:, i, 0]
    return df


def _simplex_fit(loss, m: int) -> np.ndarray:
    """Weights w >= 0, sum(w) = 1 minimising loss(w) (SLSQP from equal weights)."""
    res = minimize(loss, x0=np.full(m, 1.0 / m), method="SLSQP", bounds=[(0.0, 1.0)] * m,
                   constraints=({"type": "eq", "fun": lambda w: w.sum() - 1.0},))
    w = np.clip(res.x, 0.0, None)
    return w / w.sum()


def fit_weights(preds: np.ndarray, y: np.ndarray, metric: str = "rmse") -> np.ndarray:
    """Weights w >= 0, sum(w) = 1 minimising `metric` (utils.metrics) of preds @ w against y;
    preds (N, M) values of one target, y (N,)."""
    score, y = METRICS[metric].score, np.asarray(y).reshape(len(y), -1)  # one target's column (N, 1)
    return _simplex_fit(lambda w: score(y, (preds @ w)[:, None]), preds.shape[1])


def fit_prob_weights(P: np.ndarray, y: np.ndarray, metric: str = "log_loss") -> np.ndarray:
    """Weights w >= 0, sum(w) = 1 minimising `metric` (utils.metrics: log-loss) of the blended
    class probabilities P (N, M, K) @ w; y (N,) class indices."""
    score = METRICS[metric].score
    return _simplex_fit(lambda w: score(y, np.einsum("nmk,m->nk", P, w)), P.shape[1])


def simplex_grid(m: int, steps: int) -> np.ndarray:
    """Every weight vector of m members in multiples of 1/steps summing to 1, equal-ish first."""
    points = [w for w in itertools.product(range(steps + 1), repeat=m) if sum(w) == steps]
    points.sort(key=lambda w: (max(w) - min(w), w))
    return np.asarray(points, float) / steps


def fit_grid_weights(P: np.ndarray, y: np.ndarray, metric) -> np.ndarray:
    """Weights w >= 0, sum(w) = 1 scoring best on `metric` (a ranking's MAP@k: steps, no gradient)
    over a grid of the simplex: tenths for up to 4 members, fifths for more; ties go to the most
    even weights."""
    sign = 1.0 if metric.greater_is_better else -1.0
    grid = simplex_grid(P.shape[1], 10 if P.shape[1] <= 4 else 5)
    scores = [sign * metric.score(y, np.tensordot(P, w, axes=([1], [0]))) for w in grid]
    return grid[int(np.argmax(scores))]


def fit_blend(P: np.ndarray, y: np.ndarray, objective, metric=None) -> np.ndarray:
    """Blend weights on the objective's blend metric (utils.objective.Objective.blend_metric):
    (M,) for class probabilities (log-loss: smooth, unlike F1), or (M, T) one column per
    target (each on its own RMSE); an objective with no smooth one (a retriever's ranks) on the
    competition's `metric` itself (fit_grid_weights)."""
    if not objective.blend_metric:
        return fit_grid_weights(P, y, metric)
    if objective.classes:
        return fit_prob_weights(P, y, objective.blend_metric)
    return np.stack([fit_weights(P[:, :, t], y[:, t], objective.blend_metric)
                     for t in range(P.shape[2])], axis=1)


def blend(P: np.ndarray, W: np.ndarray) -> np.ndarray:
    """(N, outputs) blended predictions: W (M,) for every output, or (M, T) per output; a span
    task's (N, M, characters, heads) -> (N, characters, heads) by W (M,)."""
    W = np.asarray(W, float)
    if P.ndim == 4:
        return np.tensordot(P, W, axes=([1], [0]))
    return np.einsum("nmo,mo->no", P, W if W.ndim == 2 else np.repeat(W[:, None], P.shape[2], 1))


def _weights_json(W: np.ndarray) -> list:
    """Per run: one weight, or one per target (as blend.json stores them)."""
    W = np.asarray(W, float)
    return W.tolist() if W.ndim == 1 or W.shape[1] > 1 else W[:, 0].tolist()


def honest_blend(P: np.ndarray, y: np.ndarray, folds: np.ndarray, objective, metric):
    """For each fold k: weights (fit_blend, on the objective's blend metric), and the metric's
    decision rule (on the blend of the other folds' rows), fitted without fold k's rows, then
    applied to fold k. P (N, M, outputs). Returns (blended OOF (N, outputs), the CV score,
    {fold: weights}, {fold: rule} or None)."""
    out = np.zeros((len(y), *P.shape[2:]))
    per_fold, rules = {}, {}
    for k in np.unique(folds):
        held = folds == k
        W = fit_blend(P[~held], y[~held], objective, metric)
        everyone = blend(P, W)
        out[held] = everyone[held]
        per_fold[int(k)] = _weights_json(W)
        if metric.rule:
            rules[int(k)] = metric.fit_rule(y[~held], everyone[~held])
    score = metric.score_under(y, out, folds, rules) if metric.rule else metric.score(y, out)
    return out, score, per_fold, (rules or None)


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


def blend_report(runs, target="target", extra: dict | None = None, equal: bool = False) -> dict:
    """The competition's metric (as the runs' metrics.json name it) of each member, of their
    equal-weight average, of the fitted blend (in-sample and CV), the weights, the decision
    rule for the test set and the correlation of the members' OOF predictions.

    Members: the runs (any number: seeds, poolings, backbones; they must share folds and
    outputs), then the `extra` out-of-fold predictions of one output ({name: Series indexed by
    id}, made on the same folds). Weights: one per run for probabilities (fitted on log-loss),
    one per run and target for values (each target on its RMSE). A metric with a decision rule
    scores every line with each fold's rule fitted on the other folds.

    `equal`: the blend is the equal-weight average, nothing fitted ("weights_per_fold" None), so
    runs that share a single finished fold (seeds compared on fold 0) blend too, unless the
    metric's decision rule needs other folds to be fitted on.
    """
    m = load_members(runs, target, min_folds=1 if equal else 2)
    P, y, folds, names = m["P"], m["y"], m["folds"], list(m["names"])
    if extra:
        if P.shape[2] != 1:
            raise DataError(f"extra members have one output; the runs predict {m['outputs']}")
        df = pd.DataFrame({"id": m["ids"]})
        for name, pred in extra.items():
            if name in names:
                raise DataError(f"two blend members are named {name!r}")
            df = add_oof(df, name, pred)
            names.append(name)
        P = np.concatenate([P, df[list(extra)].to_numpy(dtype=float)[:, :, None]], axis=1)
    metric = m["objective"].outputs.blend_metric_of(get_metric(m["metric"]))  # a span task's: of the answers decoded
    score = lambda pred: metric.honest_score(y, pred, folds)[0]  # noqa: E731
    one_fold = len(np.unique(folds)) < 2
    if equal and metric.rule and not metric.rule_has_default and one_fold:
        raise DataError(f"{metric.name} scores labels picked by a rule fitted on other folds, and the "
                        "runs share one finished fold: finish another fold in each")
    average, average_rules = metric.honest_score(y, P.mean(axis=1), folds)
    if equal:  # the blend is the average: its CV score and per-fold rules are the average's
        W = np.full(P.shape[1], 1.0 / P.shape[1])
        in_sample = blend(P, W)
        # one fold: nothing to fit a rule on that decodes as the CV does, so the default (0.5) decodes
        rule = None if one_fold and metric.rule_has_default else metric.fit_rule(y, in_sample)
        cv, per_fold, rules = average, None, (average_rules or None)
    else:
        W = fit_blend(P, y, m["objective"], metric)
        in_sample = blend(P, W)
        rule = metric.fit_rule(y, in_sample)
        _, cv, per_fold, rules = honest_blend(P, y, folds, m["objective"], metric)
    # Correlation of the members: of one class's probability, or of their values over every target.
    C = P[:, :, -1] if m["objective"].classes else np.moveaxis(P, 1, -1).reshape(-1, P.shape[1])
    if P.ndim == 4:  # character scores: where some member scores (not the padding past a text)
        C = C[(C != 0).any(1)]
    return {
        "runs": names,
        "identities": {n: run_identity(r) for n, r in zip(m["names"], runs)},  # runs only, not extra
        "metric": metric.name,
        "greater_is_better": metric.greater_is_better,
        "outputs": m["outputs"],
        "weights": _weights_json(W),
        "n_rows": len(y),
        "folds": sorted(int(k) for k in np.unique(folds)),
        "scores": {n: score(P[:, i]) for i, n in enumerate(names)},
        "score_equal_average": average,
        "equal": equal,
        "score_blend_in_sample": metric.score(y, in_sample, rule),
        "score_blend_cv": cv,
        "weights_per_fold": per_fold,
        "rule": rule,
        "rules_per_fold": rules,
        "correlation": np.corrcoef(C.T).reshape(len(names), len(names)).tolist(),
    }


def summary(report: dict) -> pd.DataFrame:
    """The report's scores as a one-column table: each member, the average, both blend estimates
    (the average alone when it is the blend: nothing fitted)."""
    rows = {**report["scores"], "equal-weight average": report["score_equal_average"]}
    if not report.get("equal"):
        rows.update({"blend, weights fitted on all OOF (optimistic)": report["score_blend_in_sample"],
                     "blend, weights fitted inside CV (honest)": report["score_blend_cv"]})
    return pd.DataFrame({report["metric"]: rows})


# ----------------------------------------------------------------------------- blend.json


def normalize_weights(weights, n: int) -> np.ndarray:
    """Non-negative blend weights summing to 1: (n,), or (n, targets) with each target's column
    summing to 1 (per-target weights); equal weights when None."""
    if weights is None:
        return np.full(n, 1.0 / n)
    w = np.asarray(weights, dtype=float)
    if w.ndim not in (1, 2) or w.shape[0] != n:
        raise ValueError(f"{len(w)} blend weights for {n} runs")
    if (w < 0).any() or not np.isfinite(w).all() or (w.sum(axis=0) <= 0).any():
        raise ValueError(f"blend weights must be non-negative with a positive sum, got {w.tolist()}")
    return w / w.sum(axis=0)


def save_blend(path, report: dict) -> None:
    """blend.json: the report of blend_report ("runs", "identities", "weights", "weights_per_fold",
    "rule", the scores), written atomically; what read_blend reads back."""
    write_json(path, report)


def read_blend(path) -> dict:
    """blend.json checked: {"runs": [names], "weights": [one per run]}, and, as blend_report
    writes it, "identities": {name: run identity} and "weights_per_fold": {fold: [one per run]}
    (fold k's weights fitted without fold k's rows)."""
    path = Path(path)
    try:
        blend = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise DataError(f"{path}: cannot be read as a {BLEND} ({type(e).__name__}: {e})") from None
    if not isinstance(blend, dict) or not {"runs", "weights"} <= set(blend):
        found = sorted(blend) if isinstance(blend, dict) else type(blend).__name__
        raise DataError(f"{path}: expected {{'runs': [...], 'weights': [...]}} as utils.ensemble "
                        f"writes it, found {found}")
    runs, weights = blend["runs"], blend["weights"]
    if not isinstance(runs, list) or not isinstance(weights, list) or len(runs) != len(weights):
        raise DataError(f"{path}: 'runs' and 'weights' must be lists of the same length")
    for k, w in (blend.get("weights_per_fold") or {}).items():
        if not isinstance(w, list) or len(w) != len(runs):
            raise DataError(f"{path}: weights_per_fold[{k}] must give one weight per run")
    return blend


def check_members(blend: dict, runs, path=BLEND) -> None:
    """One line unless the blend's members are exactly `runs`: every member given, no other run,
    and each the same run it was fitted on (its identity, utils.runs.identity). A blend saved
    before blends recorded identities is checked by folder names only (said on stderr)."""
    names = run_names(runs)
    listed = list(blend["runs"])
    missing = [n for n in listed if n not in names]
    extra = [n for n in names if n not in listed]
    if missing or extra:
        what = "; ".join(x for x in (f"its member(s) {', '.join(missing)} not given" if missing else "",
                                     f"run(s) {', '.join(extra)} not in it" if extra else "") if x)
        raise DataError(f"{path} blends {', '.join(listed)}, not the runs given ({what}): give exactly "
                        "its runs, or fit a blend of these runs with utils.ensemble")
    recorded = blend.get("identities")
    if not recorded:
        print(f"note: {Path(path).name} records no run identities (saved by an older version): its "
              "members are matched by folder name only", file=sys.stderr, flush=True)
        return
    for name, run in zip(names, runs):
        mine = run_identity(run)
        if recorded.get(name) != mine:
            raise DataError(f"{path} was fitted on another run named {name!r} (identity "
                            f"{recorded.get(name)}, but {run} is {mine}): fit the blend again on these runs")


def _pick(listed, weights, names) -> np.ndarray:
    by_name = dict(zip(listed, weights))
    return np.array([by_name[n] for n in names], dtype=float)


def blend_weights(path, runs, blend: dict | None = None) -> tuple[np.ndarray, dict | None]:
    """From blend.json (read once, or `blend` already read from `path`), after check_members: the
    weights of `runs` in their order, and {fold: weights summing to 1} from weights_per_fold
    (fold k's fitted on the other folds' rows only), or None when the file has none."""
    blend = read_blend(path) if blend is None else blend
    check_members(blend, runs, path)
    names = run_names(runs)
    weights = _pick(blend["runs"], blend["weights"], names)
    if not blend.get("weights_per_fold"):
        return weights, None
    per_fold = {int(k): normalize_weights(_pick(blend["runs"], w, names), len(runs))
                for k, w in blend["weights_per_fold"].items()}
    return weights, per_fold


def main(argv=None) -> int:
    """CLI: fit the blend of the runs, print the table, write blend.json (for utils.predict)."""
    p = argparse.ArgumentParser(prog="python -m utils.ensemble", description=first_paragraph(__doc__),
                                formatter_class=HelpFormatter)
    p.add_argument("--runs", nargs="+", required=True, help="run folders trained on the same folds")
    p.add_argument("--out", required=True, help=f"{BLEND} to write")
    p.add_argument("--equal", action="store_true", help="blend with equal weights, fitting nothing (runs that "
                   "share one finished fold: seeds compared on fold 0)")
    p.add_argument("--target", default="target", help="the target column of runs saved before runs "
                   "recorded their competition")
    args = p.parse_args(argv)
    try:
        report = blend_report(args.runs, args.target, equal=args.equal)
    except (DataError, ValueError, OSError) as e:
        return cli_error(e)
    print(summary(report).to_string(float_format="{:.4f}".format))
    print("weights:", ", ".join(f"{n} {np.round(w, 3).tolist()}" for n, w in zip(report["runs"], report["weights"])))
    save_blend(args.out, report)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
