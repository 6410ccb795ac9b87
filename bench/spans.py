"""Span competitions without a model (fold 0 of 5, CPU seconds), scored by utils/spans.py's metrics:

    python bench/spans.py tweet --data DIR    # Tweet Sentiment Extraction (word Jaccard): the whole tweet,
                                              # and whole-if-neutral-else-a-word-lexicon
    python bench/spans.py nbme --data DIR     # NBME (character micro F1): each feature's training annotations
                                              # found again in the validation notes
    python bench/spans.py --table             # the saved results

DIR holds the competition's train.csv (NBME: with patient_notes.csv). Folds from utils.data.make_folds, seed
42: Tweet's stratified by sentiment; NBME's grouped by note (pn_num). Each arm also counts
the labels' noise: Tweet labels not found verbatim (or found twice, or cut mid-word), NBME spans whose text is
not their annotation. Results land in bench/results/spans.json, each with the command that made it.
"""

import argparse
import ast
import hashlib
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "spans.json"
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from common import command  # noqa: E402

from utils.data import make_folds  # noqa: E402
from utils.spans import align, char_micro_scores, check_spans, parse_location, word_jaccard  # noqa: E402

# The lexicon rule's settings, fixed before looking at fold 0 (nothing is tuned on the rows scored).
MIN_SEEN = 3  # a word seen fewer times in the training folds' tweets of a sentiment has no rate
MIN_RATE = 0.5  # a word is picked when at least this share of its training occurrences were selected


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _key(word: str) -> str:
    """A word as the lexicon knows it: lower-cased, punctuation at its edges dropped."""
    return re.sub(r"^\W+|\W+$", "", word.lower())


def lexicon(df: pd.DataFrame) -> dict:
    """{(sentiment, word): share of its occurrences in the tweets' text that lie in selected_text}."""
    seen, picked = defaultdict(int), defaultdict(int)
    for text, sel, sentiment in zip(df["text"], df["selected_text"], df["sentiment"]):
        spans, _ = align(text, sel)
        for m in re.finditer(r"\S+", text):
            k = (sentiment, _key(m.group()))
            seen[k] += 1
            picked[k] += any(s < m.end() and m.start() < e for s, e in spans)
    return {k: picked[k] / n for k, n in seen.items() if n >= MIN_SEEN}


def lexicon_answer(text: str, sentiment: str, rates: dict) -> str:
    """The whole tweet when neutral; else from the first to the last word picked by the lexicon (the
    word of best rate when none reaches MIN_RATE; the whole tweet when no word has a rate)."""
    words = list(re.finditer(r"\S+", text))
    rate = [rates.get((sentiment, _key(m.group())), -1.0) for m in words]
    if sentiment == "neutral" or not words or max(rate) < 0:
        return text
    chosen = [i for i, r in enumerate(rate) if r >= MIN_RATE] or [int(np.argmax(rate))]
    return text[words[chosen[0]].start():words[chosen[-1]].end()]


