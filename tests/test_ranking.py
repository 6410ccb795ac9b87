"""Rankings: MAP@k and recall@k as Kaggle scores them, the descriptions of a catalogue, options and
a reshape, one line on bad input, and the batch shapes (options, queries against a catalogue)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import cfg_for, tiny_data

from utils.competition import BUILTIN, Competition, CompetitionError, load_competition
from utils.data import DataError
from utils.metrics import METRICS, get_metric, map_at_k, recall_at_k, register_code
from utils.search import search, similarities
from utils.tables import read_catalogue, read_table

EEDI, SCIENCE = "eedi-mining-misconceptions-in-mathematics", "kaggle-llm-science-exam"


def one_line(error, *parts) -> None:
    """An exception's message: one line holding every part."""
    text = str(error)
    assert "\n" not in text and all(p in text for p in parts), text


def apk(actual, predicted, k):
    """Kaggle's average precision at k (the ml_metrics function its MAP@k competitions cite)."""
    predicted = predicted[:k]
    score, hits = 0.0, 0.0
    for i, p in enumerate(predicted):
        if p in actual and p not in predicted[:i]:
            hits += 1.0
            score += hits / (i + 1.0)
    return score / min(len(actual), k) if actual else 0.0


@pytest.mark.parametrize("k", [1, 3, 25])
def test_map_at_k_is_kaggles_on_random_rankings_with_one_or_several_true_items(k):
    rng = np.random.default_rng(k)
    scores = rng.normal(size=(200, 40))
    one = rng.integers(0, 40, 200)
    assert map_at_k(one, scores, k) == pytest.approx(
        np.mean([apk([t], list(np.argsort(-s, kind="stable")), k) for t, s in zip(one, scores)]))
    several = rng.random((200, 40)) < 0.08
    several[:, 0] |= ~several.any(1)  # every row has a true item
    assert map_at_k(several, scores, k) == pytest.approx(
        np.mean([apk(list(np.flatnonzero(t)), list(np.argsort(-s, kind="stable")), k)
                 for t, s in zip(several, scores)]))
    hit = [len(set(np.flatnonzero(t)) & set(np.argsort(-s, kind="stable")[:k])) / t.sum()
           for t, s in zip(several, scores)]
    assert recall_at_k(several, scores, k) == pytest.approx(np.mean(hit))


def test_ranking_metrics_exist_for_every_k_and_are_greater_is_better():
    assert "map@7" in METRICS and "recall@250" in METRICS and "map@0" not in METRICS
    m = get_metric("map@3")
    assert m.greater_is_better and m.needs == "probabilities" and m.top == 3 and m.title == "MAP@3"
    assert m.score([0, 1], np.array([[1.0, 0, 0], [0.5, 0.2, 0.1]])) == pytest.approx((1 + 1 / 2) / 2)
    with pytest.raises(ValueError, match="unknown metric 'map@x'"):
        get_metric("map@x")
    with pytest.raises(ValueError, match="built-in metric"):
        register_code("", "map@5")


def test_a_multiclass_competition_answers_its_top_k_classes_scored_by_map_at_k():
    comp = Competition(slug="charting", task="multiclass", text_cols=("text",), target_cols=("Category",),
                       submission="ranking", answer_k=3)
    assert comp.metric_name == "map@3" and comp.ranking and comp.answer_column == "Category"
    from utils.objective import objective_of

    cols = objective_of(comp).outputs.submission_columns(comp, np.array([[0.1, 0.5, 0.3, 0.1]]), ["a", "b", "c", "d"],
                                                         None)
    assert cols == {"Category": ["b c a"]}


@pytest.mark.parametrize("fields, field, words", [
    ({"task": "retrieval", "answer_k": 25}, "catalogue", "[file, id column, text column]"),
    ({"task": "retrieval", "catalogue": ["m.csv", "id", "name"]}, "answer_k", "answer_k >= 1"),
    ({"task": "multiple_choice", "answer_k": 3, "options": ["A"]}, "options", "two option columns"),
    ({"task": "multiple_choice", "answer_k": 6, "options": ["A", "B", "C"]}, "answer_k", "answer_k <= 3"),
    ({"task": "regression", "options": ["A", "B"]}, "options", "for task multiple_choice"),
    ({"task": "regression", "answer_k": 3}, "answer_k", "for rankings"),
    ({"task": "regression", "reshape": "pivot"}, "reshape", "not one of distractors"),
])
def test_a_ranking_description_that_cannot_work_is_one_line_naming_the_field(fields, field, words):
    with pytest.raises(CompetitionError) as e:
        Competition.from_dict({"slug": "x", "text_cols": ["q"], "target_cols": ["y"], **fields}, "c.json")
    assert f"field {field!r}" in str(e.value) and words in str(e.value) and "\n" not in str(e.value)


RESHAPE_PY = '''
import pandas as pd

def reshape(df, split):
    """One row per (question, option) column pair."""
    rows = [pd.DataFrame({"pid": df["q"].astype(str) + "_" + x, "text": df["q_text"] + " " + df[x]}) for x in "ab"]
    out = pd.concat(rows)
    if split == "train":
        out["label"] = pd.concat([df["label_a"], df["label_b"]]).to_numpy()
    return out
'''


