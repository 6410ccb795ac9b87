"""Rankings on bad or unusual input, each case once a silent error, a traceback or an unclear line:
texts that read like pandas' missing values, blank options, a catalogue changed between folds or
written as floats, ties at the k-th place, answer_k past the candidates kept, a reranker command
given the wrong run, and what the commands print and advise."""

from __future__ import annotations

import json
import shutil
import sys
import types

import numpy as np
import pandas as pd
import pytest
from helpers import assert_one_line_error, cfg_for, tiny_data

from utils.competition import BUILTIN, Competition
from utils.data import DataError
from utils.tables import read_catalogue, read_table

EEDI, SCIENCE = "eedi-mining-misconceptions-in-mathematics", "kaggle-llm-science-exam"


def one_line(error, *parts) -> None:
    """An exception's message: one line holding every part."""
    text = str(error)
    assert "\n" not in text and all(p in text for p in parts), text


def warnings_of(err: str) -> list:
    return [line for line in err.splitlines() if line.startswith("warning: ")]


# ----------------------------------------------------------------------------- tables


def test_texts_that_read_like_missing_values_stay_texts_and_numbers_keep_their_missing_cells(tmp_path):
    """None, NA and null are words in a text column (pandas reads them as missing by default); a
    numeric column's empty cell is still missing (an untagged distractor)."""
    comp = BUILTIN[SCIENCE]
    data = tiny_data(SCIENCE, tmp_path / "s", 6)
    test = pd.read_csv(data / "test.csv")
    test.loc[0, "prompt"], test.loc[1, "B"], test.loc[2, "E"] = "NA", "None", "null"
    test.to_csv(data / "test.csv", index=False)
    got = read_table(comp, data, "test", blank="x")
    assert (got.loc[0, "prompt"], got.loc[1, "B"], got.loc[2, "E"]) == ("NA", "None", "null")
    assert comp.input_texts(got)[0] == "NA"

    comp = BUILTIN[EEDI]
    data = tiny_data(EEDI, tmp_path / "e", 6)
    items = pd.read_csv(data / "misconception_mapping.csv")
    items.loc[3, "MisconceptionName"] = "None"
    items.to_csv(data / "misconception_mapping.csv", index=False)
    assert read_catalogue(comp, data)["text"].iloc[3] == "None"  # an item's text, not a blank one
    train = pd.read_csv(data / "train.csv")
    train.loc[0, "AnswerBText"] = "NA"
    train.to_csv(data / "train.csv", index=False)
    rows = read_table(comp, data)
    assert rows.loc[0, "AnswerText"] == "NA" and "Wrong answer: NA" in comp.input_texts(rows)[0]
    assert len(rows) == 6  # MisconceptionAId's empty cells are missing ids: those distractors stay untagged


def test_a_class_named_na_is_a_class(tmp_path):
    """MAP 2025 writes "no misconception" as the string NA: a label, not a missing one."""
    comp = Competition(slug="map-like", text_cols=("text",), target_cols=("Misconception",), task="multiclass")
    pd.DataFrame({"id": range(6), "text": [f"answer {i}" for i in range(6)],
                  "Misconception": ["NA", "Incomplete", "NA", "Wrong_fraction", "NA", "Incomplete"]}).to_csv(
        tmp_path / "train.csv", index=False)
    got = read_table(comp, tmp_path)
    assert got["Misconception"].tolist()[:2] == ["NA", "Incomplete"]


def test_blank_options_are_said_in_one_line_naming_the_file_columns_and_rows(tmp_path, capsys):
    comp = BUILTIN[SCIENCE]
    data = tiny_data(SCIENCE, tmp_path / "s", 6)
    test = pd.read_csv(data / "test.csv")
    test.loc[[0, 2], "C"] = ""
    test.loc[1, "E"] = "   "
    test.to_csv(data / "test.csv", index=False)
    read_table(comp, data, "test", blank="x")
    lines = warnings_of(capsys.readouterr().err)
    assert len(lines) == 1, lines
    assert all(p in lines[0] for p in ("test.csv", "'C' (2 rows)", "'E' (1 row)", "row 2 (id 4615)")), lines
    read_table(comp, tiny_data(SCIENCE, tmp_path / "clean", 6), "test", blank="x")
    assert warnings_of(capsys.readouterr().err) == []  # nothing blank: nothing said


def test_catalogue_ids_written_as_whole_floats_are_their_integer_ids(tmp_path):
    comp = BUILTIN[EEDI]
    data = tiny_data(EEDI, tmp_path / "e", 6)
    items = pd.read_csv(data / "misconception_mapping.csv")
    items["MisconceptionId"] = items["MisconceptionId"].astype(float)  # 0.0, 1.0, ...
    items.to_csv(data / "misconception_mapping.csv", index=False)
    assert read_catalogue(comp, data)["id"].tolist() == [str(i) for i in range(30)]
    assert read_table(comp, data)["MisconceptionId"].tolist() == [str(q % 30) for q in range(6)]
    items.loc[4, "MisconceptionId"] = 4.5  # not a whole number: an id of its own, never item 4
    items.to_csv(data / "misconception_mapping.csv", index=False)
    assert read_catalogue(comp, data)["id"].iloc[4] == "4.5"


