"""A reranker over a retriever's candidates: each (query, candidate) pair through the kit's model
(an encoder, or a decoder with LoRA), the candidates of a query compared with each other. It is a
multiple-choice scorer whose options are the retriever's top N items for the query:

    python -m utils.rerank build --retriever runs/eedi-minilm --data DATA --candidates 25 --out rr/
    python -m utils.train --competition rr/competition.json --train-csv rr/rerank_train.csv \
        --folds K --model MODEL --out runs/eedi-rerank ...   # K: the retriever's --folds
    python -m utils.rerank predict --retriever runs/eedi-minilm --reranker runs/eedi-rerank \
        --test-csv DATA/test.csv --out submission.csv

Honest end to end: a training query's candidates are the retriever's out-of-fold ones (the
`candidates` of its out-of-fold file: models that never trained on it), so training sees the
candidates test time sees; the reranker trains on the retriever's own folds, so a query's rerank
score comes from a model that never trained on it either. A query whose true item is not among its N candidates is
never trained on and is validated all the same, scoring 0 (`no_answer`): with N >= answer_k the
reranker's CV is the MAP@k of the reranker's order over the top N, then the retriever's.

The final order mixes the two: a candidate at the retriever's rank r (0 first) scores
log p_reranker - weight * log(1 + r), the retriever's rank a prior over the reranker's verdict
(weight 0: the reranker alone; large: the retriever's order). A reranker trained on the items
the labels tag learns to prefer them; the prior keeps the items it never saw within reach. The
weight is fitted on the reranker's out-of-fold file (a grid, the best MAP@k), and its CV is honest:
each fold's queries mixed with the weight the other folds chose:

    python -m utils.rerank prior --reranker runs/eedi-rerank

Light: pandas; torch only when predicting.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .cli import HelpFormatter, cli_error, first_paragraph
from .competition import SEP, Competition, is_reranker, option_names  # noqa: F401 (re-exported)
from .data import DataError
from .files import fold_dirs, write_csv
from .metrics import METRICS, top_k
from .runs import FOLDS, OOF, has_config, has_oof, read_folds, read_oof, run_competition
from .tables import catalogue_path, read_catalogue, read_split, read_table

TRAIN, DESCRIPTION = "rerank_train.csv", "competition.json"
NO_ANSWER = "none"
PRIOR_WEIGHTS = tuple(float(w) for w in np.arange(0, 4.01, 0.25))  # the grid a weight is fitted on




def description(comp: Competition, n: int) -> Competition:
    """The reranker's competition: a multiple choice among a query's N candidates, answered with
    the retriever's competition's answer_k, folds from the retriever's folds.csv."""
    if n < comp.answer_k:
        raise ValueError(f"--candidates {n} is fewer than the {comp.answer_k} answers a row lists (answer_k): "
                         f"rerank at least {comp.answer_k}")
    return Competition(slug=comp.slug, title=f"{comp.title or comp.slug}: reranking", id_col="id",
                       text_cols=("query",), options=option_names(n), target_cols=("answer",),
                       task="multiple_choice", answer_k=comp.answer_k, no_answer=NO_ANSWER, train_file=TRAIN,
                       folds="file", folds_file=FOLDS, short_name=f"{comp.kit_name[:-4]}-rerank",
                       long_text=comp.long_text)  # a query is cut as the retriever's were (Eedi: keeping its end)


def table(queries, candidates, items: pd.DataFrame, n: int, truth=None, ids=None) -> pd.DataFrame:
    """A row per query: its text, its top-n candidates' texts (c0..) and ids, and, given the truth,
    which candidate is the true item (NO_ANSWER when none is)."""
    text = dict(zip(items["id"], items["text"]))
    top = [list(c)[:n] for c in candidates]
    short = [i for i, c in enumerate(top) if len(c) < n]
    if short:
        raise DataError(f"query {short[0]} has {len(top[short[0]])} candidates, fewer than the {n} the reranker "
                        f"reads: a catalogue of {n} items at least")
    out = pd.DataFrame({"id": ids if ids is not None else range(len(top)),
                        "query": [str(q).replace(SEP, " | ") for q in queries]})
    for j, name in enumerate(option_names(n)):
        out[name] = [text[c[j]] for c in top]
    out["candidate_ids"] = [" ".join(c) for c in top]
    if truth is not None:
        out["answer"] = [f"c{c.index(t)}" if t in c else NO_ANSWER for c, t in zip(top, map(str, truth))]
    return out