def test_a_reshape_of_ones_own_travels_in_the_description_as_its_metric_does(tmp_path):
    (tmp_path / "my_reshape.py").write_text(RESHAPE_PY)
    pd.DataFrame({"q": [1, 2, 3, 4], "q_text": "the cat", "a": ["sat", "ran", "sat", "ran"], "b": "home",
                  "label_a": [0, 1, 0, 1], "label_b": [1, 0, 1, 0]}).to_csv(tmp_path / "train.csv", index=False)
    desc = {"slug": "pairs", "id_col": "pid", "text_cols": ["text"], "target_cols": ["label"], "task": "binary",
            "reshape": "two_rows", "reshape_file": "my_reshape.py"}
    (tmp_path / "c.json").write_text(json.dumps(desc))
    comp = load_competition(str(tmp_path / "c.json"))
    assert comp.reshape_code == RESHAPE_PY
    df = read_table(comp, tmp_path)
    assert df["pid"].tolist() == ["1_a", "2_a", "3_a", "4_a", "1_b", "2_b", "3_b", "4_b"]
    # A Kaggle kernel gets the description as JSON: the reshape comes with it, the file left behind.
    (tmp_path / "my_reshape.py").unlink()
    again = load_competition(comp.as_parameter())
    assert again.reshape_code == RESHAPE_PY and len(read_table(again, tmp_path)) == 8


def test_a_failing_reshape_of_ones_own_is_one_line_naming_the_file(tmp_path):
    (tmp_path / "r.py").write_text("def reshape(df, split):\n    return df['nope']\n")
    pd.DataFrame({"id": [1], "t": ["x"], "y": [1.0]}).to_csv(tmp_path / "train.csv", index=False)
    (tmp_path / "c.json").write_text(json.dumps({"slug": "r", "text_cols": ["t"], "target_cols": ["y"],
                                                 "reshape": "mine", "reshape_file": "r.py"}))
    with pytest.raises(DataError) as e:
        read_table(load_competition(str(tmp_path / "c.json")), tmp_path)
    one_line(e.value, "train.csv", "reshape 'mine' fails", "KeyError")


def test_eedi_is_one_row_per_tagged_distractor_and_its_test_every_distractor(tmp_path):
    data = tiny_data(EEDI, tmp_path / "e", 6)
    comp = BUILTIN[EEDI]
    train, test = read_table(comp, data), read_table(comp, data, "test")
    assert train["QuestionId_Answer"].tolist() == [f"{q}_B" for q in range(6)]
    assert train["MisconceptionId"].tolist() == [str(q % 30) for q in range(6)]
    assert test["QuestionId_Answer"].tolist() == ["1869_B", "1869_C", "1869_D"]  # never the correct answer (A)
    text = comp.input_texts(train)[0]
    assert "we like to play in the sun" in text and "Wrong answer: trees grow big" in text
    assert "Correct answer: a dog ran home" in text
    assert read_catalogue(comp, data)["id"].tolist() == [str(i) for i in range(30)]


def test_bad_ranking_input_is_one_line_naming_file_column_and_row(tmp_path):
    comp = BUILTIN[EEDI]
    data = tiny_data(EEDI, tmp_path / "e", 6)
    train = pd.read_csv(data / "train.csv")
    train.loc[2, "MisconceptionBId"] = 999  # not in the catalogue
    train.to_csv(data / "train.csv", index=False)
    with pytest.raises(DataError) as e:
        read_table(comp, data)
    one_line(e.value, "train.csv", "'MisconceptionId' holds '999'", "catalogue", "2_B")

    items = pd.read_csv(data / "misconception_mapping.csv")
    items.head(20).to_csv(data / "misconception_mapping.csv", index=False)  # fewer items than the 25 answers
    with pytest.raises(DataError) as e:
        read_catalogue(comp, data)
    one_line(e.value, "misconception_mapping.csv", "20 items, fewer than the answer_k 25")
    pd.concat([items, items.head(1)]).to_csv(data / "misconception_mapping.csv", index=False)
    with pytest.raises(DataError) as e:
        read_catalogue(comp, data)
    one_line(e.value, "misconception_mapping.csv", "id '0' is on two rows")

    comp = BUILTIN[SCIENCE]
    data = tiny_data(SCIENCE, tmp_path / "s", 6)
    train = pd.read_csv(data / "train.csv")
    train.loc[3, "answer"] = "F"
    train.to_csv(data / "train.csv", index=False)
    with pytest.raises(DataError) as e:
        read_table(comp, data)
    one_line(e.value, "train.csv", "'answer' holds 'F'", "options A, B, C, D, E", "3")
    train.loc[3, "answer"] = None  # a question with no true answer
    train.to_csv(data / "train.csv", index=False)
    with pytest.raises(DataError) as e:
        read_table(comp, data)
    one_line(e.value, "train.csv", "'answer' has no label", "3")
    pd.read_csv(data / "test.csv").drop(columns="E").to_csv(data / "test.csv", index=False)
    with pytest.raises(DataError) as e:
        read_table(comp, data, "test")
    one_line(e.value, "test.csv is missing column 'E'")


def test_exact_search_is_the_top_of_the_similarities_in_blocks():
    rng = np.random.default_rng(0)
    q, d = rng.normal(size=(50, 8)), rng.normal(size=(300, 8))
    q, d = q / np.linalg.norm(q, axis=1, keepdims=True), d / np.linalg.norm(d, axis=1, keepdims=True)
    sims = similarities(q, d)
    assert np.allclose(sims, q @ d.T, atol=1e-5)
    import utils.search as s

    old, s.CHUNK = s.CHUNK, 7  # blocks of 7 queries: the same answer
    try:
        scores, idx = search(q, d, 10)
    finally:
        s.CHUNK = old
    assert (idx == np.argsort(-sims, axis=1, kind="stable")[:, :10]).all()
    assert np.allclose(scores, np.take_along_axis(sims, idx, 1))
    assert search(q, d[:4], 10)[1].shape == (50, 4)  # k past the catalogue: all of it