def test_a_non_numeric_misconception_id_names_its_column_and_row(tmp_path):
    comp = BUILTIN[EEDI]
    data = tiny_data(EEDI, tmp_path / "e", 6)
    train = pd.read_csv(data / "train.csv")
    train["MisconceptionBId"] = train["MisconceptionBId"].astype(object)
    train.loc[3, "MisconceptionBId"] = "abc"
    train.to_csv(data / "train.csv", index=False)
    with pytest.raises(DataError) as e:
        read_table(comp, data)
    one_line(e.value, "train.csv", "'MisconceptionBId'", "'abc'", "row 5")


# ----------------------------------------------------------------------------- metrics and candidates


def test_ties_at_the_kth_place_go_to_the_lower_index_on_a_wide_row():
    """top_k's rule, ties to the lower index, holds when a partial sort picks among tied items at
    the boundary (rows wider than 4k): the same as a full stable sort."""
    from utils.metrics import map_at_k, top_k

    rng = np.random.default_rng(0)
    scores = rng.integers(0, 3, (300, 100)).astype(float)
    for k in (1, 5, 20):
        assert (top_k(scores, k) == np.argsort(-scores, axis=1, kind="stable")[:, :k]).all()
    row = np.zeros((1, 100))
    row[0, 50:] = 1.0
    assert top_k(row, 5).tolist() == [[50, 51, 52, 53, 54]]
    truth = np.array([54])  # the 5th of the tied items by the rule: in the top 5
    assert map_at_k(truth, row, 5) == pytest.approx(1 / 5)


def test_the_out_of_fold_file_keeps_enough_candidates_for_a_large_answer_k():
    """A retriever's CV is MAP@k of oof.csv: with answer_k above the 100 candidates it keeps by
    default, it keeps answer_k, so the CV is the MAP@k of the submission's lists."""
    from utils.metrics import get_metric
    from utils.objective import objective_of

    comp = Competition(slug="big", id_col="id", text_cols=("q",), target_cols=("item",), task="retrieval",
                       answer_k=150, catalogue=("items.csv", "id", "text"))
    rng = np.random.default_rng(0)
    sims = rng.normal(size=(40, 300))
    order = np.argsort(-sims, axis=1, kind="stable")
    truth = order[np.arange(40), rng.integers(100, 150, 40)]  # each true item ranked 101st to 150th
    ids = [str(i) for i in range(300)]
    df = pd.DataFrame({"item": [ids[t] for t in truth]})
    obj = objective_of(comp)
    oof = obj.outputs.oof_frame(np.arange(40), df, truth, sims, comp.target_cols, ids, 0)
    assert all(len(c.split()) == 150 for c in oof["candidates"])
    y, scores = obj.outputs.oof_arrays(oof, comp.target_cols)
    submitted = get_metric("map@150").score(truth, sims)
    assert submitted > 0 and get_metric("map@150").score(y, scores) == pytest.approx(submitted)


# ----------------------------------------------------------------------------- what a text becomes


def test_eedis_built_in_description_keeps_each_wrong_answer_of_a_long_question(tiny_bert):
    """Two distractors of one long question differ only in their wrong answer, at the end of the
    query: the built-in description's cut keeps it, so they stay two different sequences."""
    from utils.batching import encode
    from utils.model import load_tokenizer

    comp = BUILTIN[EEDI]
    question = " ".join(["the cat sat on a mat"] * 20)
    rows = pd.DataFrame({"ConstructName": "a construct", "SubjectName": "a subject", "QuestionText": question,
                         "CorrectAnswerText": "a dog", "AnswerText": ["trees grow big", "the sun"]})
    tok = load_tokenizer(tiny_bert)
    ids, cut = encode(comp.input_texts(rows), tok, 32, comp.long_text)
    assert cut == [0, 1] and ids[0] != ids[1]


def test_one_text_that_makes_most_of_the_windows_is_said_in_one_line(tiny_bert, capsys):
    from utils.batching import TextDataset
    from utils.model import load_tokenizer

    tok = load_tokenizer(tiny_bert)
    texts = ["a short text"] * 9 + [" ".join(["a very long text"] * 200)] + ["another short one"] * 5
    ds = TextDataset(texts, tok, 16, targets=np.zeros(len(texts)), fit="windows")
    share = np.bincount(ds.owner)[9]
    lines = warnings_of(capsys.readouterr().err)
    assert len(lines) == 1 and f"{share} of the {len(ds)} windows" in lines[0] and "text 10 of 15" in lines[0]
    TextDataset(texts[:9], tok, 16, targets=np.zeros(9), fit="windows")
    assert warnings_of(capsys.readouterr().err) == []


