"""Each built-in competition end to end on tiny data of its real shape: training with
--competition (the run records it; checkpoints and CV in its metric; the decision rule fitted on
the out-of-fold predictions and saved), prediction with no column or task flag (the sample
submission's columns and row order, labels by the saved rule, values clipped), ensembling per
target and on probabilities."""

import json

import numpy as np
import pandas as pd
import pytest
from helpers import assert_one_line_error, cfg_for, tiny_data

from utils import ensemble, predict
from utils.competition import BUILTIN, load_competition
from utils.metrics import apply_rule, get_metric
from utils.objective import objective_of
from utils.shapes import shape_of
from utils.tables import read_catalogue, read_table
from utils.train import run_cv


def train_on(slug, folder, tiny_bert, name="run", n=24, **kw):
    data = tiny_data(slug, folder, n)
    comp = load_competition(slug)
    sample = pd.read_csv(data / comp.sample_submission)
    # Kaggle's sample submission need not follow test.csv's order: the submission follows it.
    sample.iloc[::-1].to_csv(data / comp.sample_submission, index=False)
    cfg = cfg_for(data / comp.train_file, folder / name, tiny_bert, competition=slug, max_steps=2,
                  max_len=32, **kw)
    return data, comp, run_cv(cfg)


def two_runs(slug, folder, tiny_bert):
    """Attention and mean pooling runs of a competition on the same folds."""
    data, comp, _ = train_on(slug, folder, tiny_bert, "a", seed=1)
    run_cv(cfg_for(data / comp.train_file, folder / "b", tiny_bert, competition=slug, max_steps=2,
                   max_len=32, pooling="mean"))
    return data, comp, [folder / "a", folder / "b"]


@pytest.mark.parametrize("slug", [s for s in BUILTIN if s != "commonlitreadabilityprize"])
def test_each_competition_trains_predicts_and_submits_as_its_sample(slug, tmp_path, tiny_bert, capsys):
    data, comp, metrics = train_on(slug, tmp_path / "d", tiny_bert)
    run = tmp_path / "d" / "run"
    metric = get_metric(comp.metric_name)
    # The run records its competition and reports its metric, per fold and over the folds.
    assert metrics["competition"] == comp.to_dict() and metrics["metric"] == metric.name
    assert set(metrics["fold_score"]) == {0, 1} and np.isfinite(metrics["cv"])
    assert f"valid {metric.name}" in capsys.readouterr().out
    saved = json.loads((run / "fold0" / "kit_config.json").read_text())
    assert saved["competition"]["slug"] == slug
    if metric.rule:  # F1's threshold, kappa's cut points: fitted on the OOF rows, saved
        assert metrics["rule"] and set(map(int, metrics["rules_per_fold"])) == {0, 1}
    if comp.folds == "group":  # no prompt in two folds
        folds = pd.read_csv(run / "folds.csv", dtype={"id": str}).set_index("id")["fold"]
        train = read_table(comp, data, "train").set_index(comp.id_col)
        assert (train.groupby(comp.group_col).apply(lambda g: folds[g.index].nunique()) == 1).all()

    out = tmp_path / "submission.csv"
    assert predict.main(["--test-csv", str(data / comp.test_file), "--runs", str(run), "--out", str(out)]) == 0
    sample = pd.read_csv(data / comp.sample_submission, dtype={comp.id_col: str})
    sub = pd.read_csv(out, dtype={comp.id_col: str})
    assert list(sub.columns) == list(sample.columns)
    assert sub[comp.id_col].tolist() == sample[comp.id_col].tolist()  # the sample's order
    test = read_table(comp, data, "test")
    items = read_catalogue(comp, data) if comp.catalogue else None
    kw = {"items": items["text"].tolist()} if comp.catalogue else {}
    raw = predict.predict([run], shape_of(comp).inputs(comp, test), progress=False, **kw)
    if comp.task == "spans":  # each test text's answer, decoded from the runs' character scores
        from utils.spans import decode

        obj, t = objective_of(comp), (metrics.get("rule") or {}).get("threshold", 0.5)
        texts = test[comp.span_col].tolist()
        expect = dict(zip(test[comp.id_col], [obj.cell(obj.written(x, decode(x, r[: len(x)], t)))
                                              for x, r in zip(texts, raw)]))
        assert raw.shape == (len(test), max(map(len, texts)), obj.heads)
        assert sub[comp.target_cols[0]].fillna("").tolist() == [expect[i] for i in sub[comp.id_col]]
        return
    raw = pd.DataFrame(np.asarray(raw).reshape(len(test), -1), index=test[comp.id_col]).loc[sub[comp.id_col]]
    if comp.ranking:  # the top answer_k candidates of the runs' scores, best first
        names = np.array(items["id"] if comp.catalogue else comp.options)
        expect = [" ".join(names[np.argsort(-r, kind="stable")[: comp.answer_k]]) for r in raw.to_numpy()]
        assert sub[comp.answer_column].tolist() == expect
        assert all(len(a.split()) == comp.answer_k for a in sub[comp.answer_column])
    elif comp.submission_kind == "labels":
        rule = metrics.get("rule")
        expect = apply_rule(rule, raw.to_numpy())
        if comp.model_task == "classification":
            assert set(sub[comp.target_cols[0]]) <= {0, 1}
        else:  # integer scores in the declared range
            expect = np.clip(expect, *comp.target_range)
            assert sub[comp.target_cols[0]].between(*comp.target_range).all()
        assert sub[comp.target_cols[0]].tolist() == expect.astype(int).tolist()
    else:
        lo, hi = comp.target_range or (-np.inf, np.inf)
        assert np.allclose(sub[list(comp.target_cols)].to_numpy(), np.clip(raw.to_numpy(), lo, hi), atol=1e-6)