def test_option_batches_score_each_option_and_compare_a_rows_options(tiny_bert):
    from utils.fold import ModelSpec
    from utils.model import TextModel, load_tokenizer
    from utils.shapes import OptionRows

    comp = BUILTIN[SCIENCE]
    df = pd.DataFrame({"id": [1, 2], "prompt": ["the cat", "a dog"], **{x: [f"sat {x}", "ran"] for x in "ABCDE"},
                       "answer": ["B", "E"]})
    shape, tok = OptionRows(), load_tokenizer(tiny_bert)
    inputs = shape.inputs(comp, df)
    assert inputs[0] == tuple(("the cat", f"sat {x}") for x in "ABCDE")
    ds = shape.dataset(inputs, tok, 16, targets=np.array([1, 4]))
    assert ds.n_truncated == 0 and shape.dataset(inputs, tok, 5).n_truncated == 2  # rows cut, not their 10 pairs
    batch = shape.collator(tok, torch.long)([ds[0], ds[1]])
    assert batch["input_ids"].shape[0] == 10 and batch["target"].tolist() == [1, 4]
    model = TextModel.from_backbone(tiny_bert, ModelSpec(pooling="mean", num_outputs=1, task="multiple_choice"))
    out = shape.forward(model.eval(), batch)
    assert out.shape == (2, 5)
    alone = model(batch["input_ids"][5:10], batch["attention_mask"][5:10])[:, 0]  # row 2's options alone
    assert torch.allclose(out[1], alone, atol=1e-5)


def test_a_training_row_can_see_a_sample_of_its_options_with_the_true_one_always_among_them(tiny_bert):
    """train_options: each training row keeps that many of its options, the true one and others
    drawn afresh each batch, its target their index of the true one; validation scores all."""
    from utils.config import TrainConfig
    from utils.model import load_tokenizer
    from utils.shapes import OptionRows, shape_of

    comp = BUILTIN[SCIENCE]
    base = dict(train_csv="t.csv", out="o", model="m")
    assert shape_of(comp, TrainConfig(**base, train_options=3)) == OptionRows(3)
    tok = load_tokenizer(tiny_bert)
    options = "the cat sat on a mat while dog".split()  # 8 options, one word each: a sequence names its option
    inputs = [tuple((f"row {i}", o) for o in options) for i in range(4)]
    targets = np.array([0, 5, 7, -1])  # the last row has no true option
    ds = OptionRows(3).dataset(inputs, tok, 16, targets=targets)
    word = {tok.convert_tokens_to_ids(o): o for o in options}
    collate, kept_sets = OptionRows(3).collator(tok, torch.long, seed=0), set()
    for _ in range(20):
        batch = collate([ds[i] for i in range(3)])
        assert batch["input_ids"].shape[0] == 9
        for r in range(3):
            kept = [word[next(t for t in seq.tolist() if t in word)] for seq in batch["input_ids"][3 * r:3 * r + 3]]
            assert len(set(kept)) == 3 and kept == sorted(kept, key=options.index)  # distinct, in their order
            assert kept[batch["target"][r]] == options[targets[r]]  # the target names the true option
            kept_sets.add((r, tuple(kept)))
    assert len(kept_sets) > 6  # drawn afresh: not the same options each time
    assert collate([ds[3]])["input_ids"].shape[0] == 8  # no true option: never trained on, left whole
    assert OptionRows(3).eval_collator(tok, torch.long)([ds[0], ds[1]])["input_ids"].shape[0] == 16  # all scored
    with pytest.raises(ValueError, match="train_options must be 0"):
        TrainConfig(**base, train_options=1)


def test_a_query_is_never_trained_against_its_own_true_item_as_a_negative(tiny_bert):
    from utils.batching import TextDataset
    from utils.fold import ModelSpec
    from utils.model import TextModel, load_tokenizer
    from utils.shapes import CatalogueRows

    tok = load_tokenizer(tiny_bert)
    items = TextDataset([f"the cat {w}" for w in ["sat", "ran", "home", "sun", "mat", "dog"]], tok, 16)
    queries = TextDataset(["a dog ran", "the sun", "a mat", "the cat sat"], tok, 16, targets=np.array([1, 3, 1, 0]))

    class Data:
        train_ds, items_ds, tokenizer, negatives = queries, items, tok, None

    data = Data()
    shape = CatalogueRows(temperature=0.1, hard_negatives=2, mined=3)
    model = TextModel.from_backbone(tiny_bert, ModelSpec(pooling="mean", num_outputs=0, task="retrieval"))

    class Cfg:
        eval_batch_size = 2

    shape.prepare(Cfg(), data, model, "cpu")
    assert data.negatives.shape == (4, 3)
    assert not (data.negatives == queries.targets[:, None]).any()  # mined: never the positive
    batch = shape.collator(tok, torch.long, data, seed=0)([queries[i] for i in range(4)])
    cols, target = batch["item_index"], batch["target"]
    assert cols[:4].tolist() == [1, 3, 1, 0] and len(cols) == 4 + 4 * 2
    logits = shape.forward(model, batch)
    assert logits.shape == (4, 12)
    for r in range(4):  # every column of the query's true item but its own is masked out
        true = cols[target[r]]
        assert torch.isfinite(logits[r, target[r]])
        assert all(torch.isinf(logits[r, c]) for c in range(12) if cols[c] == true and c != target[r])
    assert torch.isinf(logits[0, 2]) and torch.isinf(logits[2, 0])  # rows 0 and 2 share item 1
    loss = torch.nn.functional.cross_entropy(logits, target)
    assert torch.isfinite(loss)