# ----------------------------------------------------------------------------- runs and commands


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_bert):
    """A tiny Eedi retriever (2 folds) and the reranker built on its out-of-fold candidates, a
    Science Exam scorer and a CommonLit regression (fold 0 each), with their data."""
    from utils import rerank
    from utils.train import run_cv

    root = tmp_path_factory.mktemp("rk")
    eedi, science = tiny_data(EEDI, root / "eedi", 24), tiny_data(SCIENCE, root / "science", 12)
    common = dict(max_len=32, pooling="mean")
    run_cv(cfg_for(eedi / "train.csv", root / "retriever", tiny_bert, competition=EEDI, max_steps=2, **common))
    assert rerank.main(["build", "--retriever", str(root / "retriever"), "--data", str(eedi), "--out",
                        str(root / "rr")]) == 0
    run_cv(cfg_for(root / "rr" / "rerank_train.csv", root / "reranker", tiny_bert, max_steps=2,
                   competition=str(root / "rr" / "competition.json"), train_options=4, **common))
    run_cv(cfg_for(science / "train.csv", root / "science_run", tiny_bert, competition=SCIENCE, max_steps=1,
                   only_folds=(0,), **common))
    commonlit = tiny_data("commonlitreadabilityprize", root / "commonlit", 12)
    run_cv(cfg_for(commonlit / "train.csv", root / "regression", tiny_bert, max_steps=1, only_folds=(0,), **common))
    return root


def test_a_retrievers_catalogue_changed_between_folds_is_refused_in_one_line(tmp_path, tiny_bert):
    from utils import runs as run_files
    from utils.train import run_cv

    data = tiny_data(EEDI, tmp_path / "e", 12)
    cfg = cfg_for(data / "train.csv", tmp_path / "run", tiny_bert, competition=EEDI, max_steps=1, max_len=32,
                  pooling="mean", only_folds=(0,))
    run_cv(cfg)
    items = pd.read_csv(data / "misconception_mapping.csv")
    items.loc[0, "MisconceptionName"] = "another misconception altogether"
    items.to_csv(data / "misconception_mapping.csv", index=False)
    with pytest.raises(Exception) as e:
        run_cv(cfg_for(data / "train.csv", tmp_path / "run", tiny_bert, competition=EEDI, max_steps=1, max_len=32,
                       pooling="mean", only_folds=(1,)))
    one_line(e.value, "catalogue_sha256 changed (the catalogue file's content)")
    assert not (tmp_path / "run" / "fold1").exists()
    # A run saved before the catalogue counted resumes as it did (its paths decide, as for other inputs).
    saved = run_files.read_config(tmp_path / "run")
    saved.pop("catalogue_sha256")
    run_files.write_config(tmp_path / "run", saved)
    metrics = run_cv(cfg_for(data / "train.csv", tmp_path / "run", tiny_bert, competition=EEDI, max_steps=1,
                             max_len=32, pooling="mean", only_folds=(1,)))
    assert metrics["folds_done"] == [0, 1]


def test_prior_refuses_a_run_that_is_not_a_reranker_in_one_line(runs, capsys):
    from utils import rerank

    for run in ("retriever", "science_run", "regression"):
        assert rerank.main(["prior", "--reranker", str(runs / run)]) == 2
        assert_one_line_error(capsys.readouterr().err, str(runs / run), "is not a reranker")
    assert rerank.main(["prior", "--reranker", str(runs / "reranker")]) == 0


def test_a_run_folder_that_does_not_exist_is_said_so(runs, capsys):
    from utils import rerank

    missing = runs / "retreiver"
    assert rerank.main(["build", "--retriever", str(missing), "--data", str(runs / "eedi"), "--out",
                        str(runs / "x")]) == 2
    assert_one_line_error(capsys.readouterr().err, str(missing), "does not exist")
    assert rerank.main(["prior", "--reranker", str(missing)]) == 2
    assert_one_line_error(capsys.readouterr().err, str(missing), "does not exist")
    assert rerank.main(["predict", "--retriever", str(runs / "retriever"), "--reranker", str(missing),
                        "--test-csv", str(runs / "eedi" / "test.csv")]) == 2
    assert_one_line_error(capsys.readouterr().err, str(missing), "does not exist")