def test_multi_target_runs_blend_per_target(tmp_path, tiny_bert):
    slug = "feedback-prize-english-language-learning"
    data, comp, runs = two_runs(slug, tmp_path / "d", tiny_bert)
    report = ensemble.blend_report(runs)
    w = np.asarray(report["weights"])
    assert report["metric"] == "mcrmse" and w.shape == (2, 6) and np.allclose(w.sum(0), 1)
    m = ensemble.load_members(runs)
    assert report["score_blend_in_sample"] == pytest.approx(
        get_metric("mcrmse").score(m["y"], ensemble.blend(m["P"], w)))
    ensemble.save_blend(tmp_path / "blend.json", report)
    out = tmp_path / "s.csv"
    assert predict.main(["--test-csv", str(data / "test.csv"), "--runs", *map(str, runs),
                         "--blend", str(tmp_path / "blend.json"), "--out", str(out)]) == 0
    texts = comp.input_texts(read_table(comp, data, "test"))
    a, b = (predict.predict_run(r, texts, progress=False) for r in runs)
    sub = pd.read_csv(out, dtype={"text_id": str}).set_index("text_id")
    test_ids = read_table(comp, data, "test")["text_id"]
    expect = np.clip(w[0] * a + w[1] * b, 1.0, 5.0)
    assert np.allclose(sub.loc[test_ids, list(comp.target_cols)].to_numpy(), expect, atol=1e-6)


def test_classification_runs_blend_their_probabilities_and_predict_with_the_blends_threshold(tmp_path, tiny_bert):
    slug = "nlp-getting-started"
    data, comp, runs = two_runs(slug, tmp_path / "d", tiny_bert)
    report = ensemble.blend_report(runs)
    assert report["metric"] == "f1" and len(report["weights"]) == 2 and "threshold" in report["rule"]
    m = ensemble.load_members(runs)
    assert m["P"].shape[2] == 2 and np.allclose(m["P"].sum(2), 1)  # probabilities, not labels
    ensemble.save_blend(tmp_path / "blend.json", report)
    out = tmp_path / "s.csv"
    assert predict.main(["--test-csv", str(data / "test.csv"), "--runs", *map(str, runs),
                         "--blend", str(tmp_path / "blend.json"), "--out", str(out)]) == 0
    test = read_table(comp, data, "test")
    a, b = (predict.predict_run(r, comp.input_texts(test), progress=False) for r in runs)
    w = report["weights"]
    expect = ((w[0] * a + w[1] * b)[:, 1] >= report["rule"]["threshold"]).astype(int)
    sub = pd.read_csv(out, dtype={"id": str}).set_index("id")
    assert sub.loc[test["id"], "target"].tolist() == expect.tolist()


