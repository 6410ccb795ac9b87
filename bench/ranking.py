"""Ranking competitions, fold 0 of 5 on CPU with all-MiniLM-L6-v2: Eedi (retrieve misconceptions
from a 2,587-item catalogue, MAP@25; folds grouped by question) and LLM Science Exam (five options,
MAP@3), each beside what a user would do instead, scored on the same validation rows:

    python bench/ranking.py eedi-zero --data DIR        # the backbone as it is: mean pooling, cosine
    python bench/ranking.py eedi-kit --data DIR         # the kit's retriever (contrastive, hard negatives)
    python bench/ranking.py eedi-st --data DIR          # sentence-transformers + MultipleNegativesRankingLoss
    python bench/ranking.py eedi-rerank --data DIR --retriever RUN   # + a reranker over its top 25
    python bench/ranking.py science-baselines --data DIR    # option length, zero-shot cosine
    python bench/ranking.py science-kit --data DIR      # the kit's multiple-choice scorer
    python bench/ranking.py science-orders --data DIR --run RUN  # its options listed in other orders
    python bench/ranking.py science-mean --runs RUN RUN ...     # several runs averaged (seeds)
    python bench/ranking.py scaling                     # exact search time, 1k to 100k items
    python bench/ranking.py --table                     # the saved results

Eedi's figures are on every validation query and on those whose true misconception no training
row holds ("unseen": what Kaggle's hidden test is full of). Retriever recipe, the same for the kit
and sentence-transformers: max_len 128, batch 32, lr 3e-5, warmup + linear/cosine decay, EPOCHS
epochs; the kit validates at each epoch's end and keeps the best (as every fold of the kit).
Results land in bench/results/ranking.json.
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "ranking.json"
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

EEDI, SCIENCE = "eedi-mining-misconceptions-in-mathematics", "kaggle-llm-science-exam"
RECIPE = {"max_len": 128, "batch_size": 32, "lr": 3e-5}


MINILM = "sentence-transformers/all-MiniLM-L6-v2"
BACKBONE = [MINILM]  # --model: another backbone the kit has offline (utils.models), e.g. all-mpnet-base-v2


def minilm() -> str:
    """The folder of the backbone the arms train (all-MiniLM-L6-v2 unless --model names another)."""
    from utils.models import local

    folder = local(BACKBONE[0])
    if folder is None:
        raise SystemExit(f"{BACKBONE[0]} is not on this machine: python -m utils.models get {BACKBONE[0]}")
    return str(folder)


OUT, SAVE_EVERY = [""], [0]  # --out, --save-every: a long arm's run folder, saved as it trains


def run_folder(prefix: str) -> Path:
    """The arm's run folder: --out (the same command again resumes it where it stopped), else a
    new one under runs/ (git-ignored)."""
    if OUT[0]:
        return Path(OUT[0]).resolve()
    (ROOT / "runs").mkdir(exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}-", dir=ROOT / "runs"))


def fold_minutes(out: Path) -> float:
    """Fold 0's training minutes over every process that trained it (a resumed fold's too)."""
    from utils.runs import read_history

    return read_history(out, 0)["seconds"] / 60


def tagged(result: dict) -> dict:
    """An arm's figures, its backbone named in the arm when it is not all-MiniLM-L6-v2."""
    from utils.models import known

    name = known(BACKBONE[0]).short
    if name == known(MINILM).short:
        return result
    return {**result, "arm": f"[{name}] {result['arm']}", "backbone": name}


def fold0(slug: str, data: str):
    """(description, training frame, fold-0 mask) as the kit makes them."""
    from utils.competition import BUILTIN
    from utils.tables import competition_folds, read_table

    comp = BUILTIN[slug]
    df = read_table(comp, data)
    return comp, df, competition_folds(comp, df, 5, 42) == 0