def tweet(data: Path) -> dict:
    t0 = time.perf_counter()
    df = pd.read_csv(data / "train.csv", keep_default_na=False)  # one row's text and label are empty
    found = [align(t, s, f"train.csv, row {i}") for i, (t, s) in enumerate(zip(df["text"], df["selected_text"]))]
    spans = [sp for sp, _ in found]
    mid_word = sum(any((s > 0 and t[s - 1].isalnum() and t[s].isalnum()) or
                       (e < len(t) and t[e - 1].isalnum() and t[e].isalnum()) for s, e in sp)
                   for t, sp in zip(df["text"], spans))
    noise = {"rows": len(df), "not_verbatim": sum(not x for _, x in found),
             "found_more_than_once": sum(s != "" and t.count(s) > 1 for t, s in zip(df["text"], df["selected_text"])),
             "cut_mid_word": int(mid_word), "empty_label": int((df["selected_text"].str.strip() == "").sum())}
    folds = make_folds(df, 5, 42, target_cols=("sentiment",), classes=True)
    va, tr = df[folds == 0], df[folds != 0]
    rates = lexicon(tr)
    arms = {"whole tweet": va["text"].tolist(),
            "whole tweet if neutral, else lexicon words": [lexicon_answer(t, s, rates)
                                                          for t, s in zip(va["text"], va["sentiment"])]}
    out = []
    for name, pred in arms.items():
        pred = pd.Series(pred, index=va.index)
        per = {s: word_jaccard(va["selected_text"][va["sentiment"] == s], pred[va["sentiment"] == s])
               for s in ("neutral", "positive", "negative")}
        out.append({"model": name, "jaccard": word_jaccard(va["selected_text"], pred), "per_sentiment": per})
    return {"metric": "word Jaccard", "fold": 0, "n_train": len(tr), "n_valid": len(va), "train_md5":
            md5(data / "train.csv"), "noise": noise, "arms": out, "lexicon": {"min_seen": MIN_SEEN,
            "min_rate": MIN_RATE}, "seconds": time.perf_counter() - t0, "command": command()}


def _lower(text: str) -> str:
    """Lower case that keeps every offset (a character whose lower case is longer stays as it is)."""
    low = text.lower()
    return low if len(low) == len(text) else "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


def matches(note: str, phrases, whole_words: bool) -> list:
    """Every occurrence (overlapping ones too) of each lower-cased phrase in the note, case ignored; with
    `whole_words`, only those neither starting nor ending inside a word."""
    low, out = _lower(note), []
    for p in phrases:
        at = low.find(p)
        while at >= 0:
            e = at + len(p)
            inside = (at > 0 and low[at - 1].isalnum() and low[at].isalnum()) or (
                e < len(low) and low[e - 1].isalnum() and low[e].isalnum())
            if not (whole_words and inside):
                out.append((at, e))
            at = low.find(p, at + 1)
    return out


def nbme_noise(df: pd.DataFrame) -> dict:
    """Annotated spans whose text (pieces in written order, joined by a space) is not their annotation."""
    spans = differ = pieces = unordered = 0
    for r in df.itertuples():
        for item, note in zip(ast.literal_eval(r.location), ast.literal_eval(r.annotation)):
            written = [tuple(int(x) for x in piece.split()) for piece in item.split(";")]
            spans, pieces = spans + 1, pieces + (len(written) > 1)
            unordered += written != sorted(written)
            differ += " ".join(r.pn_history[s:e] for s, e in written) != note
    return {"spans": spans, "in_pieces": pieces, "pieces_written_out_of_order": unordered,
            "text_not_the_annotation": differ}


def nbme(data: Path) -> dict:
    t0 = time.perf_counter()
    notes = pd.read_csv(data / "patient_notes.csv")
    df = pd.read_csv(data / "train.csv").merge(notes[["pn_num", "pn_history"]], on="pn_num", how="left")
    if df["pn_history"].isna().any():
        raise SystemExit(f"train.csv: {int(df['pn_history'].isna().sum())} rows' pn_num not in patient_notes.csv")
    truth = [check_spans(parse_location(loc, f"train.csv, column location, row {i}"), note,
                         f"train.csv, column location, row {i}")
             for i, (loc, note) in enumerate(zip(df["location"], df["pn_history"]))]
    folds = make_folds(df, 5, 42, group_col="pn_num", stratify=False)  # a note's rows in one fold
    tr, va = np.flatnonzero(folds != 0), np.flatnonzero(folds == 0)
    phrases = defaultdict(set)
    for i in tr:
        phrases[df["feature_num"].iat[i]] |= {a.lower() for a in ast.literal_eval(df["annotation"].iat[i]) if a.strip()}
    setup = time.perf_counter() - t0
    out = []
    for whole_words in (False, True):
        t1 = time.perf_counter()
        pred = [check_spans(matches(df["pn_history"].iat[i], phrases[df["feature_num"].iat[i]], whole_words),
                            df["pn_history"].iat[i]) for i in va]
        scores = char_micro_scores([truth[i] for i in va], pred)
        out.append({"model": "training annotations of the feature, found in the note" +
                    (" as whole words" if whole_words else " (any substring)"), **scores,
                    "seconds": setup + time.perf_counter() - t1})
    return {"metric": "character micro F1", "fold": 0, "n_train_rows": len(tr), "n_valid_rows": len(va),
            "n_valid_notes": int(df["pn_num"].iloc[va].nunique()), "train_md5": md5(data / "train.csv"),
            "noise": nbme_noise(df), "arms": out, "command": command()}