def _train(tmp_path, tiny_bert, slug, **kw):
    from utils.train import run_cv

    data = tiny_data(slug, tmp_path / "d", 24)
    comp = load_competition(slug)
    cfg = cfg_for(data / comp.train_file, tmp_path / "run", tiny_bert, competition=slug, max_steps=3, max_len=32,
                  pooling="mean", **kw)
    return data, comp, cfg, run_cv(cfg)


@pytest.mark.versions
def test_a_retriever_trains_through_the_loop_reports_unseen_items_and_resumes(tmp_path, tiny_bert, capsys):
    from utils.runs import read_oof
    from utils.train import run_cv

    data, comp, cfg, metrics = _train(tmp_path, tiny_bert, EEDI)
    out = capsys.readouterr().out
    assert "valid map@25" in out and "unseen_share" in out
    run = read_oof(tmp_path / "run")
    y, scores = run.objective.outputs.oof_arrays(run.frame, comp.target_cols)
    # The CV is the metric of oof.csv as written: each query ranked against the whole catalogue.
    assert metrics["cv"] == pytest.approx(get_metric("map@25").score(y, scores))
    assert all(len(c.split()) == 30 for c in run.frame["candidates"])  # 30 items: all of them, ranked
    history = json.loads((tmp_path / "run" / "fold0" / "history.json").read_text())
    # Each tiny question is tagged with an item of its own: every validation query's item is unseen.
    assert history["figures"]["unseen_share"] == 1.0 and "map@25_unseen" in history["figures"]
    assert "map@25_seen" not in history["figures"]
    again = run_cv(cfg)  # the same command: every fold is done, nothing retrains
    assert again["cv"] == metrics["cv"] and "step" not in capsys.readouterr().out


@pytest.mark.versions
def test_a_multiple_choice_scorer_trains_and_its_oof_lists_every_option_best_first(tmp_path, tiny_bert):
    from utils.runs import read_oof

    data, comp, cfg, metrics = _train(tmp_path, tiny_bert, SCIENCE)
    run = read_oof(tmp_path / "run")
    probs = run.frame[[f"prob_{x}" for x in "ABCDE"]].to_numpy()
    assert np.allclose(probs.sum(1), 1)
    best = ["".join(np.array(list("ABCDE"))[np.argsort(-p, kind="stable")]) for p in probs]
    assert [p.replace(" ", "") for p in run.frame["pred"]] == best
    y, p = run.objective.outputs.oof_arrays(run.frame, comp.target_cols)
    assert metrics["cv"] == pytest.approx(get_metric("map@3").score(y, p))


@pytest.mark.versions
def test_multiple_choice_runs_blend_honestly(tmp_path, tiny_bert):
    from utils import ensemble, predict
    from utils.train import run_cv

    data, comp, cfg, _ = _train(tmp_path, tiny_bert, SCIENCE)
    run_cv(cfg_for(data / comp.train_file, tmp_path / "b", tiny_bert, competition=SCIENCE, max_steps=3, max_len=32))
    runs = [tmp_path / "run", tmp_path / "b"]
    report = ensemble.blend_report(runs)
    assert report["metric"] == "map@3" and len(report["weights"]) == 2 and set(report["weights_per_fold"]) == {0, 1}
    ensemble.save_blend(tmp_path / "blend.json", report)
    out = tmp_path / "s.csv"
    assert predict.main(["--test-csv", str(data / "test.csv"), "--runs", *map(str, runs), "--blend",
                         str(tmp_path / "blend.json"), "--out", str(out)]) == 0
    from utils.shapes import shape_of

    test = read_table(comp, data, "test")
    a, b = (predict.predict_run(r, shape_of(comp).inputs(comp, test), progress=False) for r in runs)
    w = report["weights"]
    expect = [" ".join(np.array(list("ABCDE"))[np.argsort(-p, kind="stable")[:3]]) for p in w[0] * a + w[1] * b]
    assert pd.read_csv(out, dtype=str)["prediction"].tolist() == expect