def eedi_rows(data: str):
    """Eedi's fold 0: (comp, queries, catalogue frame, truth index per row, validation mask, seen mask)."""
    from utils.tables import read_catalogue

    comp, df, va = fold0(EEDI, data)
    items = read_catalogue(comp, data)
    index = {v: i for i, v in enumerate(items["id"])}
    truth = df[comp.target_cols[0]].map(index).to_numpy()
    seen = np.isin(truth, truth[~va])
    queries = [t.replace("\x1f", " ") for t in comp.input_texts(df)]
    return comp, queries, items, truth, va, seen


def figures(truth, scores, seen, k: int = 25) -> dict:
    from utils.metrics import METRICS

    out = {}
    for name, rows in (("all", np.ones(len(truth), bool)), ("unseen", ~seen)):
        out[f"map@{k}_{name}"] = METRICS[f"map@{k}"].score(truth[rows], scores[rows])
        out[f"recall@{k}_{name}"] = METRICS[f"recall@{k}"].score(truth[rows], scores[rows])
    out["recall@100_all"] = METRICS["recall@100"].score(truth, scores)
    out["queries"], out["unseen_queries"] = int(len(truth)), int((~seen).sum())
    return out


def embedder(pooling: str = "mean"):
    """The backbone as it is, through the kit's model (no head: the pooled embedding, normalised)."""
    from utils.fold import ModelSpec
    from utils.model import TextModel, load_tokenizer

    spec = ModelSpec(pooling=pooling, num_outputs=0, task="retrieval")
    return TextModel.from_backbone(minilm(), spec).eval(), load_tokenizer(minilm())


def embed(model, tok, texts, max_len: int = 128) -> np.ndarray:
    from utils.predict import predict_model
    from utils.shapes import CatalogueRows

    return predict_model(model, tok, list(texts), max_len, 64, shape=CatalogueRows()).astype(np.float32)


def eedi_zero(data: str) -> dict:
    from utils.search import similarities

    comp, queries, items, truth, va, seen = eedi_rows(data)
    t0 = time.time()
    model, tok = embedder()
    q = embed(model, tok, [t for t, v in zip(queries, va) if v])
    d = embed(model, tok, items["text"])
    return {"arm": "zero-shot (mean pooling, cosine)", **figures(truth[va], similarities(q, d), seen[va]),
            "minutes": (time.time() - t0) / 60}


def eedi_kit(data: str, epochs: int, pooling: str = "mean", hard_negatives: int = 1, lr: float = RECIPE["lr"],
             fit: str = "") -> dict:
    from utils.config import TrainConfig
    from utils.runs import read_oof
    from utils.train import run_cv

    comp, queries, items, truth, va, seen = eedi_rows(data)
    out = run_folder("eedi")
    cfg = TrainConfig(train_csv=str(Path(data) / "train.csv"), out=str(out), model=minilm(), competition=EEDI,
                      only_folds=(0,), epochs=epochs, eval_every=10_000, progress=False, pooling=pooling,
                      hard_negatives=hard_negatives, fit=fit, save_every=SAVE_EVERY[0], **{**RECIPE, "lr": lr})
    t0 = time.time()
    run_cv(cfg)
    minutes = (time.time() - t0) / 60
    run = read_oof(out)
    oof_truth, scores = run.objective.outputs.oof_arrays(run.frame, comp.target_cols)
    ids = run.frame["id"].astype(str).to_numpy()
    _, df, _ = fold0(EEDI, data)
    seen_by_id = dict(zip(df[comp.id_col].astype(str), seen))
    recipe = f", lr {lr:g}" + (f", fit {fit}" if fit else "") if (lr, fit) != (RECIPE["lr"], "") else ""
    return {"arm": f"the kit's retriever ({pooling} pooling, {hard_negatives} mined negative(s) per query{recipe})",
            **figures(oof_truth, scores, np.array([seen_by_id[i] for i in ids])), "minutes": minutes,
            "epochs": epochs, "run": str(out.relative_to(ROOT)), "fold_minutes_all_sessions": fold_minutes(out)}