def test_build_names_the_id_the_catalogue_lacks(runs, tmp_path, capsys):
    from utils import rerank
    from utils.runs import read_oof

    data = tmp_path / "d"
    shutil.copytree(runs / "eedi", data)
    named = str(read_oof(runs / "retriever").frame["candidates"].iloc[0]).split()[3]
    items = pd.read_csv(data / "misconception_mapping.csv", dtype={"MisconceptionId": str})
    items = items[items["MisconceptionId"] != named]
    items.to_csv(data / "misconception_mapping.csv", index=False)
    train = pd.read_csv(data / "train.csv")  # no true item is the one dropped (the catalogue is still read whole)
    train = train[train["MisconceptionBId"].astype(str) != named]
    train.to_csv(data / "train.csv", index=False)
    assert rerank.main(["build", "--retriever", str(runs / "retriever"), "--data", str(data), "--out",
                        str(tmp_path / "rr")]) == 2
    assert_one_line_error(capsys.readouterr().err, "misconception_mapping.csv", f"'{named}'")


def test_build_says_how_many_candidates_there_are_and_the_folds_to_train_on(runs, tmp_path, capsys):
    from utils import rerank

    assert rerank.main(["build", "--retriever", str(runs / "retriever"), "--data", str(runs / "eedi"),
                        "--candidates", "150", "--out", str(tmp_path / "rr")]) == 2
    assert_one_line_error(capsys.readouterr().err, "keeps 30 candidates", "--candidates 30")
    assert rerank.main(["build", "--retriever", str(runs / "retriever"), "--data", str(runs / "eedi"),
                        "--candidates", "26", "--out", str(tmp_path / "rr")]) == 0
    out = capsys.readouterr().out
    assert "--folds 2" in out and f"--train-csv {tmp_path / 'rr' / 'rerank_train.csv'}" in out  # 2, not 5


def test_rerank_predict_accepts_the_flag_its_advice_names(runs, tmp_path, capsys):
    from utils import rerank

    data = tmp_path / "d"
    shutil.copytree(runs / "eedi", data)
    (data / "sample_submission.csv").unlink()
    argv = ["predict", "--retriever", str(runs / "retriever"), "--reranker", str(runs / "reranker"),
            "--test-csv", str(data / "test.csv"), "--out", str(tmp_path / "s.csv")]
    assert rerank.main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "--no-sample-submission")
    assert rerank.main([*argv, "--no-sample-submission"]) == 0
    assert pd.read_csv(tmp_path / "s.csv")["QuestionId_Answer"].tolist() == ["1869_B", "1869_C", "1869_D"]


def test_utils_predict_points_a_reranker_to_utils_rerank_predict(runs, capsys):
    from utils import predict

    assert predict.main(["--test-csv", str(runs / "eedi" / "test.csv"), "--runs", str(runs / "reranker")]) == 2
    assert_one_line_error(capsys.readouterr().err, str(runs / "reranker"), "python -m utils.rerank predict")


def test_a_blank_question_is_said_as_its_shape_predicts_it(runs, tmp_path, capsys):
    """A ranking has no training mean to give a blank text: it ranks from the empty text."""
    from utils import predict

    data = tmp_path / "d"
    shutil.copytree(runs / "science", data)
    test = pd.read_csv(data / "test.csv")
    test.loc[1, "prompt"] = ""
    test.to_csv(data / "test.csv", index=False)
    predict.submit([runs / "science_run"], data / "test.csv", tmp_path / "s.csv", progress=False)
    lines = warnings_of(capsys.readouterr().err)
    assert len(lines) == 1 and "'prompt' is empty at row 3" in lines[0] and "training mean" not in lines[0]
    assert "options" in lines[0]


# ----------------------------------------------------------------------------- tune


def test_a_module_shadowing_optuna_is_said_in_one_line(monkeypatch, tmp_path):
    from utils import tune

    fake = types.ModuleType("optuna")
    fake.__file__ = str(tmp_path / "optuna.py")
    monkeypatch.setitem(sys.modules, "optuna", fake)
    with pytest.raises(ValueError) as e:
        tune.require_optuna()
    one_line(e.value, str(tmp_path / "optuna.py"), "not Optuna", "create_study")


def test_the_identity_names_the_catalogue_by_content(tmp_path):
    from utils.config import differences, identity

    data = tiny_data(EEDI, tmp_path / "e", 6)
    cfg = cfg_for(data / "train.csv", tmp_path / "run", "m", competition=EEDI)
    before = identity(cfg, BUILTIN[EEDI])
    assert before["catalogue_sha256"]
    (data / "misconception_mapping.csv").write_text((data / "misconception_mapping.csv").read_text() + "30,new\n")
    after = identity(cfg, BUILTIN[EEDI])
    assert differences(before, after) == "catalogue_sha256 changed (the catalogue file's content)"
    science = tiny_data(SCIENCE, tmp_path / "s", 6)
    assert "catalogue_sha256" not in identity(cfg_for(science / "train.csv", tmp_path / "r", "m",
                                                      competition=SCIENCE), BUILTIN[SCIENCE])
    assert json.loads(json.dumps(before)) == before