def test_retrievers_blend_their_fused_ranks_with_weights_fitted_on_the_other_folds_map(tmp_path, tiny_bert):
    """Two retrievers: each query's out-of-fold candidates scored by reciprocal rank, weighed on a
    grid by MAP@25 on the other folds; the CV is MAP@25 of that honest blend; the submission
    weighs each run's test ranks the same way."""
    from utils import ensemble, predict
    from utils.objective import RETRIEVAL
    from utils.runs import read_oof
    from utils.shapes import shape_of
    from utils.train import run_cv

    data, comp, _, _ = _train(tmp_path, tiny_bert, EEDI)
    run_cv(cfg_for(data / comp.train_file, tmp_path / "b", tiny_bert, competition=EEDI, max_steps=3, max_len=32,
                   pooling="attention", seed=7))
    runs = [tmp_path / "run", tmp_path / "b"]
    report = ensemble.blend_report(runs)
    assert report["metric"] == "map@25" and report["greater_is_better"]
    for w in [report["weights"], *report["weights_per_fold"].values()]:  # tenths summing to 1
        assert np.allclose(np.round(np.asarray(w) * 10), np.asarray(w) * 10) and sum(w) == pytest.approx(1)
    m = ensemble.load_members(runs)
    metric = get_metric("map@25")
    blended = np.zeros(m["P"].shape[::2])
    for k, w in report["weights_per_fold"].items():  # the CV, by hand: fold k's weights on fold k's rows
        held = m["folds"] == k
        blended[held] = np.einsum("nmk,m->nk", m["P"][held], np.asarray(w))
    assert report["score_blend_cv"] == pytest.approx(metric.score(m["y"], blended))
    for name, run in zip(m["names"], runs):  # each member's fused scores keep its own CV
        one = read_oof(run)
        assert report["scores"][name] == pytest.approx(metric.score(*one.arrays()))

    from utils import plots

    assert len(plots.blend_figure(report).axes) == 2  # notebook 3's figure: the scores and the weights
    ensemble.save_blend(tmp_path / "blend.json", report)
    out = tmp_path / "s.csv"
    assert predict.main(["--test-csv", str(data / "test.csv"), "--runs", *map(str, runs), "--blend",
                         str(tmp_path / "blend.json"), "--out", str(out)]) == 0
    test = read_table(comp, data, "test")
    items = read_catalogue(comp, data)
    sims = [predict.predict_run(r, shape_of(comp).inputs(comp, test), items=items["text"].tolist(), progress=False)
            for r in runs]
    fused = sum(w * RETRIEVAL.outputs.blend_scores(s) for w, s in zip(report["weights"], sims))
    expect = [" ".join(items["id"].to_numpy()[np.argsort(-f, kind="stable")[:25]]) for f in fused]
    assert pd.read_csv(out, dtype=str)["MisconceptionId"].tolist() == expect
    # A run's fused scores keep its order: its top 25 as the run alone answers.
    alone = [" ".join(items["id"].to_numpy()[np.argsort(-s, kind="stable")[:25]]) for s in sims[0]]
    assert alone == [" ".join(items["id"].to_numpy()[np.argsort(-f, kind="stable")[:25]])
                     for f in RETRIEVAL.outputs.blend_scores(sims[0])]


def test_init_recognises_options_a_catalogue_and_says_what_to_write_for_a_wide_table(tmp_path):
    from utils.infer import infer

    science = tiny_data(SCIENCE, tmp_path / "s", 12)
    comp, why = infer(science)
    b = BUILTIN[SCIENCE]
    assert (comp.task, comp.options, comp.target_cols, comp.answer_k, comp.answer_column, comp.text_cols) == \
        (b.task, b.options, b.target_cols, 3, "prediction", ("prompt",))
    assert any("MAP@3" in w for w in why)

    with pytest.raises(DataError) as e:  # Eedi's wide questions: a reshape the folder cannot say
        infer(tiny_data(EEDI, tmp_path / "e", 6))
    one_line(e.value, "a catalogue (misconception_mapping.csv: 'MisconceptionId'", '"reshape"',
             '["misconception_mapping.csv", "MisconceptionId", "MisconceptionName"]')

    long = tmp_path / "long"  # one row per query, the true item's id in the sample's column
    long.mkdir()
    items = pd.DataFrame({"item_id": [f"i{j}" for j in range(8)], "title": [f"the cat sat {j}" for j in range(8)]})
    items.to_csv(long / "items.csv", index=False)
    pd.DataFrame({"qid": range(10), "query": "a dog ran home", "item_id": [f"i{j % 8}" for j in range(10)]}).to_csv(
        long / "train.csv", index=False)
    pd.DataFrame({"qid": [20, 21], "query": "the sun"}).to_csv(long / "test.csv", index=False)
    pd.DataFrame({"qid": [20, 21], "item_id": "i0 i1 i2"}).to_csv(long / "sample_submission.csv", index=False)
    comp, _ = infer(long)
    assert (comp.task, comp.catalogue, comp.target_cols, comp.answer_k, comp.text_cols) == \
        ("retrieval", ("items.csv", "item_id", "title"), ("item_id",), 3, ("query",))
    assert len(read_table(comp, long)) == 10 and len(read_catalogue(comp, long)) == 8


@pytest.mark.parametrize("slug", [EEDI, SCIENCE])
def test_the_training_notebook_trains_a_ranking_and_shows_its_curves(slug, tmp_path, tiny_bert):
    """Notebook 02 with a ranking competition: its retriever settings reach the run, the curves
    and fold table are drawn, nothing plots a ranking as a value."""
    from helpers import papermill

    data = tiny_data(slug, tmp_path / "d", 24)
    papermill("02_train", tmp_path, dict(competition=slug, model_name=tiny_bert, pooling="mean", run_name="r",
                                          folds=2, epochs=1, batch_size=8, max_len=32, max_steps=2,
                                          temperature=0.1, hard_negatives=2, train_options=3, data_dir=str(data),
                                          runs_dir=str(tmp_path / "runs")))
    run = tmp_path / "runs" / "r"
    config = json.loads((run / "config.json").read_text())
    assert (config.get("temperature"), config.get("hard_negatives")) == ((0.1, 2) if slug == EEDI else (None, None))
    assert config.get("train_options") == (None if slug == EEDI else 3)  # each kind of rows keeps its own settings
    assert (run / "figures" / "learning_curves.png").is_file() and not list((run / "figures").glob("oof_scatter*"))