def eedi_rerank(data: str, retriever: str, epochs: int, candidates: int = 25, train_options: int = 8,
                max_len: int = 128, batch_size: int = 8, lr: float = RECIPE["lr"], max_steps: int = 0) -> dict:
    """A cross-encoder over a retriever's top `candidates`: its fold 0 trained on the other folds'
    queries with their out-of-fold candidates (every fold of `retriever` finished), each training
    query seeing `train_options` of them a step; scored, like the retrievers, on fold 0's queries
    in the final order (the reranker's over the top N, then the retriever's)."""
    import pandas as pd

    from utils import rerank
    from utils.config import TrainConfig
    from utils.runs import read_config
    from utils.train import run_cv

    retriever = Path(retriever).resolve()
    table = Path(tempfile.mkdtemp(prefix="eedi-rr-", dir=ROOT / "runs"))
    out = Path(tempfile.mkdtemp(prefix="eedi-rerank-", dir=ROOT / "runs"))
    t0 = time.time()
    built = rerank.build(retriever, data, candidates, table)
    cfg = TrainConfig(train_csv=str(table / rerank.TRAIN), out=str(out), model=minilm(),
                      competition=str(table / rerank.DESCRIPTION), only_folds=(0,), epochs=epochs, eval_every=10_000,
                      progress=False, pooling="mean", max_len=max_len, batch_size=batch_size, lr=lr,
                      train_options=train_options, fit="head_tail", max_steps=max_steps)
    run_cv(cfg)
    minutes = (time.time() - t0) / 60
    history = json.loads((out / "fold0" / "history.json").read_text())
    # The offline submission's two stages on the test file (every retriever fold, the reranker's fold 0).
    stages = {}
    rerank.predict(retriever, out, Path(data) / "test.csv", table / "submission.csv", timings=stages, progress=False)
    recipe = read_config(retriever)
    return {"arm": f"the kit's retriever ({recipe['hard_negatives']} mined negative(s), {recipe['epochs']} epochs, "
                   f"lr {recipe['lr']:g}) + the kit's reranker over its top {candidates} ({train_options} a step, "
                   f"max_len {max_len}, lr {lr:g})",
            **rerank_figures(data, retriever, table, out, candidates),
            "true_item_in_candidates": built["true_item_in_candidates"], "minutes": minutes,
            "train_seconds": history["seconds"], "test_rows": len(pd.read_csv(table / "submission.csv")),
            "predict_seconds": stages, "epochs": epochs, "retriever": str(retriever.relative_to(ROOT)),
            "run": str(out.relative_to(ROOT))}


def rerank_figures(data: str, retriever: Path, table: Path, out: Path, candidates: int) -> dict:
    """The final order's figures on the reranker's validation queries (the reranker's
    probabilities over each one's top N, then the retriever's out-of-fold order), the retriever's
    alone beside them, and the reranker's own CV."""
    from utils import rerank
    from utils.metrics import METRICS
    from utils.runs import read_metrics, read_oof

    comp, queries, items, truth, va, seen = eedi_rows(data)
    ranked = read_oof(out)
    y, probs = ranked.objective.outputs.oof_arrays(ranked.frame, ("answer",))
    ids = ranked.frame["id"].astype(str).to_numpy()
    # The retriever's out-of-fold ranks of the same queries (fused 1 / (60 + rank) over its top
    # 100), the reranker's probabilities above them over the top N: the final order.
    base = read_oof(retriever)
    catalogue = items["id"].astype(str).tolist()
    base_truth, scores = base.objective.outputs.oof_arrays(base.frame.set_index("id").loc[ids].reset_index(),
                                                           comp.target_cols, catalogue)
    column = {v: i for i, v in enumerate(catalogue)}
    cands = table_candidates(table / rerank.TRAIN, ids, candidates)
    # The mixed order (utils.rerank.mix): the prior's weight fitted honestly within fold 0, the
    # only fold trained: each half of its questions mixed with the weight the other half chose.
    metric = METRICS[comp.metric_name]
    mixed, weights = rerank.cross_fit(probs, y, question_halves(ids), metric)
    final, final_mixed = scores.copy(), scores.copy()
    for r, row in enumerate(cands):
        cols = [column[c] for c in row]
        final[r, cols] = 1e9 + probs[r]
        final_mixed[r, cols] = 1e9 + mixed[r]
    _, df, _ = fold0(EEDI, data)
    seen_by_id = dict(zip(df[comp.id_col].astype(str), seen))
    seen_mask = np.array([seen_by_id[i] for i in ids])
    return {**figures(base_truth, final, seen_mask), "retriever_alone": figures(base_truth, scores, seen_mask),
            "mixed": {**figures(base_truth, final_mixed, seen_mask), "weights": {str(k): v for k, v in weights.items()},
                      "weight_all": rerank.fit_weight(probs, y, metric)},
            "reranker_cv": read_metrics(out)["cv"]}