def test_a_sample_submission_that_disagrees_is_one_line_and_nothing_is_written(tmp_path, tiny_bert, capsys):
    slug = "feedback-prize-english-language-learning"
    data, comp, _ = train_on(slug, tmp_path / "d", tiny_bert)
    run, out = tmp_path / "d" / "run", tmp_path / "s.csv"
    argv = ["--test-csv", str(data / "test.csv"), "--runs", str(run), "--out", str(out)]
    sample = pd.read_csv(data / "sample_submission.csv")
    sample.drop(columns="grammar").to_csv(data / "sample_submission.csv", index=False)
    assert predict.main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "sample_submission.csv has columns", "'grammar'")
    sample.assign(text_id=["t0", "t1", "zz"]).to_csv(data / "sample_submission.csv", index=False)
    assert predict.main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "sample_submission.csv's ids differ", "zz")
    sample.to_csv(data / "sample_submission.csv", index=False)
    pd.read_csv(data / "test.csv").drop(columns="full_text").to_csv(data / "test.csv", index=False)
    assert predict.main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "test.csv is missing column 'full_text'")
    assert not out.exists()


def test_bad_training_input_names_the_file_column_and_rows(tmp_path, tiny_bert, capsys):
    from utils.train import main

    slug = "feedback-prize-english-language-learning"
    data = tiny_data(slug, tmp_path / "d", 24)
    train = pd.read_csv(data / "train.csv")
    train.loc[3, "syntax"] = 5.5  # above the declared range [1, 5]
    train.to_csv(data / "train.csv", index=False)
    argv = ["--train-csv", str(data / "train.csv"), "--out", str(tmp_path / "r"), "--model", tiny_bert,
            "--competition", slug, "--folds", "2"]
    assert main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "train.csv: column 'syntax' is outside the declared "
                          "target_range [1, 5] at row 5 (id 000003)")
    assert main(argv + ["--text-col", "essay"]) == 2
    assert_one_line_error(capsys.readouterr().err, "--text-col comes from the competition")
    assert not (tmp_path / "r" / "fold0").exists()


@pytest.mark.parametrize("slug", ["feedback-prize-english-language-learning", "nlp-getting-started"])
def test_pseudo_labels_per_target_and_per_class_probability_train_a_student(slug, tmp_path, tiny_bert, capsys):
    """Teachers of six scores label every score; teachers of a classifier label each class's
    probability (soft labels). Fold k's columns come from the teachers' fold-k models only, and
    a student of the same competition trains on them."""
    from utils import pseudo
    from utils.ensemble import blend

    data, comp, runs = two_runs(slug, tmp_path / "d", tiny_bert)
    ensemble.save_blend(tmp_path / "blend.json", ensemble.blend_report(runs))
    texts = data / "texts.csv"
    test = pd.read_csv(data / comp.test_file)
    col = comp.text_cols[-1]  # texts the training data does not hold
    test.assign(**{comp.id_col: [f"x{i}" for i in range(len(test))],
                   col: [f"{t} Unseen sentence number {i}." for i, t in enumerate(test[col])]}).to_csv(
        texts, index=False
    )
    out = tmp_path / "pseudo.csv"
    argv = ["--runs", *map(str, runs), "--texts", str(texts), "--train-csv", str(data / comp.train_file),
            "--blend", str(tmp_path / "blend.json"), "--out", str(out), "--no-progress"]
    assert pseudo.main(argv) == 0
    p = pd.read_csv(out, dtype={comp.id_col: str})
    info = json.loads(out.with_suffix(".json").read_text())
    names = info["outputs"]
    if comp.model_task == "classification":
        assert names == ["prob_0", "prob_1"]
        assert np.allclose(p[["prob_0_fold0", "prob_1_fold0"]].sum(axis=1), 1, atol=1e-6)
    else:
        assert names == list(comp.target_cols)
    from utils.tables import read_split

    read = read_split(comp, texts, "test").set_index(comp.id_col).loc[p[comp.id_col]].reset_index()
    per_run = [predict.predict_folds(r, comp.input_texts(read), progress=False) for r in runs]
    blend_json = json.loads((tmp_path / "blend.json").read_text())
    for k in (0, 1):
        fold_k = np.stack([pr[k] for pr in per_run], axis=1)
        expect = blend(fold_k, blend_json["weights_per_fold"][str(k)])
        assert np.allclose(p[[f"{o}_fold{k}" for o in names]].to_numpy(), expect, atol=1e-6)
    student = run_cv(cfg_for(data / comp.train_file, tmp_path / "d" / "student", tiny_bert, competition=slug,
                             max_steps=2, max_len=32, pseudo_csv=str(out), pseudo_weight=0.5))
    history = json.loads((tmp_path / "d" / "student" / "fold0" / "history.json").read_text())
    assert history["n_pseudo"] == len(p) and np.isfinite(student["cv"])