def test_option_order_cannot_change_a_multiple_choice_answer(tiny_bert):
    """Each (prompt, option) pair is scored alone and the scores compared after: permuting the
    options permutes the scores, nothing else (test-time permutation has nothing to average)."""
    from utils.fold import ModelSpec
    from utils.model import TextModel, load_tokenizer
    from utils.predict import predict_model
    from utils.shapes import OptionRows

    comp = BUILTIN[SCIENCE]
    rng = np.random.default_rng(0)
    words = ["the cat", "sat on", "a mat", "dog ran", "home sun", "birds sing"]
    df = pd.DataFrame({"prompt": ["what sat on the mat", "who sings"], **{x: rng.choice(words, 2) for x in "ABCDE"}})
    model = TextModel.from_backbone(tiny_bert, ModelSpec(pooling="mean", num_outputs=1, task="multiple_choice"))
    tok, shape = load_tokenizer(tiny_bert), OptionRows()
    order = [3, 0, 4, 1, 2]
    permuted = df.copy()
    for x, j in zip("ABCDE", order):
        permuted[x] = df["ABCDE"[j]]
    a = predict_model(model.eval(), tok, shape.inputs(comp, df), 32, shape=shape)
    b = predict_model(model, tok, shape.inputs(comp, permuted), 32, shape=shape)
    assert np.allclose(a[:, order], b, atol=1e-5)


@pytest.mark.versions
@pytest.mark.parametrize("slug", [EEDI, SCIENCE])
def test_a_decoder_with_lora_retrieves_and_answers_options(slug, tmp_path, tiny_decoders):
    """The last real token of a decoder with LoRA as the embedding (retrieval) or the option's
    score (multiple choice): trained, saved with its adapters only, and submitted."""
    from helpers import LORA

    from utils import predict
    from utils.train import run_cv

    data = tiny_data(slug, tmp_path / "d", 24)
    comp = load_competition(slug)
    run_cv(cfg_for(data / comp.train_file, tmp_path / "run", tiny_decoders["qwen2"], competition=slug, max_steps=2,
                   max_len=32, **LORA))
    saved = json.loads((tmp_path / "run" / "fold0" / "kit_config.json").read_text())
    assert saved["model"]["lora_r"] == 4 and saved["model"]["pooling"] == "last"
    out = tmp_path / "s.csv"
    assert predict.main(["--test-csv", str(data / comp.test_file), "--runs", str(tmp_path / "run"), "--out",
                         str(out)]) == 0
    sub = pd.read_csv(out, dtype=str)
    assert all(len(a.split()) == comp.answer_k for a in sub[comp.answer_column])


@pytest.mark.versions
def test_a_reranker_trains_on_out_of_fold_candidates_and_its_cv_is_the_final_rankings(tmp_path, tiny_bert, capsys):
    """The retriever's out-of-fold top N as a multiple choice: a query whose true item is not among
    them is never trained on and scores 0; the reranker's CV is MAP@k of the final order (its own
    over the top N, then the retriever's); the submission retrieves then reranks."""
    from utils import rerank
    from utils.runs import read_oof
    from utils.train import run_cv

    data, comp, _, _ = _train(tmp_path, tiny_bert, EEDI)
    assert rerank.main(["build", "--retriever", str(tmp_path / "run"), "--data", str(data), "--candidates", "25",
                        "--out", str(tmp_path / "rr")]) == 0
    table = pd.read_csv(tmp_path / "rr" / "rerank_train.csv", dtype=str)
    oof = read_oof(tmp_path / "run").frame.set_index("id")
    truth = read_table(comp, data).set_index("QuestionId_Answer")["MisconceptionId"]
    for _, row in table.iterrows():  # the retriever's out-of-fold top 25, the true one named when there
        cands = str(oof.loc[row["id"], "candidates"]).split()[:25]
        assert row["candidate_ids"].split() == cands
        assert row["answer"] == (f"c{cands.index(truth[row['id']])}" if truth[row["id"]] in cands else "none")
    assert (table["answer"] == "none").any() and (table["answer"] != "none").any()
    folds = pd.read_csv(tmp_path / "rr" / "folds.csv", dtype=str)
    assert folds.equals(pd.read_csv(tmp_path / "run" / "folds.csv", dtype=str))  # the retriever's folds

    rr = tmp_path / "rr"
    metrics = run_cv(cfg_for(rr / "rerank_train.csv", tmp_path / "rerank", tiny_bert,
                             competition=str(rr / "competition.json"), max_steps=2, max_len=32, pooling="mean",
                             train_options=4))
    out = read_oof(tmp_path / "rerank")
    assert json.loads((tmp_path / "rerank" / "config.json").read_text())["train_options"] == 4
    assert "train_options" not in json.loads((tmp_path / "run" / "config.json").read_text())  # a retriever's
    y, p = out.objective.outputs.oof_arrays(out.frame, ("answer",))
    assert (y == -1).sum() == (table["answer"] == "none").sum()
    expect = np.mean([1 / (1 + list(np.argsort(-pi, kind="stable")).index(t)) if t >= 0 else 0.0
                      for t, pi in zip(y, p)])  # one true item: 1/rank, 0 when not among the candidates
    assert metrics["cv"] == pytest.approx(expect)
    history = json.loads((tmp_path / "rerank" / "fold0" / "history.json").read_text())
    assert history["n_train"] == int(((folds.set_index("id").loc[table["id"], "fold"] != "0").to_numpy()
                                      & (table["answer"] != "none").to_numpy()).sum())

    fitted = rerank.prior(tmp_path / "rerank")  # the mix with the retriever's ranks, on this out-of-fold file
    assert fitted["reranker"] == pytest.approx(metrics["cv"])
    assert fitted["retriever"] == pytest.approx(np.mean([1 / (1 + t) if t >= 0 else 0.0 for t in y]))
    assert fitted["mixed_in_sample"] >= fitted["reranker"]  # weight 0, the reranker alone, is on the grid
    assert set(fitted["fold_weights"]) == set(folds["fold"]) and 0 <= fitted["cv"] <= 1
    assert rerank.main(["prior", "--reranker", str(tmp_path / "rerank")]) == 0
    assert "honest CV" in capsys.readouterr().out

    from utils.predict import submit

    sub = tmp_path / "s.csv"
    got = {w: rerank.predict(tmp_path / "run", tmp_path / "rerank", data / "test.csv", sub, weight=w, progress=False)
           for w in (None, 0.0, 1e6)}
    retrieved = submit([tmp_path / "run"], data / "test.csv", tmp_path / "retrieved.csv", progress=False)
    assert got[1e6].equals(retrieved)  # a large weight: the retriever's own submission
    assert not got[0.0].equals(retrieved)  # weight 0: the reranker's order over the top 25
    assert rerank.main(["predict", "--retriever", str(tmp_path / "run"), "--reranker", str(tmp_path / "rerank"),
                        "--test-csv", str(data / "test.csv"), "--out", str(sub)]) == 0
    got_cli = pd.read_csv(sub, dtype=str)
    assert got_cli["QuestionId_Answer"].tolist() == ["1869_B", "1869_C", "1869_D"]
    assert all(len(set(a.split())) == 25 for a in got_cli["MisconceptionId"])
    assert got_cli.equals(got[None].astype(str))  # the CLI mixes with the fitted weight
    assert rerank.main(["predict", "--retriever", str(tmp_path / "run"), "--reranker", str(tmp_path / "rerank"),
                        "--test-csv", str(data / "test.csv"), "--out", str(sub), "--prior-weight", "-1"]) == 2
    one_line(capsys.readouterr().err.strip(), "--prior-weight -1")