def question_halves(ids) -> np.ndarray:
    """Each query id's half (0 or 1) of fold 0's questions, drawn at random with a fixed seed: no
    question in both (Eedi's ids are QuestionId_Answer)."""
    questions = np.array([i.split("_")[0] for i in ids])
    names = np.unique(questions)
    half = dict(zip(names, np.random.default_rng(0).permutation(len(names)) % 2))
    return np.array([half[q] for q in questions])


def eedi_rerank_mix(data: str, retriever: str, reranker: str, candidates: int = 25) -> dict:
    """A trained reranker's figures again (the mixed order's among them), into its saved entry."""
    from utils.runs import read_config

    reranker = Path(reranker).resolve()
    table = Path(read_config(reranker)["train_csv"]).parent
    entry = next(r for r in load().get("eedi", []) if r.get("run") == str(reranker.relative_to(ROOT)))
    return {**entry, **rerank_figures(data, Path(retriever).resolve(), table, reranker, candidates)}


def table_candidates(path, ids, n: int) -> list:
    """Each query's candidate ids as the reranker's table lists them, in `ids`' order."""
    import pandas as pd

    frame = pd.read_csv(path, dtype=str).set_index("id")
    return [frame.loc[i, "candidate_ids"].split()[:n] for i in ids]


def mined_negatives(queries: list, truth: np.ndarray, items: list, n: int, pool: int = 30, seed: int = 42) -> list:
    """The kit's hard negatives for each training query, as a list of `n` item texts: mined as a
    retriever fold mines them (utils.shapes.CatalogueRows.prepare: the untrained model's top `pool`
    items by cosine, mean pooling, its true item never among them), n drawn from them once."""
    from utils.search import similarities

    model, tok = embedder()
    sims = similarities(embed(model, tok, queries), embed(model, tok, items))
    sims[np.arange(len(truth)), truth] = -np.inf
    top = np.argsort(-sims, axis=1, kind="stable")[:, :pool]
    rng = np.random.default_rng(seed)
    return [[items[j] for j in rng.choice(row, n, replace=False)] for row in top]


def eedi_st(data: str, epochs: int, lr: float = RECIPE["lr"], hard_negatives: int = 0) -> dict:
    from st_baseline import mnrl

    from utils.search import similarities

    comp, queries, items, truth, va, seen = eedi_rows(data)
    tr = ~va
    t0 = time.time()
    train_queries, texts = [q for q, t in zip(queries, tr) if t], items["text"].tolist()
    negatives = mined_negatives(train_queries, truth[tr], texts, hard_negatives) if hard_negatives else None
    res = mnrl(minilm(), train_queries, items["text"].to_numpy()[truth[tr]].tolist(),
               texts, [q for q, v in zip(queries, va) if v], truth[va].tolist(), epochs=epochs,
               batch_size=RECIPE["batch_size"], lr=lr, max_len=RECIPE["max_len"], return_embeddings=True,
               negatives=negatives)
    q, d = res.pop("query_embeddings"), res.pop("item_embeddings")
    recipe = (f", lr {lr:g}" if lr != RECIPE["lr"] else "") + \
        (f", {hard_negatives} of the kit's mined negative(s) per query" if hard_negatives else "")
    return {"arm": f"sentence-transformers, MultipleNegativesRankingLoss{recipe}",
            **figures(truth[va], similarities(q, d), seen[va]),
            "minutes": (time.time() - t0) / 60, "epochs": epochs, "st": res}


