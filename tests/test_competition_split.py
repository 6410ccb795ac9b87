"""The description (utils.competition), its tables (utils.tables) and its inference (utils.infer)
apart, and the objective's kind said, not guessed; with the probes of bad input they answer in
one line: a metric of one's own tried on made-up rows before any training, tuning without Optuna,
two descriptions of one slug, a sample submission's column order and repeated ids, a stub test
file at init, and a class no training row holds."""

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT
from helpers import assert_one_line_error, real_dir

from utils import competition as comp_cli
from utils import eda, runs
from utils.competition import TASKS, Competition, CompetitionError, load_competition
from utils.data import DataError
from utils.infer import infer
from utils.metrics import METRICS
from utils.objective import OBJECTIVES, objective_of
from utils.tables import read_split


@pytest.fixture(autouse=True)
def _forget_my_metric():
    yield
    METRICS.pop("mine", None)  # registered by a description read here: no other test sees it


# ----------------------------------------------------------------------------- the objective's kind


def description(task: str) -> Competition:
    """A description of each task's shape (classes where the task has them)."""
    targets = ("a", "b") if task in ("multi_regression", "multilabel") else ("target",)
    classes = ("neg", "pos") if task == "binary" else ("x", "y", "z") if task == "multiclass" else ()
    ranking = {"retrieval": dict(catalogue=("items.csv", "id", "text"), answer_k=25),
               "multiple_choice": dict(options=("A", "B", "C", "D"), answer_k=3),
               "spans": dict(span_col="text", span_labels="offsets", span_count="many")}.get(task, {})
    return Competition(slug=f"probe-{task}", text_cols=("text",), target_cols=targets, task=task, classes=classes,
                       target_range=(1.0, 6.0) if task == "ordinal" else (), **ranking)


@pytest.mark.parametrize("task", list(TASKS))
def test_each_kind_says_what_its_targets_are_and_eda_reads_it(task):
    comp = description(task)
    obj = objective_of(comp)
    assert {o.name: o.kind for o in OBJECTIVES.values()} == {
        "regression": "values", "classification": "classes", "multilabel": "labels", "multiple_choice": "options",
        "retrieval": "items", "spans": "spans"}
    assert eda.target_kind(comp) == obj.kind and obj.classes == (obj.kind in ("classes", "options"))
    # The made-up rows a metric of one's own is first tried on have the shapes training scores.
    y, pred = obj.sample(comp)
    # A row's outputs: a head's, an option's score each, or a score per catalogue item (the sample's 50)
    n_out = {"options": len(comp.options), "items": 2 * comp.answer_k}.get(
        obj.kind, obj.num_outputs(comp.target_cols, list(comp.classes) or [0, 1, 2]))
    if obj.kind == "spans":  # a row's character scores (characters, heads): (16, C, heads)
        assert pred.shape[::2] == (16, n_out) and np.isfinite(pred).all() and y.shape == (16,)
        return
    assert pred.shape == (16, n_out) and np.isfinite(pred).all()
    assert y.shape == ((16,) if obj.labelled else (16, len(comp.target_cols)))


# ----------------------------------------------------------------------------- a metric of one's own


def metric_json(tmp_path, task: str, body: str, needs: str) -> str:
    """A description of `task` whose metric_file m.py scores with `body` (y, p -> ...)."""
    (tmp_path / "m.py").write_text(
        "import numpy as np\nfrom utils.metrics import Metric\n\n\n"
        f"def _mine(y, p):\n    {body}\n\n\nMETRIC = Metric('mine', _mine, True, {needs!r})\n")
    d = {**description(task).to_dict(), "metric": "mine", "metric_file": "m.py"}
    (tmp_path / "c.json").write_text(json.dumps(d))
    return str(tmp_path / "c.json")