def test_a_pseudo_file_of_an_unseen_class_is_refused_in_one_line(tmp_path, tiny_bert, capsys):
    from utils.train import main

    slug = "nlp-getting-started"
    data, comp, _ = train_on(slug, tmp_path / "d", tiny_bert)
    bad = pd.DataFrame({"id": ["p0", "p1"], "keyword": "", "text": ["a fire", "calm"],
                        "prob_0": [0.5, 0.2], "prob_1": [0.3, 0.3], "prob_2": [0.2, 0.5]})
    bad.to_csv(tmp_path / "p.csv", index=False)
    argv = ["--train-csv", str(data / "train.csv"), "--out", str(tmp_path / "s"), "--model", tiny_bert,
            "--competition", slug, "--folds", "2", "--max-steps", "1", "--pseudo-csv", str(tmp_path / "p.csv")]
    assert main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "p.csv has columns prob_2", "outputs are prob_0, prob_1")
    bad.drop(columns="prob_2").assign(prob_1=[0.3, 1.7]).to_csv(tmp_path / "p.csv", index=False)
    assert main(argv) == 2
    assert_one_line_error(
        capsys.readouterr().err, "p.csv: column 'prob_1' is not a probability in [0, 1] at row 3 (id p1)"
    )
    assert not (tmp_path / "s" / "fold0").exists()


def test_what_a_submission_holds_follows_the_description():
    """Probabilities (P(class 1) for one binary target, one column per class otherwise), labels by
    the rule, values clipped to the range; a submission kind the task cannot make is refused."""
    import dataclasses

    from utils.competition import CompetitionError

    test = pd.DataFrame({"id": ["a", "b", "c"]})
    probs = np.array([[0.9, 0.1], [0.4, 0.6], [0.7, 0.3]])
    binary = dataclasses.replace(load_competition("nlp-getting-started"), submission="probabilities")
    spec = {"target_names": ["0", "1"]}
    assert predict.submission_frame(binary, test, probs, spec)["target"].tolist() == [0.1, 0.6, 0.3]
    labels = predict.submission_frame(load_competition("nlp-getting-started"), test, probs, spec, {"threshold": 0.25})
    assert labels["target"].tolist() == [0, 1, 1]
    three = dataclasses.replace(binary, task="multiclass", metric="log_loss")
    spec3 = {"target_names": ["low", "mid", "high"]}
    p3 = np.array([[0.2, 0.5, 0.3]] * 3)
    assert list(predict.submission_frame(three, test, p3, spec3).columns) == ["id", "low", "mid", "high"]
    ell = load_competition("feedback-prize-english-language-learning")
    values = predict.submission_frame(ell, test.rename(columns={"id": "text_id"}), np.full((3, 6), 5.7))
    assert (values.drop(columns="text_id").to_numpy() == 5.0).all()  # clipped to the range
    with pytest.raises(
        CompetitionError, match="field 'submission': a regression model's submission holds values or labels"
    ):
        dataclasses.replace(load_competition(""), submission="probabilities")