def science_rows(data: str):
    comp, df, va = fold0(SCIENCE, data)
    truth = df[comp.target_cols[0]].map({o: i for i, o in enumerate(comp.options)}).to_numpy()
    return comp, df, va, truth


def science_baselines(data: str) -> list:
    from utils.metrics import METRICS

    comp, df, va, truth = science_rows(data)
    m = METRICS["map@3"]
    v = df[va]
    lengths = v[list(comp.options)].fillna("").astype(str).apply(lambda c: c.str.len()).to_numpy(float)
    out = [{"arm": "option length (longest first)", "map@3": m.score(truth[va], lengths)}]
    rng = np.random.default_rng(0)
    out.append({"arm": "random order (mean of 20 draws)",
                "map@3": float(np.mean([m.score(truth[va], rng.random(lengths.shape)) for _ in range(20)]))})
    t0 = time.time()
    model, tok = embedder()
    p = embed(model, tok, v["prompt"])
    opts = embed(model, tok, v[list(comp.options)].fillna("").astype(str).to_numpy().ravel()).reshape(len(v), 5, -1)
    cos = np.einsum("nh,nkh->nk", p, opts)
    out.append({"arm": "zero-shot cosine(prompt, option), mean pooling", "map@3": m.score(truth[va], cos),
                "minutes": (time.time() - t0) / 60})
    for r in out:
        r["questions"] = int(va.sum())
    return out


def science_kit(data: str, epochs: int, pooling: str = "mean", max_len: int = 128, batch_size: int = 8,
                lr: float = 3e-5, backbone_dropout: bool = False, options_in_text: bool = False, llrd: float = 1.0,
                seed: int = 42, ema: float = 0.0) -> dict:
    from utils.config import TrainConfig
    from utils.metrics import METRICS
    from utils.runs import read_oof
    from utils.train import run_cv

    out = run_folder("science")
    cfg = TrainConfig(train_csv=str(Path(data) / "train.csv"), out=str(out), model=minilm(), competition=SCIENCE,
                      only_folds=(0,), epochs=epochs, eval_every=10_000, progress=False, pooling=pooling,
                      max_len=max_len, batch_size=batch_size, lr=lr, backbone_dropout=backbone_dropout,
                      options_in_text=options_in_text, llrd=llrd, seed=seed, ema=ema, save_every=SAVE_EVERY[0])
    t0 = time.time()
    run_cv(cfg)
    run = read_oof(out)
    y, p = run.objective.outputs.oof_arrays(run.frame, ("answer",))
    recipe = (f", lr {lr:g}" if lr != 3e-5 else "") + (", backbone dropout" if backbone_dropout else "") + \
        (f", every option in the text, max_len {max_len}" if options_in_text else "") + \
        (f", layer decay {llrd:g}" if llrd != 1 else "") + (f", seed {seed}" if seed != 42 else "") + \
        (f", weight average {ema:g}" if ema else "")
    return {"arm": f"the kit's multiple-choice scorer ({pooling} pooling{recipe})",
            "map@3": METRICS["map@3"].score(y, p),
            "accuracy": float(np.mean(p.argmax(1) == y)), "minutes": (time.time() - t0) / 60, "epochs": epochs,
            "questions": int(len(y)), "max_len": max_len, "batch_size": batch_size, "lr": lr,
            "backbone_dropout": backbone_dropout, "options_in_text": options_in_text, "llrd": llrd, "seed": seed,
            "ema": ema, "run": str(out.relative_to(ROOT)), "fold_minutes_all_sessions": fold_minutes(out)}