def run_folder(run) -> Path:
    """A folder that holds a run (a config, an out-of-fold file or a finished fold); one line when
    it does not exist (a typo) or holds none."""
    run = Path(run)
    if not run.is_dir():
        raise DataError(f"{run}: the run folder does not exist")
    if not (has_config(run) or has_oof(run) or fold_dirs(run, required=False)):
        raise DataError(f"{run} holds no run (no config, no out-of-fold file, no finished fold)")
    return run


def retriever_competition(run) -> Competition:
    """The competition a retriever run was trained for; one line when the run is not a retriever."""
    comp = run_competition(run_folder(run))
    if not comp.catalogue:
        raise DataError(f"{run} is not a retriever run (its competition {comp.slug} has no catalogue)")
    return comp


def reranker_competition(run) -> Competition:
    """The competition a reranker run was trained for (`description`'s); one line when the run is
    not a reranker (a retriever, another multiple choice, any other run)."""
    comp = run_competition(run_folder(run))
    if not is_reranker(comp):
        raise DataError(f"{run} is not a reranker run (it was trained for {comp.slug}, task {comp.task}): train one "
                        "on the table of python -m utils.rerank build")
    return comp


def build(retriever, data_dir, n: int, out) -> dict:
    """The reranker's training table, folds and description in `out`, from a retriever run whose
    every fold is finished (each training query then has out-of-fold candidates)."""
    retriever, out = Path(retriever), Path(out)
    comp = retriever_competition(retriever)
    oof = read_oof(retriever).frame.set_index("id")
    train = read_table(comp, data_dir)
    ids = train[comp.id_col].astype(str)
    missing = ~ids.isin(oof.index)
    if missing.any():
        raise DataError(f"{retriever}: {int(missing.sum())} training queries have no out-of-fold candidates (e.g. "
                        f"{ids[missing].iloc[0]!r}): finish every fold of the retriever first")
    desc = description(comp, n)
    cands = [str(c).split() for c in oof.loc[ids, "candidates"]]
    kept = min(len(c) for c in cands)
    if kept < n:
        raise DataError(f"--candidates {n}: the retriever's {OOF} ({retriever}) keeps {kept} candidates per query: "
                        f"rerank at most that many (--candidates {kept})")
    items = read_catalogue(comp, data_dir)  # light: utils.shapes (its items) would import torch
    known = set(items["id"])
    lacking = next(((q, c) for q, row in zip(ids, cands) for c in row[:n] if c not in known), None)
    if lacking:
        raise DataError(f"{catalogue_path(comp, data_dir)}: the catalogue has no id {lacking[1]!r}, a candidate "
                        f"of query {lacking[0]!r} in {Path(retriever) / OOF}: build with the catalogue the "
                        "retriever ranked")
    frame = table(comp.input_texts(train), cands, items, n, train[comp.target_cols[0]].astype(str), ids.to_numpy())
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / TRAIN, frame)
    folds = read_folds(retriever)
    write_csv(out / FOLDS, pd.DataFrame({"id": folds.index.astype(str), "fold": folds.to_numpy()}))
    desc.save(out / DESCRIPTION)
    found = float(np.mean(frame["answer"] != NO_ANSWER))
    return {"rows": len(frame), "true_item_in_candidates": found, "description": str(out / DESCRIPTION),
            "folds": int(folds.nunique())}


def mix(probs: np.ndarray, weight: float) -> np.ndarray:
    """(rows, n) final scores of each row's n candidates, in the retriever's order: the reranker's
    log-probability of each plus `weight` times the log of a prior 1 / (1 + rank) over the
    retriever's ranks (weight 0: the reranker's order; large: the retriever's)."""
    return np.log(np.clip(probs, 1e-12, None)) - weight * np.log1p(np.arange(probs.shape[1]))


def fit_weight(probs: np.ndarray, truth: np.ndarray, metric) -> float:
    """The grid's weight whose mixed order scores best by `metric` (the smallest among equals)."""
    scores = [metric.score(truth, mix(probs, w)) for w in PRIOR_WEIGHTS]
    return PRIOR_WEIGHTS[int(np.argmax(scores))]