TWEET, NBME = "tweet-sentiment-extraction", "nbme-score-clinical-patient-notes"
# The recipe of both arms of a competition (the kit's and transformers' Trainer): fixed before fold 0 is scored.
RECIPES = {TWEET: {"max_len": 96, "batch_size": 32, "lr": 5e-5, "epochs": 3, "eval_every": 150},
           NBME: {"max_len": 384, "batch_size": 16, "lr": 5e-5, "epochs": 3, "eval_every": 150}}


def said_epochs(n: int) -> str:
    return f"{n} epoch" + "s" * (n != 1)


def minilm() -> str:
    return "sentence-transformers/all-MiniLM-L6-v2"


def kit(slug: str, data: Path, model: str, out: str, epochs: int, save_every: int, **settings) -> dict:
    """Fold 0 of the kit's span model: utils.train with the competition's built-in description
    (`settings`: more TrainConfig fields, e.g. a student's distil_csv)."""
    from utils.config import TrainConfig
    from utils.metrics import METRICS
    from utils.runs import read_history, read_metrics, read_oof
    from utils.train import run_cv

    r = {**RECIPES[slug], "epochs": epochs}
    file = "train.csv"
    cfg = TrainConfig(train_csv=str(data / file), out=out, model=model, competition=slug, only_folds=(0,),
                      epochs=r["epochs"], eval_every=r["eval_every"], progress=False, max_len=r["max_len"],
                      batch_size=r["batch_size"], lr=r["lr"], save_every=save_every, **settings)
    t0 = time.time()
    run_cv(cfg)
    metrics, oof, history = read_metrics(out), read_oof(out), read_history(out, 0)
    y, p = oof.arrays()
    metric = METRICS[metrics["metric"]]
    t1 = time.time()  # inference: fold 0's model on the competition's test file, as the submission reads it
    from utils.predict import submit

    sub = submit([out], data / "test.csv", str(Path(out) / "submission_fold0.csv"), progress=False)
    t2 = time.time()
    valid = submit([out], valid_as_test(slug, data, oof.frame["id"], Path(out) / "valid-as-test"),
                   str(Path(out) / "valid-as-test" / "submission.csv"), sample_submission=False, progress=False)
    res = {"arm": f"the kit ({Path(model).name}, {said_epochs(r['epochs'])})", metric.name: metric.score(y, p),
           "minutes_this_session": (time.time() - t0) / 60, "fold_minutes": history["seconds"] / 60,
           "predict_minutes": (t2 - t1) / 60, "test_rows": len(sub),
           "valid_predict_minutes": (time.time() - t2) / 60, "valid_rows": len(valid),
           "steps": history["steps"], **r, "model": model, "run": out}
    if slug == TWEET:
        df = pd.read_csv(data / file, keep_default_na=False).set_index("textID")
        sentiment = df.loc[oof.frame["id"].astype(str), "sentiment"].to_numpy()
        res["per_sentiment"] = {s: metric.score(y[sentiment == s], p[sentiment == s])
                                for s in ("neutral", "positive", "negative")}
    else:
        res.update({k: v for k, v in char_micro_scores(y, p).items() if k != "f1"})
    return res