def test_the_final_order_is_the_rerankers_over_the_top_n_then_the_retrievers():
    from utils.rerank import rerank

    retriever = np.array([[0.9, 0.8, 0.7, 0.6, 0.5]])
    final = rerank(retriever, np.array([[0.1, 0.7, 0.2]]), 3)  # the reranker prefers item 1, then 2, then 0
    assert list(np.argsort(-final[0], kind="stable")) == [1, 2, 0, 3, 4]


def test_the_retrievers_ranks_weigh_on_the_rerankers_order_with_a_weight_no_fold_chose_for_itself():
    """mix: weight 0 is the reranker's order, a large one the retriever's; cross_fit mixes each
    fold's rows with the weight fitted on the other folds' rows, so changing a fold's own rows
    never changes its weight."""
    from utils.metrics import METRICS
    from utils.rerank import PRIOR_WEIGHTS, cross_fit, fit_weight, mix, rerank

    probs = np.array([[0.1, 0.6, 0.3]])
    assert list(np.argsort(-mix(probs, 0.0)[0], kind="stable")) == [1, 2, 0]
    assert list(np.argsort(-mix(probs, 50.0)[0], kind="stable")) == [0, 1, 2]
    final = rerank(np.array([[0.9, 0.8, 0.7, 0.6]]), np.array([[0.3, 0.5, 0.2]]), 3, weight=1.0)
    assert list(np.argsort(-final[0], kind="stable")) == [0, 1, 2, 3]  # 0.3 / 1 beats 0.5 / 2 (weight 0: 1 first)

    rng = np.random.default_rng(0)
    metric = METRICS["map@5"]
    n, k = 120, 8
    truth = rng.integers(0, k, n)
    probs = rng.dirichlet(np.ones(k), n)
    probs[np.arange(n), truth] += rng.random(n) * (truth < 3)  # the reranker is right on the retriever's top 3
    probs /= probs.sum(1, keepdims=True)
    folds = np.arange(n) % 3
    scores, weights = cross_fit(probs, truth, folds, metric)
    for f in range(3):
        assert weights[f] == fit_weight(probs[folds != f], truth[folds != f], metric) and weights[f] in PRIOR_WEIGHTS
        np.testing.assert_allclose(scores[folds == f], mix(probs[folds == f], weights[f]))
        other = probs.copy()
        other[folds == f] = rng.dirichlet(np.ones(k), int((folds == f).sum()))  # fold f's own rows changed
        assert cross_fit(other, truth, folds, metric)[1][f] == weights[f]
    best = fit_weight(probs, truth, metric)
    assert metric.score(truth, mix(probs, best)) == max(metric.score(truth, mix(probs, w)) for w in PRIOR_WEIGHTS)
    with pytest.raises(ValueError) as e:
        cross_fit(probs, truth, np.zeros(n, int), metric)
    one_line(e.value, "two folds at least")


def test_a_catalogue_is_read_once_while_its_file_is_unchanged(tmp_path, monkeypatch):
    """A run's folds and checks all ask for the catalogue: one read of the file until it changes;
    a caller changing its copy changes no other caller's."""
    import utils.tables as tables

    comp = BUILTIN[EEDI]
    path = tmp_path / comp.catalogue[0]
    pd.DataFrame({"MisconceptionId": range(30), "MisconceptionName": [f"m{i}" for i in range(30)]}).to_csv(path,
                                                                                                         index=False)
    reads = []
    load = tables.load_csv
    monkeypatch.setattr(tables, "load_csv", lambda *a, **k: reads.append(a) or load(*a, **k))
    first = read_catalogue(comp, tmp_path)
    first.loc[0, "text"] = "changed by a caller"
    assert read_catalogue(comp, tmp_path)["text"].iloc[0] == "m0" and len(reads) == 1
    pd.DataFrame({"MisconceptionId": range(31), "MisconceptionName": [f"n{i}" for i in range(31)]}).to_csv(path,
                                                                                                         index=False)
    again = read_catalogue(comp, tmp_path)
    assert len(reads) == 2 and len(again) == 31 and again["text"].iloc[0] == "n0"