def cross_fit(probs: np.ndarray, truth: np.ndarray, folds: np.ndarray, metric) -> tuple[np.ndarray, dict]:
    """(each row's mixed scores with the weight fitted on the other folds' rows, {fold: weight}):
    no row's order depends on a weight its own fold chose. Needs two folds at least."""
    names = list(dict.fromkeys(folds.tolist()))
    if len(names) < 2:
        raise ValueError(f"an honest weight needs out-of-fold rows of two folds at least (found {len(names)}): "
                         "finish another fold of the reranker")
    out, weights = np.empty_like(probs, dtype=float), {}
    for f in names:
        mine = folds == f
        weights[f] = fit_weight(probs[~mine], truth[~mine], metric)
        out[mine] = mix(probs[mine], weights[f])
    return out, weights


def _out_of_fold(reranker) -> tuple:
    """(metric, truth, probabilities, folds) of a reranker run's out-of-fold file; one line when
    the run is not a reranker."""
    reranker_competition(reranker)
    run = read_oof(reranker)
    truth, probs = run.objective.outputs.oof_arrays(run.frame, run.truth)
    return METRICS[run.metric], truth, probs, run.frame["fold"].astype(str).to_numpy()


def prior_weight(reranker) -> float:
    """The weight the submission mixes with: fitted on every out-of-fold row of the reranker."""
    metric, truth, probs, _ = _out_of_fold(reranker)
    return fit_weight(probs, truth, metric)


def prior(reranker) -> dict:
    """The reranker run's out-of-fold figures by its metric: the reranker's order alone, the
    retriever's order (its candidates as listed), and the mixed one, its weight fitted on every
    row (what the submission uses) and, with two folds or more, its honest CV (each fold mixed with
    the weight the other folds chose)."""
    metric, truth, probs, folds = _out_of_fold(reranker)
    weight = fit_weight(probs, truth, metric)
    out = {"metric": metric.name, "rows": len(truth), "weight": weight,
           "reranker": metric.score(truth, probs), "retriever": metric.score(truth, mix(probs, 1e6)),
           "mixed_in_sample": metric.score(truth, mix(probs, weight))}
    if len(set(folds)) > 1:
        scores, weights = cross_fit(probs, truth, folds, metric)
        out.update(cv=metric.score(truth, scores), fold_weights=weights)
    return out


def rerank(retriever_scores: np.ndarray, reranker_probs: np.ndarray, n: int, weight: float = 0.0) -> np.ndarray:
    """(rows, items) scores whose order is the mixed one (`mix`) over each row's top n items of
    the retriever, then the retriever's for the rest."""
    top = top_k(retriever_scores, n)
    out = np.argsort(np.argsort(-retriever_scores, axis=1, kind="stable"), axis=1).astype(float)
    out = -out  # the retriever's order, as scores
    rows = np.arange(len(top))[:, None]
    out[rows, top] = 1e9 + mix(reranker_probs, weight)  # the top n above every other item, in the mixed order
    return out


def check_pair(retriever, reranker) -> tuple[Competition, Competition]:
    """(the retriever's competition, the reranker's), or one line saying why the reranker cannot
    follow that retriever: it must be a run on `build`'s table of a retriever of the same
    competition."""
    comp, rr = retriever_competition(retriever), reranker_competition(reranker)
    if rr.slug != comp.slug:
        raise DataError(f"{reranker} is not a reranker of {comp.slug}'s retriever (it was trained for "
                        f"{rr.slug}, task {rr.task}): train one on `python -m utils.rerank build`'s table")
    return comp, rr