def valid_as_test(slug: str, data: Path, ids, folder: Path) -> Path:
    """Fold 0's validation rows as a test file (train.csv's rows of those ids, in test.csv's columns),
    beside the tables it joins: what the kit's prediction is timed on, as Trainer's arm predicts them."""
    from utils.competition import load_competition

    comp = load_competition(slug)
    folder.mkdir(parents=True, exist_ok=True)
    read = lambda f, **kw: pd.read_csv(data / f, dtype=str, keep_default_na=False, **kw)  # noqa: E731
    train, cols = read(comp.train_file), list(read(comp.test_file, nrows=0).columns)
    train[train[comp.id_col].isin(set(map(str, ids)))][cols].to_csv(folder / "test.csv", index=False)
    for f in data.glob("*.csv"):  # the tables a test row joins (NBME's notes and features)
        if f.name not in (comp.train_file, comp.test_file, comp.sample_submission):
            (folder / f.name).unlink(missing_ok=True)
            (folder / f.name).symlink_to(f.resolve())
    return folder / "test.csv"


def fold0_rows(slug: str, data: Path):
    """(competition, its training rows as the kit reads them (joins made), fold 0's mask): the kit's
    folds, shared by both arms."""
    from utils.competition import load_competition
    from utils.tables import competition_folds, read_table

    comp = load_competition(slug)
    df = read_table(comp, data, "train")
    return comp, df, competition_folds(comp, df) == 0


def pretrain_arm(data: Path, model: str, out: str, epochs: int) -> dict:
    """utils.pretrain (masked LM) on the notes of NBME's training folds: fold 0's notes, the ones scored,
    are left out (Kaggle's test notes were in its patient_notes.csv; these are not test notes). The
    backbone it writes is then the kit arm's --model."""
    from utils.files import write_csv
    from utils.pretrain import PretrainConfig, pretrain

    _, df, va = fold0_rows(NBME, data)
    notes = pd.read_csv(data / "patient_notes.csv", keep_default_na=False, dtype={"pn_num": str})
    keep = notes[notes["pn_num"].isin(df.loc[~va, "pn_num"]) & ~notes["pn_num"].isin(df.loc[va, "pn_num"])]
    texts = Path(out).with_name(Path(out).name + "-notes.csv")
    write_csv(texts, keep)
    cfg = PretrainConfig(texts=(str(texts),), model=model, out=out, text_col="pn_history", id_col="pn_num",
                         epochs=epochs, max_len=RECIPES[NBME]["max_len"], overwrite=True, progress=False)
    info = pretrain(cfg)
    return {"arm": f"masked-LM pretraining ({Path(model).name}, {epochs} epochs)", "notes": len(keep),
            "notes_held_out": int(df.loc[va, "pn_num"].nunique()), "minutes": info["seconds"] / 60,
            **{k: info[k] for k in ("loss_before", "loss_after", "steps", "history")}, "out": out}


