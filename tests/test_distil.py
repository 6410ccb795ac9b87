"""Distillation with honest folds: `utils.pseudo --training-rows` writes each training row's
prediction by the fold-k teachers (trained on exactly the rows fold k's student trains on), and
`utils.train --distil-csv` mixes them into fold k's training targets. The leak it prevents is
shown: a student fed the teacher's out-of-fold predictions moves when only its validation rows'
labels change (the teachers of the other folds trained on them); the kit's does not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import WORDS, cfg_for, perturb, write_csv

from utils import pseudo, runs
from utils.data import DataError, pseudo_info_path
from utils.objective import softened
from utils.train import run_cv

pytestmark = pytest.mark.integration

K = 0  # the fold whose labels change


def _teacher_file(teacher: Path, csv: Path, out: Path) -> Path:
    assert pseudo.main(["--runs", str(teacher), "--train-csv", str(csv), "--training-rows", "--out", str(out),
                        "--no-progress"]) == 0
    return out


def _oof_fold(run: Path, k: int) -> pd.Series:
    oof = runs.collect_oof(run)
    rows = oof[oof.fold == k]
    return rows.set_index(rows["id"].astype(str))["pred"] if "pred" in rows else rows.set_index(
        rows["id"].astype(str)).iloc[:, 1]


@pytest.fixture(scope="module")
def teacher(tmp_path_factory, tiny_bert):
    from conftest import tiny_frame

    tmp = tmp_path_factory.mktemp("distil")
    csv = write_csv(tiny_frame(40), tmp / "train.csv")
    run_cv(cfg_for(csv, tmp / "teacher", tiny_bert, max_steps=3, max_len=32, pooling="attention"))
    return tmp, csv


def test_each_training_row_gets_the_predictions_of_the_teachers_of_other_folds_only(teacher):
    tmp, csv = teacher
    out = _teacher_file(tmp / "teacher", csv, tmp / "t.csv")
    info = json.loads(pseudo_info_path(out).read_text())
    assert info["rows"] == "training" and info["teachers"][0]["identity"] == runs.identity(tmp / "teacher")
    t = pd.read_csv(out, dtype={"id": str}).set_index("id")
    folds = runs.read_folds(tmp / "teacher")
    folds.index = folds.index.astype(str)
    for k in (0, 1):
        col = t[f"target_fold{k}"]
        assert col[folds.loc[t.index].to_numpy() == k].isna().all()  # its student validates there
        assert col[folds.loc[t.index].to_numpy() != k].notna().all()
    # fold 1's column on fold 0's rows is fold 1's model's prediction of them (rows it trained on)
    from utils.predict import predict_folds

    frame = pd.read_csv(csv, dtype={"id": str}).set_index("id").loc[t.index]
    preds = predict_folds(tmp / "teacher", frame["excerpt"].tolist(), progress=False)
    rows = folds.loc[t.index].to_numpy() == 0
    assert np.allclose(t["target_fold1"].to_numpy()[rows], preds[1][rows, 0], atol=1e-4)


def test_a_student_trains_on_them_and_records_its_teachers(teacher, tiny_bert, capsys):
    tmp, csv = teacher
    out = _teacher_file(tmp / "teacher", csv, tmp / "t2.csv")
    m = run_cv(cfg_for(csv, tmp / "student", tiny_bert, max_steps=3, max_len=32, pooling="mean",
                       distil_csv=str(out), distil_weight=0.7))
    assert np.isfinite(m["cv"]) and "each fold's training targets mix the labels" in capsys.readouterr().out
    saved = runs.read_config(tmp / "student")
    assert saved["distil_csv"] == str(out) and saved["distil_weight"] == 0.7
    assert m["config"]["distil_sha256"]  # the teacher's predictions count in the run's identity
    assert m["teachers"] == [{"run": "teacher", "identity": runs.identity(tmp / "teacher")}]
    # utils.runs lists the student beside its teacher: who taught it, and each one's cost per row
    t = runs.table([tmp / "teacher", tmp / "student"]).set_index("run")
    assert t.loc["student", "teachers"] == "teacher" and t.loc["teacher", "teachers"] == ""
    assert (t["ms per row"] > 0).all()
    assert list(t.columns).index("teachers") < list(t.columns).index("metric")


def test_a_teacher_of_one_fold_teaches_that_folds_student(tmp_path, tiny_bert):
    # a teacher trained on fold 0 alone (--only-folds 0) predicts only the rows fold 0's student trains on;
    # fold 0's own rows are in no fold's training side here, so the file lacks them and the student still trains
    from conftest import tiny_frame

    csv = write_csv(tiny_frame(30), tmp_path / "train.csv")
    run_cv(cfg_for(csv, tmp_path / "teacher", tiny_bert, folds=3, only_folds=(0,), max_steps=1, max_len=32))
    out = _teacher_file(tmp_path / "teacher", csv, tmp_path / "t.csv")
    assert len(pd.read_csv(out)) == 20
    m = run_cv(cfg_for(csv, tmp_path / "student", tiny_bert, folds=3, only_folds=(0,), max_steps=1, max_len=32,
                       distil_csv=str(out)))
    assert np.isfinite(m["cv"])
    with pytest.raises(DataError, match="t.csv has no target_fold1"):  # no teacher of fold 1: refused as before
        run_cv(cfg_for(csv, tmp_path / "student1", tiny_bert, folds=3, only_folds=(1,), max_steps=1, max_len=32,
                       distil_csv=str(out)))


def test_a_file_of_other_texts_other_folds_or_other_rows_is_refused_in_one_line(teacher, tiny_bert, tmp_path,
                                                                                 capsys):
    tmp, csv = teacher
    out = _teacher_file(tmp / "teacher", csv, tmp_path / "t.csv")
    # other texts: pseudo-labels of extra text are not a student's targets
    info = json.loads(pseudo_info_path(out).read_text())
    pseudo_info_path(out).write_text(json.dumps({**info, "rows": "texts"}))
    with pytest.raises(DataError, match="not a teacher's predictions of the training rows"):
        run_cv(cfg_for(csv, tmp_path / "a", tiny_bert, max_steps=1, distil_csv=str(out)))
    # other folds: the fold-k teacher saw the student's validation rows
    pseudo_info_path(out).write_text(json.dumps({**info, "folds_fingerprint": "0" * 16}))
    with pytest.raises(DataError, match="made with other folds"):
        run_cv(cfg_for(csv, tmp_path / "b", tiny_bert, max_steps=1, distil_csv=str(out)))
    # other rows
    pseudo_info_path(out).write_text(json.dumps(info))
    t = pd.read_csv(out, dtype={"id": str})
    t.iloc[1:].to_csv(out, index=False)
    with pytest.raises(DataError, match="no prediction for 1 training rows"):
        run_cv(cfg_for(csv, tmp_path / "c", tiny_bert, max_steps=1, distil_csv=str(out)))
    frame = pd.read_csv(csv, dtype={"id": str})
    other = write_csv(frame.iloc[:-1], tmp_path / "other.csv")  # a file without one of the teachers' rows
    assert pseudo.main(["--runs", str(tmp / "teacher"), "--train-csv", str(other), "--training-rows", "--out",
                        str(tmp_path / "x.csv")]) == 2
    assert f"other.csv has no row '{frame['id'].iloc[-1]}' of " in capsys.readouterr().err
    # a file with more rows than the teachers trained on (--max-rows): their own rows are labelled
    more = write_csv(pd.concat([frame, frame.iloc[:2].assign(id=["new1", "new2"])]), tmp_path / "more.csv")
    assert pseudo.main(["--runs", str(tmp / "teacher"), "--train-csv", str(more), "--training-rows", "--out",
                        str(tmp_path / "m.csv"), "--no-progress"]) == 0
    assert "the 40 of its 42 rows the teachers trained on" in capsys.readouterr().out
    assert sorted(pd.read_csv(tmp_path / "m.csv", dtype={"id": str})["id"]) == sorted(frame["id"])
    # another version of a row's text (same id): the teacher predicted other words
    t.assign(excerpt=t["excerpt"].where(t.index != 3, t["excerpt"] + " and more")).to_csv(out, index=False)
    with pytest.raises(DataError, match=f"t.csv: column 'excerpt' of id '{t.loc[3, 'id']}' is not the training file"):
        run_cv(cfg_for(csv, tmp_path / "d", tiny_bert, max_steps=1, distil_csv=str(out)))
    # a student's teacher file given as pseudo-labels of other texts: it would add the other folds' rows again
    t.to_csv(out, index=False)
    with pytest.raises(DataError, match="t.csv holds a teacher's predictions of the training rows .*--distil-csv"):
        run_cv(cfg_for(csv, tmp_path / "e", tiny_bert, max_steps=1, pseudo_csv=str(out)))
    # --max-std leaves rows out: a student's targets need every row
    shutil.copytree(tmp / "teacher", tmp_path / "twin")
    two = ["--runs", str(tmp / "teacher"), str(tmp_path / "twin"), "--train-csv", str(csv),
           "--out", str(tmp_path / "y.csv")]
    assert pseudo.main([*two, "--training-rows", "--max-std", "0.1"]) == 2
    assert "--max-std with --training-rows" in capsys.readouterr().err


def test_a_teacher_that_predicts_nan_is_refused_before_anything_is_written(teacher, tmp_path, monkeypatch, capsys):
    tmp, csv = teacher
    real = pseudo.predict_folds

    def diverged(*a, **kw):
        out = real(*a, **kw)
        out[1][5] = np.nan  # fold 1's model on the sixth row
        return out

    monkeypatch.setattr(pseudo, "predict_folds", diverged)
    assert pseudo.main(["--runs", str(tmp / "teacher"), "--train-csv", str(csv), "--training-rows", "--out",
                        str(tmp_path / "t.csv"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "fold 1's model predicts NaN or infinity for 1 of the" in err and "nothing written" in err
    assert not (tmp_path / "t.csv").exists()


def test_the_leak_a_student_of_out_of_fold_predictions_has_and_the_kits_has_not(teacher, tiny_bert, tmp_path):
    # Change only fold K's labels and train everything again. Fold K's student must not move: its
    # training rows' labels are the same, and so must be its teacher's signal. The kit's (the fold-K
    # teacher, trained without fold K) is; the out-of-fold one (fold j's teacher, trained on fold K's
    # labels) is not, and the student follows it.
    tmp, csv = teacher
    frame = pd.read_csv(csv)
    folds = runs.read_folds(tmp / "teacher")
    folds.index = folds.index.astype(str)
    fold_of = folds.loc[frame["id"].astype(str)].to_numpy()
    changed = write_csv(perturb(frame, fold_of, K, seed=3), tmp_path / "changed.csv")
    # one validation, after the last step: no checkpoint is chosen by fold K's labels (a fold's best
    # step is picked on its validation rows, the teacher's as any run's: docs/pseudo-labels.md)
    kw = dict(max_steps=3, max_len=32, folds_csv=str(tmp_path / "folds.csv"), eval_every=1000, epochs=1)
    pd.DataFrame({"id": folds.index, "fold": folds.to_numpy()}).to_csv(tmp_path / "folds.csv", index=False)
    students = {}
    for name, data in (("same", csv), ("changed", changed)):
        run_cv(cfg_for(data, tmp_path / f"teacher-{name}", tiny_bert, pooling="attention", **kw))
        kit = _teacher_file(tmp_path / f"teacher-{name}", data, tmp_path / f"kit-{name}.csv")
        wrong = tmp_path / f"oof-{name}.csv"  # every fold's column: the teachers' out-of-fold predictions
        t, oof = pd.read_csv(kit, dtype={"id": str}), runs.collect_oof(tmp_path / f"teacher-{name}").set_index("id")
        pred_col = [c for c in oof.columns if c not in ("target", "fold")][0]
        for k in (0, 1):
            t[f"target_fold{k}"] = oof.loc[t["id"], pred_col].astype(float).to_numpy()
        t.to_csv(wrong, index=False)
        pseudo_info_path(wrong).write_text(pseudo_info_path(kit).read_text())
        for how, file in (("kit", kit), ("oof", wrong)):
            run = tmp_path / f"student-{how}-{name}"
            run_cv(cfg_for(data, run, tiny_bert, pooling="mean", distil_csv=str(file), distil_weight=1.0,
                           only_folds=(K,), **kw))
            students[how, name] = _oof_fold(run, K).astype(float)
    assert np.allclose(students["kit", "same"], students["kit", "changed"], atol=1e-6)
    assert not np.allclose(students["oof", "same"], students["oof", "changed"], atol=1e-3)


def test_softened_probabilities_follow_the_temperature():
    p = np.array([[0.7, 0.2, 0.1]])
    assert np.allclose(softened(p, 1.0), p)
    flat = softened(p, 3.0)
    assert np.isclose(flat.sum(), 1) and flat[0, 0] < 0.7 and flat[0, 2] > 0.1
    assert np.allclose(flat, np.exp(np.log(p) / 3) / np.exp(np.log(p) / 3).sum())  # softmax of logits / T


def test_the_mixed_targets_of_each_kind():
    from utils.objective import get_objective

    y = np.array([[1.0], [2.0]])
    assert np.allclose(get_objective("regression").distilled(y, np.array([[3.0], [0.0]]), 0.25, 1.0),
                       [[1.5], [1.5]])
    cls = get_objective("classification").distilled(np.array([0, 1]), np.array([[0.5, 0.5], [0.9, 0.1]]), 0.5, 1.0)
    assert np.allclose(cls, [[0.75, 0.25], [0.45, 0.55]]) and np.allclose(cls.sum(1), 1)
    lab = get_objective("multilabel").distilled(np.array([[1, 0]]), np.array([[0.5, 0.5]]), 0.5, 1.0)
    assert np.allclose(lab, [[0.75, 0.25]])


def test_a_classifier_distils_its_teachers_softened_probabilities(tmp_path, tiny_bert):
    from helpers import tiny_data

    slug = "nlp-getting-started"
    data = tiny_data(slug, tmp_path / "d", 24)
    run_cv(cfg_for(data / "train.csv", tmp_path / "teacher", tiny_bert, competition=slug, max_steps=2, max_len=16))
    out = tmp_path / "t.csv"
    assert pseudo.main(["--runs", str(tmp_path / "teacher"), "--train-csv", str(data / "train.csv"),
                        "--training-rows", "--out", str(out), "--no-progress"]) == 0
    t = pd.read_csv(out)
    assert {"prob_0_fold0", "prob_1_fold0", "prob_0_fold1", "prob_1_fold1"} <= set(t.columns)
    m = run_cv(cfg_for(data / "train.csv", tmp_path / "student", tiny_bert, competition=slug, max_steps=2,
                       max_len=16, distil_csv=str(out), distil_temperature=2.0))
    assert np.isfinite(m["cv"]) and m["teachers"][0]["run"] == "teacher"
    # a catalogue's ranking is refused in one line, before any training, and before any model loads
    eedi = "eedi-mining-misconceptions-in-mathematics"
    with pytest.raises(ValueError, match="--distil-csv: .* answers a ranking of a catalogue"):
        run_cv(cfg_for(tiny_data(eedi, tmp_path / "e", 12) / "train.csv", tmp_path / "x",
                       tiny_bert, competition=eedi, max_steps=1, distil_csv=str(out)))
    from utils.competition import BUILTIN

    with pytest.raises(DataError, match="answers a ranking of a catalogue .*predictions of the training rows"):
        pseudo.check_not_ranking(BUILTIN[eedi], training_rows=True)


def test_a_multiple_choice_student_distils_its_teachers_probabilities_over_the_options(tmp_path, tiny_bert):
    """The teacher's probabilities over each training row's options (prob_A ... per fold), mixed with
    the true option at a temperature; weight 0 is the plain run exactly, and --train-options refused."""
    from helpers import tiny_data

    from utils.predict import predict_folds
    from utils.tables import read_split

    slug = "kaggle-llm-science-exam"
    data = tiny_data(slug, tmp_path / "d", 16)
    frame, rng = pd.read_csv(data / "train.csv"), np.random.default_rng(0)
    for x in "ABCDE":  # options of words the tiny vocabulary knows, other in every option
        frame[x] = [" ".join(rng.choice(list(WORDS), 3)) for _ in range(len(frame))]
    frame.to_csv(data / "train.csv", index=False)
    # enough steps and a large enough rate that the scores differ between options
    kw = dict(competition=slug, epochs=4, max_len=64, pooling="mean", lr=3e-2, head_lr=3e-2)
    run_cv(cfg_for(data / "train.csv", tmp_path / "teacher", tiny_bert, **kw))
    out = tmp_path / "t.csv"
    assert pseudo.main(["--runs", str(tmp_path / "teacher"), "--train-csv", str(data / "train.csv"),
                        "--training-rows", "--out", str(out), "--no-progress"]) == 0
    t = pd.read_csv(out)
    cols = [f"prob_{o}_fold1" for o in "ABCDE"]
    assert set(cols) <= set(t.columns) and np.allclose(t[cols].dropna().sum(axis=1), 1, atol=1e-5)
    m = run_cv(cfg_for(data / "train.csv", tmp_path / "student", tiny_bert, distil_csv=str(out),
                       distil_temperature=2.0, **kw))
    assert np.isfinite(m["cv"]) and m["teachers"][0]["run"] == "teacher"
    run_cv(cfg_for(data / "train.csv", tmp_path / "alone", tiny_bert, **kw))
    run_cv(cfg_for(data / "train.csv", tmp_path / "nothing", tiny_bert, distil_csv=str(out), distil_weight=0.0, **kw))
    from utils.competition import load_competition
    from utils.shapes import shape_of

    comp = load_competition(slug)
    rows = shape_of(comp).inputs(comp, read_split(comp, data / "train.csv", "train"))
    alone, nothing, student = (predict_folds(tmp_path / r, rows, progress=False)[0]
                               for r in ("alone", "nothing", "student"))
    assert np.allclose(alone, nothing, atol=1e-5) and not np.allclose(alone, student, atol=1e-4)
    with pytest.raises(ValueError, match="--distil-csv with --train-options"):
        run_cv(cfg_for(data / "train.csv", tmp_path / "x", tiny_bert, distil_csv=str(out), train_options=2, **kw))


def test_a_teachers_character_scores_become_the_students_token_targets():
    import dataclasses

    from utils.objective import SPANS
    from utils.spans import cell_scores, scores_cell, teacher_token_probs

    two, one_head = dataclasses.replace(SPANS, count="one"), dataclasses.replace(SPANS, count="many")

    def targets(offsets, chars, mask, hard, weight, temperature=1.0, objective=two):
        return objective.window_targets(hard, teacher_token_probs(offsets, chars, mask), weight, temperature)

    # "good day": the student's tokens [CLS] "good" " day" [SEP] (offsets as a byte-level tokenizer's)
    offsets, mask = np.array([[0, 0], [0, 4], [4, 8], [0, 0]]), np.array([False, True, True, False])
    chars = np.zeros((8, 2))
    chars[0, 0], chars[5, 0] = 0.6, 0.3  # start: "g" 0.6, "d" 0.3 (0.1 on no span)
    chars[3, 1], chars[7, 1] = 0.2, 0.8  # end: "d" of good 0.2, "y" 0.8
    t = targets(offsets, chars, mask, np.array([1, 2]), weight=1.0)
    assert t.shape == (2, 4) and np.allclose(t.sum(1), 1)
    assert np.allclose(t[0], [0.1, 0.6, 0.3, 0]) and np.allclose(t[1], [0, 0.2, 0.8, 0])
    half = targets(offsets, chars, mask, np.array([1, 2]), weight=0.5)
    assert np.allclose(half[0], [0.05, 0.8, 0.15, 0]) and np.allclose(half[1], [0, 0.1, 0.9, 0])
    flat = targets(offsets, chars, mask, np.array([1, 2]), weight=1.0, temperature=3.0)
    assert flat[0, 1] < 0.6 and flat[0, 0] > 0.1 and flat[0, 3] == 0 and flat[1, 0] == 0  # softer, 0 stays 0
    assert np.allclose(flat.sum(1), 1)
    # a window holding only " day": the mass on "good" is outside it, so on "no span here" (position 0)
    win = targets(offsets[[0, 2, 3]], chars, mask[[0, 2, 3]], np.array([0, 0]), weight=1.0)
    assert np.allclose(win[0], [0.7, 0.3, 0]) and np.allclose(win[1], [0.2, 0.8, 0])
    # one head: each token the mean of its characters' probabilities, the label's -100 kept
    p = np.r_[np.full(4, 0.9), np.full(4, 0.2)][:, None]
    one = targets(offsets, p, mask, np.array([-100, 1, 0, -100]), weight=0.5, objective=one_head)
    assert np.allclose(one, [-100, 0.95, 0.1, -100])
    hot = targets(offsets, p, mask, np.array([-100, 1, 0, -100]), weight=1.0, temperature=3.0, objective=one_head)
    assert 0.5 < hot[1] < 0.9 and 0.2 < hot[2] < 0.5  # softened as two classes, towards 0.5
    # the file's cells: every score that is not 0 to 3 significant digits (a temperature lifts the
    # smallest: none dropped), a run of equal scores as its edges, the length kept
    assert np.allclose(cell_scores(scores_cell(chars[:, 0])), chars[:, 0]) and scores_cell(np.zeros(3)) == "3|"
    tiny = np.array([0, 2e-7, 0.3, 0.3, 0.3, 4.5e-5, 0.0004, 0.0004, 0], dtype=np.float32)
    assert scores_cell(tiny) == "9|1:2e-07 2-4:0.3 5:4.5e-05 6-7:0.0004"
    assert np.allclose(cell_scores(scores_cell(tiny)), tiny, rtol=1e-3, atol=0)
    for cell in ("3|2-5:0.1", "3|2-1:0.1", "3|-1:0.1"):  # a run past the text's end, backwards, negative
        with pytest.raises(ValueError, match="not a text's character scores"):
            cell_scores(cell)
    with pytest.raises(ValueError, match="row 5: .* not a text's character scores"):
        cell_scores("0.5", "row 5")


@pytest.mark.parametrize("slug,student", [("tweet-sentiment-extraction", "tiny_bert"),
                                          ("nbme-score-clinical-patient-notes", "tiny_roberta")])
def test_a_span_student_distils_its_teachers_character_scores(tmp_path, tiny_bert, slug, student, request):
    """The teacher's character scores of each training row (fold k's model, none on fold k's own rows)
    go into the file, and a student of the same or another tokenizer trains on them."""
    from helpers import tiny_data

    from utils.competition import load_competition
    from utils.predict import predict_folds
    from utils.spans import cell_scores
    from utils.tables import read_split

    data = tiny_data(slug, tmp_path / "d", 24)
    run_cv(cfg_for(data / "train.csv", tmp_path / "teacher", tiny_bert, competition=slug, max_steps=2, max_len=24))
    out = tmp_path / "t.csv"
    assert pseudo.main(["--runs", str(tmp_path / "teacher"), "--train-csv", str(data / "train.csv"),
                        "--training-rows", "--out", str(out), "--no-progress"]) == 0
    comp = load_competition(slug)
    heads = ("start", "end") if comp.span_count == "one" else ("span",)
    t = pd.read_csv(out, dtype={comp.id_col: str}, keep_default_na=False, na_values=[""])
    folds = runs.read_folds(tmp_path / "teacher")
    folds.index = folds.index.astype(str)
    fold_of = folds.loc[t[comp.id_col]].to_numpy()
    assert {f"{h}_fold{k}" for h in heads for k in (0, 1)} <= set(t.columns)
    own = t[f"{heads[0]}_fold0"]
    assert own[fold_of == 0].isna().all() and own[fold_of == 1].notna().all()
    rows = np.flatnonzero(fold_of == 0)  # fold 1's model's scores of fold 0's rows, which it trained on
    frame = read_split(comp, data / "train.csv", "train")
    frame = frame.set_index(frame[comp.id_col].astype(str)).loc[t[comp.id_col]]
    texts = comp.input_texts(frame)
    scores = predict_folds(tmp_path / "teacher", texts, progress=False)[1]
    span_texts = t[comp.span_col].astype(str).tolist()
    for i in rows:
        for j, h in enumerate(heads):
            got = cell_scores(t.loc[i, f"{h}_fold1"])
            assert len(got) == len(span_texts[i]) and np.allclose(got, scores[i, : len(got), j], atol=6e-4)
    model = request.getfixturevalue(student)
    bad = tmp_path / "bad.csv"  # a cell that is not a text's character scores: one line, before training
    t.assign(**{f"{heads[0]}_fold1": t[f"{heads[0]}_fold1"].where(t.index != rows[0], "0.5")}).to_csv(bad, index=False)
    pseudo_info_path(bad).write_text(pseudo_info_path(out).read_text())
    with pytest.raises(DataError, match=f"bad.csv: column '{heads[0]}_fold1', row {rows[0] + 2}: .*character scores"):
        run_cv(cfg_for(data / "train.csv", tmp_path / "x", model, competition=slug, max_steps=1, distil_csv=str(bad)))
    n = len(span_texts[rows[1]])  # scores of another version of the text: refused on reading, naming the row
    t.assign(**{f"{heads[-1]}_fold1": t[f"{heads[-1]}_fold1"].where(t.index != rows[1], f"{n + 1}|")}).to_csv(
        bad, index=False)
    with pytest.raises(DataError, match=f"bad.csv: column '{heads[-1]}_fold1', row {rows[1] + 2}: character scores "
                                        f"of {n + 1} characters for a text of {n}"):
        run_cv(cfg_for(data / "train.csv", tmp_path / "y", model, competition=slug, max_steps=1, distil_csv=str(bad)))
    m = run_cv(cfg_for(data / "train.csv", tmp_path / "student", model, competition=slug,
                       max_steps=2, max_len=24, distil_csv=str(out), distil_weight=0.5, distil_temperature=2.0))
    assert np.isfinite(m["cv"]) and m["teachers"][0]["run"] == "teacher"
    # weight 0 is the plain run exactly (the one-hot labels as distributions); weight 0.5 moves it
    for name, kw in (("alone", {}), ("nothing", {"distil_csv": str(out), "distil_weight": 0.0})):
        run_cv(cfg_for(data / "train.csv", tmp_path / name, model, competition=slug, max_steps=2, max_len=24, **kw))
    alone, nothing, student_scores = (predict_folds(tmp_path / r, texts, progress=False)[0]
                                      for r in ("alone", "nothing", "student"))
    assert np.allclose(alone, nothing, atol=1e-5) and not np.allclose(alone, student_scores, atol=1e-3)


def test_classes_answered_top_k_get_pseudo_labels_and_a_student(tmp_path, tiny_bert):
    """A classifier whose submission ranks its classes (MAP 2025's joined answers) is a classifier to
    the teachers' signal: pseudo-labels of other texts and a student of the training rows, both made."""
    from helpers import init, map_folder

    data = map_folder(tmp_path / "map", n=48)
    desc = init(data)
    kw = dict(competition=desc, max_steps=2, max_len=16)
    run_cv(cfg_for(data / "train.csv", tmp_path / "teacher", tiny_bert, **kw))
    args = ["--runs", str(tmp_path / "teacher"), "--train-csv", str(data / "train.csv"), "--no-progress"]
    assert pseudo.main([*args, "--texts", str(data / "test.csv"), "--out", str(tmp_path / "p.csv")]) == 0
    assert pseudo.main([*args, "--training-rows", "--out", str(tmp_path / "t.csv")]) == 0
    t = pd.read_csv(tmp_path / "t.csv", keep_default_na=False, na_values=[""])
    probs = [c for c in t.columns if c.startswith("prob_") and c.endswith("_fold0") and "_std_" not in c]
    assert "prob_False_Misconception:Incomplete_fold0" in probs
    assert np.allclose(t[probs].dropna().sum(axis=1), 1, atol=1e-4)
    m = run_cv(cfg_for(data / "train.csv", tmp_path / "student", tiny_bert, distil_csv=str(tmp_path / "t.csv"),
                       pseudo_csv=str(tmp_path / "p.csv"), **kw))
    assert np.isfinite(m["cv"]) and m["teachers"][0]["run"] == "teacher"


def test_a_span_student_learns_from_unlabelled_texts_character_scores(tmp_path, tiny_bert):
    """Tweets without a label: fold k's teacher's character scores of them (utils.pseudo --texts) are
    the student's whole target there (--pseudo-csv), beside its labelled rows; --max-std refused."""
    from helpers import tiny_data, tweet_table

    from utils.spans import cell_scores

    slug = "tweet-sentiment-extraction"
    data = tiny_data(slug, tmp_path / "d", 24)
    kw = dict(competition=slug, max_steps=2, max_len=24)
    run_cv(cfg_for(data / "train.csv", tmp_path / "teacher", tiny_bert, **kw))
    extra = tweet_table(12, seed=5).drop(columns="selected_text")
    extra["textID"] = [f"x{i}" for i in range(len(extra))]
    write_csv(extra, tmp_path / "extra.csv")
    args = ["--runs", str(tmp_path / "teacher"), "--train-csv", str(data / "train.csv"), "--texts",
            str(tmp_path / "extra.csv"), "--no-progress"]
    assert pseudo.main([*args, "--out", str(tmp_path / "p.csv")]) == 0
    p = pd.read_csv(tmp_path / "p.csv", dtype=str, keep_default_na=False)
    for i, text in enumerate(p["text"]):
        assert all(len(cell_scores(p.loc[i, f"{h}_fold{k}"])) == len(text) for h in ("start", "end") for k in (0, 1))
    assert pseudo.main([*args, "--runs", str(tmp_path / "teacher"), "--max-std", "0.1", "--out",
                        str(tmp_path / "q.csv")]) == 2
    m = run_cv(cfg_for(data / "train.csv", tmp_path / "student", tiny_bert, pseudo_csv=str(tmp_path / "p.csv"), **kw))
    run_cv(cfg_for(data / "train.csv", tmp_path / "alone", tiny_bert, **kw))
    from utils.competition import load_competition
    from utils.predict import predict_folds

    texts = load_competition(slug).input_texts(extra)
    student, alone = (predict_folds(tmp_path / r, texts, progress=False)[0] for r in ("student", "alone"))
    assert np.isfinite(m["cv"]) and not np.allclose(student, alone, atol=1e-4)