def predict(retriever, reranker, test_csv, out, n: int | None = None, timings: dict | None = None,
            weight: float | None = None, sample_submission: bool = True, **kw) -> pd.DataFrame:
    """The submission: the retriever ranks the catalogue beside the test file, the reranker
    reorders each row's top n, mixed with the retriever's ranks by `weight` (None: the one fitted
    on the reranker's out-of-fold file, `prior_weight`); written in the sample submission's rows and
    column (sample_submission=False: the test file's order, unchecked). `timings` gets the seconds
    of each stage ('retrieve', 'rerank')."""
    from .predict import check_sample, predict_run, write_submission  # torch: only when predicting
    from .shapes import shape_of  # torch too

    comp, rr = check_pair(retriever, reranker)
    n = n or len(rr.options)
    weight = prior_weight(reranker) if weight is None else weight
    if weight < 0:
        raise ValueError(f"--prior-weight {weight:g}: a weight of the retriever's ranks is 0 (the reranker alone) "
                         "or more")
    test = read_split(comp, test_csv, "test", blank=shape_of(comp).blank_note)
    items = shape_of(comp).items(comp, Path(test_csv).parent)
    sample = check_sample(Path(test_csv).parent / comp.sample_submission) if sample_submission else None
    t0 = time.time()
    scores = predict_run(retriever, shape_of(comp).inputs(comp, test), items=items["text"].tolist(), **kw)
    scores = np.asarray(scores).reshape(len(test), -1)
    ids = np.asarray(items["id"])
    cands = [list(ids[r]) for r in top_k(scores, n)]  # as the out-of-fold file's candidates are made
    rows = table(comp.input_texts(test), cands, items, n)
    t1 = time.time()
    probs = np.asarray(predict_run(reranker, shape_of(rr).inputs(rr, rows), **kw)).reshape(len(test), n)
    final = rerank(scores, probs, n, weight)
    if timings is not None:
        timings.update(retrieve=t1 - t0, rerank=time.time() - t1)
    return write_submission(out, test, final, comp, {"target_names": list(ids)}, None, sample)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m utils.rerank", description=first_paragraph(__doc__),
                                formatter_class=HelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="the reranker's training table from a retriever's out-of-fold candidates",
                       formatter_class=HelpFormatter)
    b.add_argument("--retriever", required=True, help="a retriever run folder, every fold finished")
    b.add_argument("--data", required=True, help="the competition's folder (train file, catalogue)")
    b.add_argument("--candidates", type=int, default=25, help="the top N candidates reranked per query")
    b.add_argument("--out", required=True, help=f"folder for {TRAIN}, {FOLDS} and {DESCRIPTION}")
    q = sub.add_parser("predict", help="the submission: retrieve, then rerank each row's top N",
                       formatter_class=HelpFormatter)
    q.add_argument("--retriever", required=True, help="the retriever run folder")
    q.add_argument("--reranker", required=True, help="the reranker run folder")
    q.add_argument("--test-csv", required=True, help="the competition's test file (its catalogue and sample beside it)")
    q.add_argument("--out", default="submission.csv", help="the submission to write")
    q.add_argument("--no-sample-submission", action="store_true",
                   help="no sample submission beside the test file: write the test file's order, the columns and "
                        "order unchecked")
    q.add_argument("--prior-weight", type=float, default=None,
                   help="the weight of the retriever's ranks in the final order (0: the reranker alone); "
                        "default: the one fitted on the reranker's out-of-fold file")
    f = sub.add_parser("prior", help="the reranker's out-of-fold MAP@k alone, in the retriever's order, and mixed "
                                     "(the weight fitted, its honest CV)", formatter_class=HelpFormatter)
    f.add_argument("--reranker", required=True, help="the reranker run folder")
    a = p.parse_args(argv)
    try:
        if a.cmd == "build":
            r = build(a.retriever, a.data, a.candidates, a.out)
            print(f"{r['rows']} queries; the true item is among the top {a.candidates} candidates of "
                  f"{r['true_item_in_candidates']:.1%}; train the reranker on the retriever's {r['folds']} folds: "
                  f"python -m utils.train --competition {r['description']} --train-csv {Path(a.out) / TRAIN} "
                  f"--folds {r['folds']} --model MODEL --out RUN")
        elif a.cmd == "prior":
            r = prior(a.reranker)
            cv = (f"; honest CV {r['cv']:.4f} (each fold mixed with the other folds' weight: "
                  f"{', '.join(f'{k}: {v:g}' for k, v in r['fold_weights'].items())})" if "cv" in r else
                  "; one fold only: no honest CV of the mix yet")
            print(f"{r['metric']} of {r['rows']} out-of-fold queries: the reranker alone {r['reranker']:.4f}, the "
                  f"retriever's order {r['retriever']:.4f}, mixed {r['mixed_in_sample']:.4f} with weight "
                  f"{r['weight']:g} (the submission's){cv}")
        else:
            sub_ = predict(a.retriever, a.reranker, a.test_csv, a.out, weight=a.prior_weight,
                           sample_submission=not a.no_sample_submission, progress=False)
            print(f"wrote {a.out} ({len(sub_)} rows)")
    except (DataError, ValueError, OSError) as e:
        return cli_error(e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