@pytest.mark.parametrize("task, needs, shapes", [
    ("regression", "values", "truth (16, 1), values (16, 1)"),
    ("multi_regression", "values", "truth (16, 2), values (16, 2)"),
    ("ordinal", "labels", "truth (16, 1), labels (16,)"),
    ("binary", "labels", "truth (16,), labels (16,)"),
    ("multiclass", "probabilities", "truth (16,), probabilities (16, 3)"),
    ("multilabel", "probabilities", "truth (16, 2), probabilities (16, 2)"),
])
def test_a_metric_returning_a_string_is_one_line_when_the_description_is_read(task, needs, shapes, tmp_path,
                                                                               capsys):
    path = metric_json(tmp_path, task, "return 'high'", needs)
    with pytest.raises(CompetitionError) as e:
        load_competition(path)
    msg = str(e.value)
    assert "\n" not in msg and "m.py" in msg and "returns 'high' (str)" in msg and shapes in msg, msg
    assert "returns one number" in msg
    assert comp_cli.main(["show", path]) == 2
    assert_one_line_error(capsys.readouterr().err, "m.py", "returns 'high'")


@pytest.mark.parametrize("body, said", [
    ("return 1 / 0", "fails on a sample of 16 ordinary rows"),
    ("return float(np.asarray(p)[:, 5].mean())", "IndexError"),
])
def test_a_metric_that_raises_when_called_names_its_file(body, said, tmp_path):
    with pytest.raises(CompetitionError) as e:
        load_competition(metric_json(tmp_path, "regression", body, "values"))
    assert "m.py" in str(e.value) and said in str(e.value) and "\n" not in str(e.value)


def test_a_metric_raising_at_import_names_its_file(tmp_path):
    (tmp_path / "m.py").write_text("import numpy as np\nraise ImportError('no module named sklearnn')\n")
    (tmp_path / "c.json").write_text(json.dumps({"slug": "x", "metric": "mine", "metric_file": "m.py"}))
    with pytest.raises(CompetitionError, match=r"m\.py cannot be run: ImportError: no module named sklearnn"):
        load_competition(str(tmp_path / "c.json"))


def test_a_metric_returning_nan_on_ordinary_input_is_blamed_on_the_metric_not_the_lr(tmp_path):
    with pytest.raises(CompetitionError) as e:
        load_competition(metric_json(tmp_path, "regression", "return float('nan')", "values"))
    msg = str(e.value)
    assert "m.py" in msg and "returns nan" in msg and "\n" not in msg and "lr" not in msg, msg


@pytest.mark.parametrize("task", list(TASKS))
def test_each_tasks_default_metric_as_ones_own_reads_without_a_word(task, tmp_path):
    # A sound metric is not refused: the sample is ordinary input of every task's shape (both
    # classes of a binary task for F1, integer scores for kappa, each label present for ROC AUC).
    default = METRICS[description(task).metric_name]
    (tmp_path / "m.py").write_text("from dataclasses import replace\nfrom utils.metrics import METRICS\n\n"
                                   f"METRIC = replace(METRICS[{default.name!r}], name='mine')\n")
    d = {**description(task).to_dict(), "metric": "mine", "metric_file": "m.py"}
    (tmp_path / "c.json").write_text(json.dumps(d))
    assert load_competition(str(tmp_path / "c.json")).metric_name == "mine"


# ----------------------------------------------------------------------------- tuning without Optuna