def science_orders(data: str, run: str, orders: int = 5) -> dict:
    """Test-time reordering, measured on a finished fold 0 of a run trained with every option in
    the text: its validation questions scored with the listing rotated by 0..orders-1 places, MAP@3
    of each order alone and of their mean probabilities."""
    from utils.fold import read_fold
    from utils.metrics import METRICS
    from utils.model import TextModel
    from utils.predict import predict_model
    from utils.runs import fold_dirs, read_oof
    from utils.shapes import OptionRows, shape_of

    folder = fold_dirs(run)[0]
    record = read_fold(folder)
    if not record.train.get("options_in_text"):
        raise SystemExit(f"{run} was trained without --options-in-text: the order of its options cannot matter")
    comp, df, va, truth = science_rows(data)
    oof = read_oof(run).frame
    rows = shape_of(comp).inputs(comp, df[va])
    model, tok = TextModel.load(folder, "cpu")
    t0, each = time.time(), []
    for shift in range(orders):
        shape = OptionRows(options_in_text=True, listing_shift=shift)
        each.append(predict_model(model, tok, rows, record.max_len, 64, shape=shape))
    m = METRICS["map@3"]
    stored = oof.set_index("id").loc[df[va]["id"], [f"prob_{x}" for x in comp.options]].to_numpy()
    return {"arm": f"test-time reordering of the listed options ({orders} rotations)", "run": run,
            "questions": int(va.sum()), "orders": orders,
            "map@3_each": [m.score(truth[va], p) for p in each],
            "map@3_stored": m.score(truth[va], stored),
            "map@3": m.score(truth[va], np.mean(each, axis=0)),  # the arm's figure: the orders together
            "minutes": (time.time() - t0) / 60}


def science_mean(runs: list) -> dict:
    """The equal-weight average of science-kit runs' probabilities on fold 0 (the kit's
    `python -m utils.ensemble --equal`): nothing is fitted on the validation questions, so the
    average is as honest as each run; its members' figures beside it."""
    from utils.ensemble import blend_report
    from utils.runs import read_config, read_metrics

    r = blend_report(runs, equal=True)
    epochs = {read_config(run)["epochs"] for run in runs}
    minutes = sum(sum((read_metrics(run).get("seconds_per_fold") or {}).values()) for run in runs) / 60
    return {"arm": f"equal-weight average of {len(runs)} multiple-choice runs ({', '.join(r['runs'])})",
            "map@3": r["score_equal_average"], "members": r["scores"], "questions": r["n_rows"],
            "epochs": epochs.pop() if len(epochs) == 1 else 0, "runs": [str(Path(run)) for run in runs],
            "minutes": minutes}