def test_pseudo_labels_of_a_ranking_are_refused_in_one_line():
    from utils.pseudo import check_not_ranking

    with pytest.raises(DataError) as e:
        check_not_ranking(BUILTIN[SCIENCE])
    one_line(e.value, "kaggle-llm-science-exam answers a ranking of its options", "not yet for this one")
    check_not_ranking(BUILTIN["nlp-getting-started"])  # a classifier's are made


def test_options_listed_in_the_text_are_lettered_in_order_and_rotate_for_another_order():
    from utils.shapes import listed

    row = (("what is red", "a rose"), ("what is red", "the sky"), ("what is red", "grass"))
    pairs = listed(row)
    assert [o for _, o in pairs] == ["a rose", "the sky", "grass"]  # each pair keeps its own option
    assert {t for t, _ in pairs} == {"what is red Options: (A) a rose (B) the sky (C) grass"}
    assert listed(row, 1)[0][0] == "what is red Options: (A) the sky (B) grass (C) a rose"
    assert [o for _, o in listed(row, 1)] == ["a rose", "the sky", "grass"]  # scores stay in the row's order


@pytest.mark.versions
def test_a_scorer_that_reads_every_option_predicts_as_it_validated(tmp_path, tiny_bert):
    """--options-in-text travels in the fold's record: prediction lists the options as training
    did, and reproduces the fold's out-of-fold probabilities; reading the pairs without the
    listing gives other scores, and the order of the listing matters to this scorer."""
    from conftest import WORDS

    from utils.model import TextModel
    from utils.predict import predict_folds, predict_model
    from utils.runs import read_oof
    from utils.shapes import OptionRows, shape_of
    from utils.train import run_cv

    data = tiny_data(SCIENCE, tmp_path / "d", 24)
    comp = load_competition(SCIENCE)
    rng, words = np.random.default_rng(0), list(WORDS)
    frame = pd.read_csv(data / "train.csv")
    for x in "ABCDE":  # options of words the tiny vocabulary knows, other in every option
        frame[x] = [" ".join(rng.choice(words, 3)) for _ in range(len(frame))]
    frame.to_csv(data / "train.csv", index=False)
    # enough steps and a large enough rate that the scores differ between options
    run_cv(cfg_for(data / comp.train_file, tmp_path / "run", tiny_bert, competition=SCIENCE, max_steps=8,
                   max_len=64, pooling="mean", lr=3e-2, head_lr=3e-2, only_folds=(0,), options_in_text=True))
    run = read_oof(tmp_path / "run")
    frame = run.frame[run.frame["fold"] == 0]
    train = read_table(comp, data).set_index(comp.id_col).loc[frame["id"]]
    rows = shape_of(comp).inputs(comp, train.reset_index())
    probs = predict_folds(tmp_path / "run", rows, progress=False)[0]
    assert np.allclose(probs, frame[[f"prob_{x}" for x in "ABCDE"]].to_numpy(), atol=1e-5)

    model, tok = TextModel.load(tmp_path / "run" / "fold0", torch.device("cpu"))
    assert probs.std(1).mean() > 1e-3  # a trained scorer: the options' scores differ
    plain = predict_model(model, tok, rows, 64, shape=OptionRows())
    shifted = predict_model(model, tok, rows, 64, shape=OptionRows(options_in_text=True, listing_shift=2))
    assert not np.allclose(plain, probs, atol=1e-4) and not np.allclose(shifted, probs, atol=1e-4)


@pytest.mark.versions
@pytest.mark.parametrize("slug,kw", [(SCIENCE, dict(train_options=3)), (EEDI, dict(hard_negatives=2))])
def test_a_ranking_fold_stopped_mid_epoch_resumes_to_the_identical_result(tmp_path, tiny_bert, capsys, slug, kw):
    """The collator's draws (a sample of each row's options, a query's mined negatives) are the
    ones the uninterrupted fold made, whatever batch the loader had fetched ahead at the save."""
    from utils.train import run_cv

    data = tiny_data(slug, tmp_path / "d", 24)
    comp = load_competition(slug)
    common = dict(competition=slug, max_len=32, pooling="mean", only_folds=(0,), epochs=3, batch_size=4,
                  eval_every=2, save_every=1, **kw)
    ref = cfg_for(data / comp.train_file, tmp_path / "ref", tiny_bert, **common)
    run_cv(ref)
    steps = json.loads((tmp_path / "ref" / "fold0" / "history.json").read_text())["steps"]
    stop_at = steps // 3 + 2  # in the second epoch

    def stop(fold, step, value):
        if step >= stop_at:
            raise KeyboardInterrupt

    cfg = cfg_for(data / comp.train_file, tmp_path / "run", tiny_bert, **common)
    with pytest.raises(KeyboardInterrupt):
        run_cv(cfg, on_validation=stop)
    capsys.readouterr()
    run_cv(cfg)
    assert "fold 0: resumed at step" in capsys.readouterr().out
    assert (tmp_path / "run" / "oof.csv").read_bytes() == (tmp_path / "ref" / "oof.csv").read_bytes()
    hist = [json.loads((tmp_path / r / "fold0" / "history.json").read_text())["history"] for r in ("ref", "run")]
    assert hist[0] == hist[1]