def trainer_arm(slug: str, data: Path, model: str, epochs: int, out: str, save_every: int) -> dict:
    """What a user writes instead: transformers' AutoModelForQuestionAnswering (Tweet: the sentiment
    as the question, the tweet as the context; the standard start/end preprocessing and n-best
    decoding, answers at most 30 tokens) or AutoModelForTokenClassification (NBME: the feature and the
    note as a pair, a label per note token, characters above 0.5), with Trainer: the same backbone,
    fold 0, epochs, max_len, batch size, learning rate and cosine schedule (6% warmup) as the kit's arm; texts
    cut at max_len (truncation="only_second"), the model after its last step. Trainer saves a checkpoint in
    `out` every `save_every` steps and the same command resumes from the last one (its own
    resume_from_checkpoint); the training minutes of every session are summed in out/minutes.json."""
    import torch
    from transformers import (
        AutoModelForQuestionAnswering,
        AutoModelForTokenClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    from utils.files import write_json
    from utils.metrics import METRICS
    from utils.models import resolve
    from utils.objective import objective_of
    from utils.spans import char_micro_scores, decode_threshold, format_location, token_to_char_probs

    r = {**RECIPES[slug], "epochs": epochs}
    comp, df, va = fold0_rows(slug, data)
    obj = objective_of(comp)
    path = resolve(model)
    tok = AutoTokenizer.from_pretrained(path)
    first, texts = df[comp.text_cols[0]].astype(str).tolist(), df[comp.span_col].astype(str).tolist()
    enc = tok(first, texts, truncation="only_second", max_length=r["max_len"], return_offsets_mapping=True)
    truth = [obj.answer(c) for c in df[comp.target_cols[0]].tolist()]
    rows, qa = [], slug == TWEET
    for i in range(len(df)):
        seq, off = enc.sequence_ids(i), enc["offset_mapping"][i]
        found = obj.spans_of(texts[i], truth[i])
        inside = [seq[j] == 1 and any(s < off[j][1] and off[j][0] < e for s, e in found) for j in range(len(seq))]
        row = {"input_ids": enc["input_ids"][i], "attention_mask": enc["attention_mask"][i]}
        if "token_type_ids" in enc:
            row["token_type_ids"] = enc["token_type_ids"][i]
        if qa:
            on = [j for j, x in enumerate(inside) if x]
            row["start_positions"], row["end_positions"] = (on[0], on[-1]) if on else (0, 0)
        else:
            row["labels"] = [-100 if seq[j] != 1 else int(inside[j]) for j in range(len(seq))]
        rows.append(row)

    class Rows(torch.utils.data.Dataset):
        def __init__(self, idx):
            self.idx = idx

        def __len__(self):
            return len(self.idx)

        def __getitem__(self, k):
            return rows[self.idx[k]]

    def collate(items):
        labels = [x.pop("labels") for x in items] if "labels" in items[0] else None
        batch = DataCollatorWithPadding(tok, pad_to_multiple_of=8)(items)
        if labels is not None:
            width = batch["input_ids"].shape[1]
            batch["labels"] = torch.tensor([x + [-100] * (width - len(x)) for x in labels])
        return batch

    torch.manual_seed(42)
    cls = AutoModelForQuestionAnswering if qa else AutoModelForTokenClassification
    net = cls.from_pretrained(path, **({} if qa else {"num_labels": 2}))
    minutes = Path(out) / "minutes.json"
    before = json.loads(minutes.read_text())["seconds"] if minutes.exists() else 0.0
    t0 = time.time()

    class Clock(TrainerCallback):  # the seconds up to each checkpoint: a killed session's unsaved steps are redone
        def on_save(self, args, state, control, **kwargs):
            write_json(minutes, {"seconds": before + time.time() - t0, "step": state.global_step})

    args = TrainingArguments(
        output_dir=out, per_device_train_batch_size=r["batch_size"],
        per_device_eval_batch_size=64, num_train_epochs=r["epochs"], learning_rate=r["lr"],
        lr_scheduler_type="cosine", warmup_steps=0.06, weight_decay=0.01, optim="adamw_torch", use_cpu=True,
        seed=42, eval_strategy="no", save_strategy="steps", save_steps=save_every, save_total_limit=1,
        logging_strategy="no", report_to="none",
        disable_tqdm=True, dataloader_num_workers=0, remove_unused_columns=False)
    tr, vi = np.flatnonzero(~va), np.flatnonzero(va)
    trainer = Trainer(model=net, args=args, train_dataset=Rows(tr),
                      data_collator=lambda b: collate([dict(x) for x in b]), callbacks=[Clock()])
    resume = any(Path(out).glob("checkpoint-*"))
    trainer.train(resume_from_checkpoint=resume or None)
    train_min = (before + time.time() - t0) / 60
    t1 = time.time()
    predicted = trainer.predict(Rows(vi))
    pred = []
    for k, i in enumerate(vi):
        seq, off, text = enc.sequence_ids(int(i)), enc["offset_mapping"][int(i)], texts[int(i)]
        n = len(seq)
        if qa:
            start, end = predicted.predictions[0][k][:n], predicted.predictions[1][k][:n]
            ctx = [j for j in range(n) if seq[j] == 1]
            best, answer = -np.inf, ""
            for s_ in sorted(ctx, key=lambda j: -start[j])[:20]:
                for e_ in sorted(ctx, key=lambda j: -end[j])[:20]:
                    if s_ <= e_ < s_ + 30 and start[s_] + end[e_] > best:
                        best, answer = start[s_] + end[e_], text[off[s_][0]:off[e_][1]]
            pred.append(answer)
        else:
            logits = predicted.predictions[k][:n]
            p1 = np.exp(logits[:, 1] - np.logaddexp(logits[:, 0], logits[:, 1]))
            chars = token_to_char_probs(off, p1, len(text), np.array([x == 1 for x in seq]))
            pred.append(decode_threshold(chars, 0.5, text))
    y = [truth[int(i)] for i in vi]
    metric = METRICS[comp.metric_name]
    res = {"arm": f"transformers {cls.__name__} + Trainer ({Path(model).name}, {said_epochs(r['epochs'])})",
           metric.name: metric.score(y, pred), "train_minutes": train_min, "resumed": resume, "run": out,
           "predict_minutes": (time.time() - t1) / 60,
           **r, "model": model, "n_cut": int(sum(len(x["input_ids"]) >= r["max_len"] for x in rows))}
    if qa:
        sentiment = df["sentiment"].to_numpy()[vi]
        res["per_sentiment"] = {s: metric.score([a for a, m in zip(y, sentiment == s) if m],
                                                [a for a, m in zip(pred, sentiment == s) if m])
                                for s in ("neutral", "positive", "negative")}
    else:
        res.update({k: v for k, v in char_micro_scores(y, pred).items() if k != "f1"})
        res["example_pred"] = format_location(pred[0])
    return res


def load() -> dict:
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else {}


def table() -> str:
    res = load()
    lines = ["| competition (metric) | baseline, fold 0 of 5 | score | note | command |",
             "| --- | --- | --- | --- | --- |"]
    t = res.get("tweet")
    for a in (t or {}).get("arms", []):
        per = ", ".join(f"{k} {v:.4f}" for k, v in a["per_sentiment"].items())
        lines.append(f"| Tweet Sentiment Extraction (word Jaccard) | {a['model']} | {a['jaccard']:.4f} | {per} | "
                     f"`{t['command']}` |")
    n = res.get("nbme")
    for a in (n or {}).get("arms", []):
        lines.append(f"| NBME (character micro F1) | {a['model']} | {a['f1']:.4f} | precision {a['precision']:.4f}, "
                     f"recall {a['recall']:.4f}, {a['seconds']:.1f} s | `{n['command']}` |")
    for comp, key, metric in (("Tweet Sentiment Extraction (word Jaccard)", "tweet", "jaccard"),
                              ("NBME (character micro F1)", "nbme", "char_f1")):
        for a in res.get(key, {}).get("models", {}).values():
            minutes = a.get("fold_minutes") or a.get("train_minutes", 0) + a.get("predict_minutes", 0)
            extra = ", ".join(f"{k} {v:.4f}" for k, v in a.get("per_sentiment", {}).items()) or \
                (f"precision {a['precision']:.4f}, recall {a['recall']:.4f}" if "precision" in a else "")
            said = f"{minutes:.1f} min" + (f" (predicting the {a['valid_rows']:,} validation rows: "
                                           f"{a['valid_predict_minutes']:.1f})" if "valid_rows" in a else "")
            lines.append(f"| {comp} | {a['arm']} | {a[metric]:.4f} | {extra}; {said} | `{a['command']}` |")
    m = (n or {}).get("pretrain")
    if m:
        lines.append(f"\n{m['arm']} on {m['notes']} notes ({m['notes_held_out']} of fold 0 left out): "
                     f"held-out MLM loss {m['loss_before']:.3f} -> {m['loss_after']:.3f}, {m['steps']} steps, "
                     f"{m['minutes']:.1f} min (`{m['command']}`)")
    if t:
        x = t["noise"]
        lines.append(f"\nTweet labels ({x['rows']} rows): {x['not_verbatim']} not found verbatim in their text, "
                     f"{x['found_more_than_once']} found more than once (the first is taken), {x['cut_mid_word']} "
                     f"cut mid-word, {x['empty_label']} empty.")
    if n:
        x = n["noise"]
        lines.append(f"NBME spans ({x['spans']} annotated): {x['text_not_the_annotation']} whose text is not their "
                     f"annotation, {x['in_pieces']} in pieces ({x['pieces_written_out_of_order']} written out of "
                     "order).")
    return "\n".join(lines)


def record(r: dict, *keys: str) -> None:
    """r, with the command that made it, saved in the results file at res[keys[0]]...[keys[-1]]."""
    from utils.files import write_json

    r["command"] = command()
    res = load()
    place = res
    for k in keys[:-1]:
        place = place.setdefault(k, {})
    place[keys[-1]] = r
    write_json(RESULTS, res)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("arm", nargs="?", choices=("tweet", "nbme", "tweet-kit", "nbme-kit", "tweet-trainer",
                                              "nbme-trainer", "nbme-pretrain"))
    p.add_argument("--data", help="the competition's folder (train.csv; NBME: and patient_notes.csv)")
    p.add_argument("--model", default=minilm(), help="*-kit: the backbone")
    p.add_argument("--epochs", type=int, default=0, help="*-kit, *-trainer: epochs (0: the recipe's); "
                   "nbme-pretrain: masked-LM epochs (0: 10)")
    p.add_argument("--out", help="*-kit, *-trainer: the run folder (again: resumes it)")
    p.add_argument("--save-every", type=int, default=100, help="*-kit, *-trainer: save the fold every N steps")
    p.add_argument("--table", action="store_true", help="print the saved results")
    a = p.parse_args()
    if a.arm == "nbme-pretrain":
        r = pretrain_arm(Path(a.data), a.model, a.out or "runs/nbme-mlm", a.epochs or 10)
        record(r, "nbme", "pretrain")
        print(json.dumps({k: v for k, v in r.items() if k != "history"}, indent=1))
        return
    if a.arm and a.arm.endswith(("-kit", "-trainer")):
        slug = TWEET if a.arm.startswith("tweet") else NBME
        epochs = a.epochs or RECIPES[slug]["epochs"]
        r = kit(slug, Path(a.data), a.model, a.out or f"runs/{a.arm}", epochs, a.save_every) \
            if a.arm.endswith("-kit") else trainer_arm(slug, Path(a.data), a.model, epochs, a.out or f"runs/{a.arm}",
                                                        a.save_every)
        record(r, a.arm.split("-")[0], "models", r["arm"])
        print(json.dumps(r, indent=1))
        return
    if a.table or not a.arm:
        print(table())
        return
    if not a.data or not (Path(a.data) / "train.csv").is_file():
        raise SystemExit(f"--data {a.data}: no train.csv there (the {a.arm} competition's folder)")
    from utils.files import write_json

    res = load()
    kept = {k: v for k, v in res.get(a.arm, {}).items() if k in ("models", "pretrain")}  # the other arms' results
    res[a.arm] = {**(tweet if a.arm == "tweet" else nbme)(Path(a.data)), **kept}
    write_json(RESULTS, res)
    print(table())


if __name__ == "__main__":
    main()