def scaling(data: str = "", dim: int = 384, queries: int = 1000, k: int = 25) -> dict:
    """Exact top-k search time of `queries` normalised queries against catalogues of 1k-100k
    random normalised items (what the search costs is its size, not its content), and FAISS's
    exact inner-product index beside it when faiss is installed; with `data` (Eedi's folder), what
    embedding the real catalogue costs, the other part of retrieval time that grows with it."""
    from utils.search import search

    embed_row = {}
    if data:
        from utils.competition import BUILTIN
        from utils.tables import read_catalogue

        texts = read_catalogue(BUILTIN[EEDI], data)["text"].tolist()
        model, tok = embedder()
        t0 = time.perf_counter()
        embed(model, tok, texts)
        embed_row = {"items": len(texts), "embed_seconds": time.perf_counter() - t0}
    rng = np.random.default_rng(0)
    q = rng.normal(size=(queries, dim)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    out = []
    for n in (1_000, 2_587, 10_000, 100_000):
        d = rng.normal(size=(n, dim)).astype(np.float32)
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        search(q[:10], d, k)  # warm
        t0 = time.perf_counter()
        _, idx = search(q, d, k)
        row = {"items": n, "queries": queries, "exact_seconds": time.perf_counter() - t0}
        try:
            import faiss

            index = faiss.IndexFlatIP(dim)
            index.add(d)
            t0 = time.perf_counter()
            _, fidx = index.search(q, k)
            row["faiss_flat_seconds"] = time.perf_counter() - t0
            row["faiss_same_top1"] = float(np.mean(fidx[:, 0] == idx[:, 0]))
        except ImportError:
            pass
        out.append(row)
    return {"search": out, "embed": embed_row}


def load() -> dict:
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else {}


def save(key: str, value, by: str = "arm") -> None:
    """value: one arm's figures (replacing the same arm's at the same epochs, where it stood), or, with by="",
    the whole entry."""
    from utils.files import write_json

    res = load()
    if by:
        from common import command, replace_or_append

        value = {**tagged(value), "command": value.get("command") or command()}
        replace_or_append(res.setdefault(key, []), value, (by, "epochs"))
    else:
        res[key] = value
    write_json(RESULTS, res)


def table() -> str:
    res = load()
    lines = ["Eedi, fold 0 of 5 (grouped by question), all-MiniLM-L6-v2 on 2 CPU cores:", "",
             "| retriever | epochs | MAP@25 | recall@25 | MAP@25 unseen | recall@25 unseen | recall@100 | minutes |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in res.get("eedi", []):
        rows = [(r["arm"], r)]
        if "mixed" in r:
            w = ", ".join(f"{v:g}" for v in r["mixed"]["weights"].values())
            rows.append((f"the same, mixed with the retriever's ranks (the prior's weight {w}, each half of fold 0's "
                         "questions with the other half's)", r["mixed"]))
        for arm, f in rows:
            lines.append(f"| {arm} | {r.get('epochs', 0)} | {f['map@25_all']:.4f} | {f['recall@25_all']:.4f} | "
                         f"{f['map@25_unseen']:.4f} | {f['recall@25_unseen']:.4f} | {f['recall@100_all']:.4f} | "
                         f"{r['minutes']:.1f} |")
    lines += ["", "LLM Science Exam, fold 0 of 5:", "", "| scorer | epochs | MAP@3 | minutes |",
              "| --- | --- | --- | --- |"]
    for r in res.get("science", []):
        mins = f"{r['minutes']:.1f}" if "minutes" in r else ""
        arm = r["arm"]
        if "map@3_each" in r:  # science-orders: the mean of the orders' probabilities, each order beside it
            arm += f" of {r['run']}: each order alone {', '.join(f'{x:.4f}' for x in r['map@3_each'])}"
        if "members" in r:  # science-mean: each member alone beside the average
            arm += ": each alone " + ", ".join(f"{x:.4f}" for x in r["members"].values())
        lines.append(f"| {arm} | {r.get('epochs', 0)} | {r['map@3']:.4f} | {mins} |")
    if res.get("scaling"):
        lines += ["", "Exact search, 1,000 queries, top 25, 384 dimensions:", "",
                  "| items | exact (s) | FAISS IndexFlatIP (s) |", "| --- | --- | --- |"]
        for r in res["scaling"]["search"]:
            f = f"{r['faiss_flat_seconds']:.3f}" if "faiss_flat_seconds" in r else "not installed"
            lines.append(f"| {r['items']:,} | {r['exact_seconds']:.3f} | {f} |")
        e = res["scaling"].get("embed")
        if e:
            lines += ["", f"Embedding the real catalogue ({e['items']:,} items, all-MiniLM-L6-v2, 2 CPU cores): "
                      f"{e['embed_seconds']:.1f} s ({1000 * e['embed_seconds'] / e['items']:.1f} s per 1,000 items)"]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("arm", nargs="?", choices=("eedi-zero", "eedi-kit", "eedi-st", "eedi-rerank", "eedi-rerank-mix",
                                              "science-baselines", "science-kit", "science-orders", "science-mean",
                                              "scaling"))
    p.add_argument("--data", help="the competition's folder")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--pooling", default="mean")
    p.add_argument("--hard-negatives", type=int, default=None,
                   help="eedi-kit: mined negatives per query (default 1); eedi-st: the kit's mined negatives as "
                        "(query, positive, negative...) tuples (default 0: pairs)")
    p.add_argument("--lr", type=float, default=RECIPE["lr"],
                   help="eedi-kit, eedi-st, science-kit: the encoder's learning rate")
    p.add_argument("--fit", default="", help="eedi-kit: how a long query is cut (head_tail keeps its end: the answers)")
    p.add_argument("--retriever", help="eedi-rerank: a retriever run folder, every fold finished")
    p.add_argument("--reranker", help="eedi-rerank-mix: a reranker run of eedi-rerank, its figures again")
    p.add_argument("--run", help="science-orders: a science-kit run trained with --options-in-text")
    p.add_argument("--runs", nargs="+", help="science-mean: science-kit runs, fold 0 finished in each")
    p.add_argument("--candidates", type=int, default=25, help="eedi-rerank: the top N reranked")
    p.add_argument("--train-options", type=int, default=8, help="eedi-rerank: candidates a training query sees a step")
    p.add_argument("--max-len", type=int, default=128, help="eedi-rerank, science-kit: a pair's tokens")
    p.add_argument("--options-in-text", action="store_true",
                   help="science-kit: each (prompt, option) pair's prompt lists every option (the kit's setting)")
    p.add_argument("--max-steps", type=int, default=0, help="eedi-rerank: stop after this many steps (a smoke run)")
    p.add_argument("--backbone-dropout", action="store_true", help="science-kit: the backbone's dropout on")
    p.add_argument("--llrd", type=float, default=1.0, help="science-kit: layer-wise decay of the encoder's lr")
    p.add_argument("--seed", type=int, default=42, help="science-kit: the training seed (the folds stay)")
    p.add_argument("--ema", type=float, default=0.0, help="science-kit: a moving average of the weights, this decay")
    p.add_argument("--out", default="", help="science-kit, eedi-kit: the run folder (again: resumes it)")
    p.add_argument("--save-every", type=int, default=0, help="science-kit, eedi-kit: save the fold every N steps")
    p.add_argument("--model", default=MINILM, help="the backbone (one utils.models knows): all-mpnet-base-v2")
    p.add_argument("--table", action="store_true")
    a = p.parse_args()
    BACKBONE[0], OUT[0], SAVE_EVERY[0] = a.model, a.out, a.save_every
    if a.table or not a.arm:
        print(table())
        return
    if a.arm == "eedi-zero":
        save("eedi", {**eedi_zero(a.data), "epochs": 0})
    elif a.arm == "eedi-kit":
        save("eedi", eedi_kit(a.data, a.epochs, a.pooling, 1 if a.hard_negatives is None else a.hard_negatives,
                              a.lr, a.fit))
    elif a.arm == "eedi-rerank":
        save("eedi", eedi_rerank(a.data, a.retriever, a.epochs, a.candidates, a.train_options, a.max_len, lr=a.lr,
                                    max_steps=a.max_steps))
    elif a.arm == "eedi-rerank-mix":
        save("eedi", eedi_rerank_mix(a.data, a.retriever, a.reranker, a.candidates))
    elif a.arm == "eedi-st":
        save("eedi", eedi_st(a.data, a.epochs, a.lr, a.hard_negatives or 0))
    elif a.arm == "science-baselines":
        for r in science_baselines(a.data):
            save("science", r)
    elif a.arm == "science-kit":
        save("science", science_kit(a.data, a.epochs, a.pooling, a.max_len, lr=a.lr,
                                    backbone_dropout=a.backbone_dropout, options_in_text=a.options_in_text,
                                    llrd=a.llrd, seed=a.seed, ema=a.ema))
    elif a.arm == "science-orders":
        save("science", science_orders(a.data, a.run))
    elif a.arm == "science-mean":
        save("science", science_mean(a.runs))
    else:
        save("scaling", scaling(a.data or ""), by="")
    print(table())


if __name__ == "__main__":
    main()