def test_tuning_without_optuna_is_one_line_with_the_pip_command(tmp_path):
    code = ("import sys; sys.modules['optuna'] = None\n"  # import optuna fails, as when not installed
            "from utils import tune\n"
            f"sys.exit(tune.main(['--train-csv', 'missing.csv', '--model', 'm', '--out', {str(tmp_path / 't')!r}]))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    assert_one_line_error(r.stderr, "Optuna", "pip install 'optuna>=3.0'")
    assert not (tmp_path / "t").exists()


# ----------------------------------------------------------------------------- runs of one slug


def test_two_descriptions_of_one_slug_name_the_field_that_differs(tmp_path):
    a = load_competition("feedback-prize-english-language-learning")
    b = replace(a, target_range=(0.0, 5.0))
    for name, comp in (("a", a), ("b", b)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(json.dumps({"competition": comp.to_dict()}))
    with pytest.raises(ValueError) as e:
        runs.check_same_competition([tmp_path / "a", tmp_path / "b"])
    msg = str(e.value)
    assert "another description of feedback-prize-english-language-learning" in msg
    assert "target_range [0.0, 5.0] vs [1.0, 5.0]" in msg and "\n" not in msg, msg


# ----------------------------------------------------------------------------- the sample submission


def sample_case(tmp_path, sample: pd.DataFrame):
    from utils.predict import match_sample

    comp = load_competition("feedback-prize-english-language-learning")
    sub = pd.DataFrame({"text_id": ["t0", "t1", "t2"], **{c: [1.0, 2.0, 3.0] for c in comp.target_cols}})
    sample.to_csv(tmp_path / "sample_submission.csv", index=False)
    return lambda: match_sample(sub, tmp_path / "sample_submission.csv", comp), sub


def test_a_sample_with_the_columns_in_another_order_is_written_in_its_order(tmp_path):
    cols = ["grammar", "text_id", "cohesion", "syntax", "vocabulary", "phraseology", "conventions"]
    match, sub = sample_case(tmp_path, pd.DataFrame({c: ["t2", "t0", "t1"] if c == "text_id" else 3.0
                                                     for c in cols}))
    out = match()
    assert list(out.columns) == cols and out["text_id"].tolist() == ["t2", "t0", "t1"]
    assert out["grammar"].tolist() == [3.0, 1.0, 2.0]  # each row's values moved with its id


def test_a_sample_with_other_columns_lists_the_missing_and_the_extra(tmp_path):
    cols = ["text_id", "cohesion", "syntax", "vocabulary", "phraseology", "grammar", "score"]
    match, _ = sample_case(tmp_path, pd.DataFrame({c: ["t0", "t1", "t2"] if c == "text_id" else 3.0
                                                   for c in cols}))
    with pytest.raises(DataError) as e:
        match()
    assert "missing: ['score']" in str(e.value) and "not in the sample: ['conventions']" in str(e.value)


def test_a_repeated_id_in_the_sample_is_named(tmp_path):
    comp = load_competition("feedback-prize-english-language-learning")
    match, _ = sample_case(tmp_path, pd.DataFrame({"text_id": ["t0", "t1", "t1"],
                                                   **{c: 3.0 for c in comp.target_cols}}))
    with pytest.raises(DataError) as e:
        match()
    assert "sample_submission.csv" in str(e.value) and "repeats ids ['t1']" in str(e.value)


# ----------------------------------------------------------------------------- init on a stub test file


def test_init_measures_the_texts_on_the_training_file_not_a_stub_test_file(tmp_path):
    real = real_dir("nlp-getting-started")
    data = tmp_path / "tweets"
    data.mkdir()
    for name in ("train.csv", "sample_submission.csv"):
        (data / name).write_bytes((real / name).read_bytes())
    # Kaggle's stub: a few rows, here three short tweets that have a keyword and a location.
    test = pd.read_csv(real / "test.csv")
    short = test[test.keyword.notna() & test.location.notna() & (test.text.str.len() < 60)].head(3)
    short.to_csv(data / "test.csv", index=False)
    comp, why = infer(data)
    assert comp.text_cols == ("text",), why
    assert any("on average in train.csv" in w for w in why)


# ----------------------------------------------------------------------------- a class no row holds


def test_a_class_no_training_row_holds_is_one_warning_line(tmp_path, capsys):
    comp = Competition(slug="x", text_cols=("text",), target_cols=("label",), task="multiclass",
                       classes=("low", "mid", "high"), submission="probabilities")
    pd.DataFrame({"id": range(6), "text": "some words", "label": ["low", "high"] * 3}).to_csv(
        tmp_path / "train.csv", index=False)
    df = read_split(comp, tmp_path / "train.csv")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(df) == 6 and len(err) == 1, err
    assert err[0].startswith("warning: train.csv") and "class 'mid'" in err[0] and "Traceback" not in err[0]
    read_split(replace(comp, classes=("low", "high")), tmp_path / "train.csv")  # every class seen: no word
    assert capsys.readouterr().err == ""
