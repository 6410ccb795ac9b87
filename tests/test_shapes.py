"""Competition shapes beyond the built-ins, end to end from `init` on small real-shaped files:
several 0/1 labels (Jigsaw), classes in the sample submission's order (Feedback Prize
Effectiveness), string binary labels, labels read as floats, a metric of the user's own, several
training tables (Evaluate Student Summaries), several short text columns (US Patent)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import (
    LABELS,
    METRIC_PY,
    assert_one_line_error,
    cfg_for,
    effectiveness,
    init,
    jigsaw,
    tiny_data,
)

from utils import ensemble, predict, runs
from utils.competition import SEP, CompetitionError, load_competition, with_separator
from utils.infer import infer
from utils.infer import main as init_main
from utils.metrics import METRICS
from utils.tables import read_table
from utils.train import main as train_main
from utils.train import run_cv

ROOT = Path(__file__).resolve().parents[1]


def train(data: Path, comp: str, out: Path, model: str, **kw) -> dict:
    return run_cv(cfg_for(data / "train.csv", out, model, competition=comp, max_steps=2, max_len=32, **kw))


def submit(data: Path, run_list, out: Path, *extra) -> pd.DataFrame:
    argv = ["--test-csv", str(data / "test.csv"), "--runs", *map(str, run_list), "--out", str(out), *extra]
    assert predict.main(argv) == 0
    return pd.read_csv(out, dtype=str)


# ----------------------------------------------------------------------------- several 0/1 labels


def test_multilabel_from_init_to_a_blended_submission_as_the_sample(tmp_path, tiny_bert, capsys):
    data = jigsaw(tmp_path / "jigsaw")
    path = init(data)
    comp = load_competition(path)
    assert comp.task == "multilabel" and comp.metric_name == "roc_auc" and comp.submission_kind == "probabilities"
    assert "task multilabel" in capsys.readouterr().out
    metrics = train(data, path, tmp_path / "a", tiny_bert)
    train(data, path, tmp_path / "b", tiny_bert, pooling="mean")
    assert metrics["metric"] == "roc_auc" and 0 <= metrics["cv"] <= 1
    oof = runs.read_oof(tmp_path / "a")
    assert oof.preds == tuple(f"prob_{c}" for c in LABELS) and oof.outputs == tuple(LABELS)
    truth, prob = oof.arrays()
    assert truth.shape == prob.shape == (24, 6) and ((prob > 0) & (prob < 1)).all()
    # Each label's probability is its own sigmoid: they do not sum to one across labels.
    assert not np.allclose(prob.sum(1), 1)
    from sklearn.metrics import roc_auc_score

    expect = np.mean([roc_auc_score(truth[:, j], prob[:, j]) for j in range(6)])
    assert metrics["cv"] == pytest.approx(expect)
    # Blend on the OOF (log-loss per label), then the submission as the sample shows it.
    assert ensemble.main(
        ["--runs", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "blend.json")]
    ) == 0
    sub = submit(data, [tmp_path / "a", tmp_path / "b"], tmp_path / "sub.csv", "--blend", str(tmp_path / "blend.json"))
    sample = pd.read_csv(data / "sample_submission.csv", dtype=str)
    assert list(sub.columns) == list(sample.columns) and sub["id"].tolist() == sample["id"].tolist()
    values = sub[LABELS].astype(float).to_numpy()
    assert ((values > 0) & (values < 1)).all()


def test_multilabel_refuses_a_label_that_is_not_0_or_1(tmp_path, tiny_bert, capsys):
    data = jigsaw(tmp_path / "jigsaw")
    path = init(data)
    df = pd.read_csv(data / "train.csv")
    df.loc[3, "threat"] = 2
    df.to_csv(data / "train.csv", index=False)
    argv = ["--train-csv", str(data / "train.csv"), "--out", str(tmp_path / "r"), "--model", tiny_bert,
            "--competition", path, "--max-steps", "1"]
    assert train_main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "'threat'", "not 0 or 1", "row")
    assert not (tmp_path / "r" / "fold0").exists()


# ----------------------------------------------------------------------------- class order


def test_classes_follow_the_sample_submissions_order(tmp_path, tiny_bert):
    data = effectiveness(tmp_path / "fpe")
    path = init(data, metric="log_loss")
    comp = load_competition(path)
    assert comp.classes == ("Ineffective", "Adequate", "Effective") and comp.submission_kind == "probabilities"
    assert comp.target_cols == ("discourse_effectiveness",) and comp.text_cols == ("discourse_text",)
    assert comp.folds == "group" and comp.group_col == "essay_id"  # the essays' parts never cross folds
    train(data, path, tmp_path / "run", tiny_bert, folds=3)
    assert runs.read_oof(tmp_path / "run").outputs == comp.classes
    spec = json.loads((tmp_path / "run" / "fold0" / "kit_config.json").read_text())
    assert spec["model"]["target_names"] == list(comp.classes)
    folds = pd.read_csv(tmp_path / "run" / "folds.csv", dtype=str).set_index("id")["fold"]
    essays = read_table(comp, data).set_index("discourse_id")["essay_id"]
    assert (folds.groupby(essays[folds.index].to_numpy()).nunique() == 1).all()
    sub = submit(data, [tmp_path / "run"], tmp_path / "sub.csv")
    assert list(sub.columns) == ["discourse_id", "Ineffective", "Adequate", "Effective"]
    assert np.allclose(sub.iloc[:, 1:].astype(float).sum(axis=1), 1)
    # The probabilities are the model's, column by class name: the first class's column holds
    # P(Ineffective), whatever the alphabet says.
    test = read_table(comp, data, "test").set_index("discourse_id").loc[sub["discourse_id"]]
    raw = predict.predict([tmp_path / "run"], comp.input_texts(test), progress=False)
    assert np.allclose(sub.iloc[:, 1:].astype(float).to_numpy(), raw, atol=1e-6)


def test_a_label_outside_the_declared_classes_is_refused(tmp_path, tiny_bert, capsys):
    data = effectiveness(tmp_path / "fpe")
    path = init(data, classes=["Ineffective", "Adequate", "Great"])
    argv = ["--train-csv", str(data / "train.csv"), "--out", str(tmp_path / "r"), "--model", tiny_bert,
            "--competition", path, "--max-steps", "1"]
    assert train_main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "'discourse_effectiveness'", "'Effective'", "classes")


# ----------------------------------------------------------------------------- binary labels


def tweets_with(folder: Path, labels) -> Path:
    data = tiny_data("nlp-getting-started", folder, 24)
    df = pd.read_csv(data / "train.csv")
    df["target"] = [labels[v] for v in df["target"]]
    df.to_csv(data / "train.csv", index=False)
    return data


def test_string_binary_labels_need_the_positive_class_said(tmp_path, tiny_bert, capsys):
    data = tweets_with(tmp_path / "t", {0: "not_disaster", 1: "disaster"})
    silent = dict(slug="x", id_col="id", text_cols=["text"], target_cols=["target"], task="binary")
    (tmp_path / "c.json").write_text(json.dumps(silent))
    argv = ["--train-csv", str(data / "train.csv"), "--out", str(tmp_path / "r"), "--model", tiny_bert,
            "--competition", str(tmp_path / "c.json"), "--max-steps", "1"]
    assert train_main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "'target'", "classes", "positive")
    # Said: F1 is scored on `disaster`, and the submission writes the labels as the file does.
    (tmp_path / "c.json").write_text(json.dumps({**silent, "classes": ["not_disaster", "disaster"]}))
    metrics = train(data, str(tmp_path / "c.json"), tmp_path / "run", tiny_bert)
    oof = runs.read_oof(tmp_path / "run").frame
    assert [c for c in oof.columns if c.startswith("prob_")] == ["prob_not_disaster", "prob_disaster"]
    from utils.metrics import get_metric

    y = (oof["target"] == "disaster").astype(int).to_numpy()  # F1 of the class the description says
    probs = oof[["prob_not_disaster", "prob_disaster"]].to_numpy()
    assert metrics["metric"] == "f1"
    assert metrics["cv"] == pytest.approx(get_metric("f1").honest_score(y, probs, oof["fold"].to_numpy())[0])
    sub = submit(data, [tmp_path / "run"], tmp_path / "sub.csv")
    assert set(sub["target"]) <= {"disaster", "not_disaster"}


def test_binary_labels_read_as_floats_are_written_as_the_sample_writes_them(tmp_path, tiny_bert):
    data = tweets_with(tmp_path / "t", {0: 0.0, 1: 1.0})
    df = pd.read_csv(data / "train.csv")
    df.astype({"target": float}).to_csv(data / "train.csv", index=False, float_format="%.1f")
    assert "1.0" in (data / "train.csv").read_text()
    train(data, "nlp-getting-started", tmp_path / "run", tiny_bert)
    sub = submit(data, [tmp_path / "run"], tmp_path / "sub.csv")
    assert set(sub["target"]) <= {"0", "1"}


def test_a_binary_file_with_one_class_is_refused_before_any_fold(tmp_path, tiny_bert, capsys):
    data = tweets_with(tmp_path / "t", {0: 1, 1: 1})
    argv = ["--train-csv", str(data / "train.csv"), "--out", str(tmp_path / "r"), "--model", tiny_bert,
            "--competition", "nlp-getting-started", "--max-steps", "1"]
    assert train_main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "one class")
    assert not (tmp_path / "r" / "fold0").exists()


# ----------------------------------------------------------------------------- a metric of one's own


def test_a_metric_of_ones_own_trains_blends_predicts_and_travels_in_the_description(tmp_path, tiny_bert, capsys):
    data = tiny_data("commonlitreadabilityprize", tmp_path / "cl", 24)
    (data / "my_metric.py").write_text(METRIC_PY)
    path = init(data, metric="mae_first", metric_file="my_metric.py")
    comp = load_competition(path)
    assert comp.metric_name == "mae_first" and "_mae_of_first" in comp.metric_code
    metrics = train(data, path, tmp_path / "a", tiny_bert)
    train(data, path, tmp_path / "b", tiny_bert, pooling="mean")
    assert metrics["metric"] == "mae_first" and "valid mae_first" in capsys.readouterr().out
    oof = runs.read_oof(tmp_path / "a").frame
    assert metrics["cv"] == pytest.approx(float(np.mean(np.abs(oof["target"] - oof["pred"]))))
    assert ensemble.main(
        ["--runs", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "blend.json")]
    ) == 0
    assert json.loads((tmp_path / "blend.json").read_text())["metric"] == "mae_first"
    # A fresh process that never read my_metric.py (a Kaggle kernel with the code dataset) gets the
    # metric from the run's recorded description, and from the description passed as a parameter.
    (data / "my_metric.py").unlink()
    code = ("import sys; from utils import predict; from utils.competition import load_competition;"
            "from utils.metrics import METRICS; c = load_competition(sys.argv[1]);"
            "assert METRICS[c.metric].title == 'MAE';"
            "sys.exit(predict.main(['--test-csv', sys.argv[2], '--runs', sys.argv[3], sys.argv[4],"
            "'--blend', sys.argv[5], '--out', sys.argv[6]]))")
    r = subprocess.run([sys.executable, "-c", code, comp.as_parameter(), str(data / "test.csv"), str(tmp_path / "a"),
                        str(tmp_path / "b"), str(tmp_path / "blend.json"), str(tmp_path / "sub.csv")],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert list(pd.read_csv(tmp_path / "sub.csv").columns) == ["id", "target"]
    METRICS.pop("mae_first", None)


@pytest.mark.parametrize("code, message", [
    ("x = 1", "defines no Metric named 'mine'"),
    ("raise RuntimeError('boom')", "cannot be run: RuntimeError: boom"),
    ("from utils.metrics import Metric\nM = Metric('mine', len, True, 'scores')", "needs is values"),
    ("from utils.metrics import Metric\nM = Metric('rmse', len, True, 'values')", None),
])
def test_a_broken_metric_file_is_one_line_naming_it(tmp_path, code, message):
    (tmp_path / "m.py").write_text(code)
    name = "rmse" if message is None else "mine"
    (tmp_path / "c.json").write_text(json.dumps({"slug": "x", "metric": name, "metric_file": "m.py"}))
    with pytest.raises(CompetitionError) as e:
        load_competition(str(tmp_path / "c.json"))
    assert "m.py" in str(e.value) and "\n" not in str(e.value)
    assert (message or "built-in metric") in str(e.value)


# ----------------------------------------------------------------------------- inputs and init


@pytest.mark.versions  # each tokenizer's own separator token, as transformers loads it
def test_several_short_columns_join_with_each_backbones_own_separator(tmp_path, tiny_bert, tiny_roberta):
    data = tmp_path / "patent"
    data.mkdir()
    train = pd.DataFrame({"id": [f"{i:016x}" for i in range(40)],
                          "anchor": [f"abatement {i // 4}" for i in range(40)],
                          "target": [f"noise reduction {i}" for i in range(40)],
                          "context": ["A47", "F16"] * 20, "score": [0, 0.25, 0.5, 0.75, 1.0] * 8})
    train.to_csv(data / "train.csv", index=False)
    train.drop(columns="score").head(3).to_csv(data / "test.csv", index=False)
    train[["id", "score"]].head(3).to_csv(data / "sample_submission.csv", index=False)
    comp, why = infer(data)
    assert comp.text_cols == ("anchor", "target", "context") and comp.target_range == (0.0, 1.0)
    assert comp.folds == "group" and comp.group_col == "anchor"
    assert any("grouped by 'anchor'" in w for w in why) and any("short phrase" in w for w in why)
    texts = comp.input_texts(read_table(comp, data))
    assert texts[0] == f"abatement 0{SEP}noise reduction 0{SEP}A47"
    from transformers import AutoTokenizer

    for model, token in ((tiny_bert, "[SEP]"), (tiny_roberta, "</s>")):
        tok = AutoTokenizer.from_pretrained(model)
        (joined,) = with_separator(texts[:1], tok)
        assert joined == f"abatement 0 {token} noise reduction 0 {token} A47"
        ids = tok(joined)["input_ids"]
        assert ids.count(tok.sep_token_id) == 3  # two between the columns + the closing one
    # A template places the separator where the user writes {sep}.
    from dataclasses import replace

    t = replace(comp, text_template="{context}: {anchor}{sep}{target}")
    assert t.input_texts(read_table(t, data))[0] == f"A47: abatement 0{SEP}noise reduction 0"
    with pytest.raises(CompetitionError, match="text_template"):
        replace(comp, text_template="{sep}")


def test_init_takes_the_table_the_sample_submission_names_and_proposes_its_joins(tmp_path):
    data = tiny_data("commonlit-evaluate-student-summaries", tmp_path / "ess", 24)
    comp, why = infer(data)
    assert comp.train_file == "summaries_train.csv" and comp.test_file == "summaries_test.csv"
    assert comp.train_joins == (("prompts_train.csv", "prompt_id"),)
    assert comp.test_joins == (("prompts_test.csv", "prompt_id"),)
    assert comp.target_cols == ("content", "wording") and comp.task == "multi_regression"
    assert len(read_table(comp, data)) == 24 and len(read_table(comp, data, "test")) == 3


def test_init_refuses_a_header_only_train_file(tmp_path, capsys):
    data = tiny_data("nlp-getting-started", tmp_path / "t")
    pd.read_csv(data / "train.csv").head(0).to_csv(data / "train.csv", index=False)
    assert init_main(["--data", str(data), "--out", str(tmp_path / "c.json")]) == 2
    assert_one_line_error(capsys.readouterr().err, "train.csv", "no data rows")
    assert not (tmp_path / "c.json").exists()


@pytest.mark.parametrize("fields, message", [
    ({"id_col": ""}, "field 'id_col'"),
    ({"target_range": ["a", "b"]}, "field 'target_range'"),
    ({"target_range": [0, "1"]}, "field 'target_range'"),
    ({"task": "multilabel", "target_cols": ["a"]}, "field 'task'"),
    ({"task": "binary", "classes": ["a", "b", "c"]}, "field 'classes'"),
    ({"task": "regression", "classes": ["a", "b"]}, "field 'classes'"),
    ({"task": "multilabel", "target_cols": ["a", "b"], "metric": "rmse"}, "field 'metric'"),
])
def test_a_broken_field_is_one_line_not_a_traceback(tmp_path, fields, message):
    (tmp_path / "c.json").write_text(json.dumps({"slug": "x", **fields}))
    with pytest.raises(CompetitionError) as e:
        load_competition(str(tmp_path / "c.json"))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_column_flag_with_competition_is_refused_even_at_its_default(tmp_path, tiny_bert, capsys):
    data = tiny_data("nlp-getting-started", tmp_path / "t")
    argv = ["--train-csv", str(data / "train.csv"), "--out", str(tmp_path / "r"), "--model", tiny_bert,
            "--competition", "nlp-getting-started", "--text-col", "excerpt"]
    assert train_main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "--text-col", "--competition")


def test_the_reproduce_command_names_no_column_the_competition_gives(tmp_path, tiny_bert):
    data = tmp_path / "p"
    comp = load_competition("commonlit-evaluate-student-summaries")
    data = tiny_data(comp.slug, data, 24)
    metrics = run_cv(cfg_for(data / comp.train_file, tmp_path / "r", tiny_bert, competition=comp.slug,
                             max_steps=1, max_len=32, folds=3))
    command = metrics["command"]
    assert "--competition commonlit-evaluate-student-summaries" in command
    assert "--text-col" not in command and "--target-cols" not in command


def test_multilabel_pseudo_labels_train_a_student(tmp_path, tiny_bert):
    from utils import pseudo

    data = jigsaw(tmp_path / "jigsaw")
    path = init(data)
    train(data, path, tmp_path / "teacher", tiny_bert)
    texts = pd.DataFrame(
        {"id": [f"u{i}" for i in range(6)], "comment_text": [f"unlabelled comment {i}" for i in range(6)]}
    )
    texts.to_csv(tmp_path / "unlabelled.csv", index=False)
    argv = ["--runs", str(tmp_path / "teacher"), "--texts", str(tmp_path / "unlabelled.csv"),
            "--train-csv", str(data / "train.csv"), "--out", str(tmp_path / "pseudo.csv"), "--no-progress"]
    assert pseudo.main(argv) == 0
    labels = pd.read_csv(tmp_path / "pseudo.csv")
    cols = [f"prob_{c}_fold{k}" for k in (0, 1) for c in LABELS]
    assert set(cols) <= set(labels.columns) and labels[cols].stack().between(0, 1).all()
    metrics = train(data, path, tmp_path / "student", tiny_bert, pseudo_csv=str(tmp_path / "pseudo.csv"))
    assert np.isfinite(metrics["cv"])


def test_an_edited_metric_file_is_another_run(tmp_path, tiny_bert, capsys):
    data = tiny_data("commonlitreadabilityprize", tmp_path / "cl", 24)
    (data / "my_metric.py").write_text(METRIC_PY)
    path = init(data, metric="mae_first", metric_file="my_metric.py")
    train(data, path, tmp_path / "run", tiny_bert)
    (data / "my_metric.py").write_text(METRIC_PY.replace("np.abs", "np.square"))
    argv = ["--train-csv", str(data / "train.csv"), "--out", str(tmp_path / "run"), "--model", tiny_bert,
            "--competition", path, "--folds", "2", "--epochs", "2", "--batch-size", "8", "--eval-every", "2",
            "--lr", "1e-3", "--no-progress", "--max-steps", "2", "--max-len", "32"]
    assert train_main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "different arguments", "metric_file")
    METRICS.pop("mae_first", None)


def test_a_shape_settings_default_is_the_runs_stated_once():
    import dataclasses

    from utils.config import SHAPE_SETTINGS, TrainConfig
    from utils.shapes import SHAPES

    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    for kind, keys in SHAPE_SETTINGS.items():
        shape = SHAPES[kind]()
        assert {k: getattr(shape, k) for k in keys} == {k: defaults[k] for k in keys}, kind
