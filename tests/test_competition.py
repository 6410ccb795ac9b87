"""Competition descriptions (utils.competition) and the metrics they name (utils.metrics): each
built-in one on tiny data of its real shape, JSON round trips, one-line errors, inference from the
real CSVs, and honest decision rules."""

import json
import sys

import numpy as np
import pandas as pd
import pytest
from helpers import assert_one_line_error, cli, real_dir, tiny_data

from utils import competition as comp_cli
from utils.competition import BUILTIN, Competition, CompetitionError, load_competition
from utils.data import DataError
from utils.infer import infer
from utils.infer import main as init_main
from utils.metrics import METRICS, apply_rule, get_metric
from utils.tables import read_table


@pytest.mark.parametrize("slug", list(BUILTIN))
def test_each_builtin_reads_its_real_shape_and_round_trips(slug, tmp_path):
    c = load_competition(slug)
    data = tiny_data(slug, tmp_path / slug)
    train, test = read_table(c, data, "train"), read_table(c, data, "test")
    assert len(train) == 12 and len(test) == 3
    texts = c.input_texts(train)
    assert len(texts) == 12 and all(t for t in texts)
    if slug == "commonlit-evaluate-student-summaries":
        assert c.text_pair and texts[0] == ("Summarize how the experiment ended.", "The third wave was an experiment.")
        assert c.input_texts(test)[0] == ("Summarize.", "A summary.")  # the test prompts' question
    elif c.task == "spans":  # (condition, text) pairs: the sentiment or the feature, then the span text
        assert c.text_pair and texts[0][1] == train[c.span_col].iloc[0] and c.span_side == 1
    elif slug == "nlp-getting-started":
        assert texts[:2] == ["fire Forest fire near La Ronge Sask. Canada", "Forest fire near La Ronge Sask. Canada"]
    else:
        assert isinstance(texts[0], str) and not c.text_pair
    y = train[list(c.target_cols)]
    assert y.shape[1] == len(c.target_cols)
    assert c.model_task in ("regression", "classification", "retrieval", "multiple_choice", "spans")
    assert c.metric_name in METRICS
    answer = [c.answer_column] if c.ranking else list(c.target_cols)
    assert list(pd.read_csv(data / c.sample_submission).columns) == [c.id_col, *answer]
    c.save(tmp_path / "c.json")
    assert load_competition(str(tmp_path / "c.json")) == c


def test_commonlit_is_the_default_and_keeps_todays_columns():
    c = load_competition("")
    assert (c.slug, c.id_col, c.text_cols, c.target_cols) == (
        "commonlitreadabilityprize", "id", ("excerpt",), ("target",)
    )
    assert (c.model_task, c.metric_name, c.submission_kind) == ("regression", "rmse", "values")


@pytest.mark.parametrize("content,message", [
    ("{not json", "c.json: cannot be read as JSON"),
    ('["slug"]', "c.json: expected a JSON object of fields, found list"),
    ('{"slug": "x", "colour": 1}', "c.json: unknown field 'colour'"),
    ('{"slug": "x", "task": "regresion"}', "field 'task': 'regresion' is not one of regression"),
    ('{"slug": "x", "target_cols": 5}', "field 'target_cols' must be a list, got 5"),
    ('{"slug": "x", "max_len": 5}', "unknown field 'max_len'"),
    ('{"slug": "x", "id_col": 3}', "field 'id_col' must be a str, got 3"),
    ('{"slug": "x", "task": "binary", "metric": "rmse"}', "field 'metric': rmse scores values; a classification model"),
    (
        '{"slug": "x", "task": "regression", "metric": "f1"}',
        "field 'metric': f1 scores labels made by a threshold rule; a regression model",
    ),
    ('{"slug": "x", "target_cols": ["a", "b"]}', "field 'target_cols': task 'regression' has one target"),
    ('{"slug": "x", "folds": "group"}', "field 'group_col': folds 'group' needs the column"),
    ('{"slug": "x", "text_cols": ["a"], "text_template": "{b}"}', "field 'text_template'"),
    ('{"task": "binary"}', "field 'slug' is required"),
], ids=lambda v: v[:24] if v.startswith("{") or v.startswith("[") else None)
def test_a_broken_competition_json_is_one_line_naming_the_field(tmp_path, capsys, content, message):
    (tmp_path / "c.json").write_text(content)
    with pytest.raises(CompetitionError) as e:
        load_competition(str(tmp_path / "c.json"))
    assert message in str(e.value) and "\n" not in str(e.value)
    assert comp_cli.main(["show", str(tmp_path / "c.json")]) == 2
    assert_one_line_error(capsys.readouterr().err, message)


def test_an_unknown_name_lists_the_builtins(capsys):
    assert comp_cli.main(["show", "titanic"]) == 2
    assert_one_line_error(capsys.readouterr().err, "unknown competition 'titanic'", "nlp-getting-started")


def test_missing_columns_and_joins_name_the_file(tmp_path):
    c = load_competition("commonlit-evaluate-student-summaries")
    data = tiny_data(c.slug, tmp_path / "d")
    pd.read_csv(data / "summaries_test.csv").drop(columns="text").to_csv(data / "summaries_test.csv", index=False)
    with pytest.raises(
        DataError, match=r"summaries_test.csv \(with prompts_test.csv joined\) is missing column 'text'"
    ):
        read_table(c, data, "test")
    pd.read_csv(data / "summaries_train.csv").assign(prompt_id="zzz").to_csv(data / "summaries_train.csv", index=False)
    with pytest.raises(
        DataError, match="summaries_train.csv: 12 rows have a 'prompt_id' missing from prompts_train.csv"
    ):
        read_table(c, data, "train")


# ----------------------------------------------------------------------------- init


@pytest.mark.parametrize("which,expected", [
    ("commonlit", dict(id_col="id", text_cols=("excerpt",), target_cols=("target",), task="regression")),
    ("feedback-prize-ell", dict(id_col="text_id", text_cols=("full_text",), task="multi_regression",
                                target_range=(1.0, 5.0))),
    ("nlp-getting-started", dict(id_col="id", text_cols=("text",), target_cols=("target",), task="binary")),
    ("us-patent-phrase-to-phrase-matching", dict(id_col="id", text_cols=("anchor", "target", "context"),
                                                 target_cols=("score",), task="regression", target_range=(0.0, 1.0),
                                                 folds="group", group_col="anchor")),
])
def test_init_infers_the_real_competitions(which, expected, tmp_path, capsys):
    data = real_dir(which)
    assert init_main(["--data", str(data), "--out", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    c = load_competition(str(tmp_path / "c.json"))
    for k, v in expected.items():
        assert getattr(c, k) == v, k
    assert f"task {c.task}" in out and f"metric {c.metric_name}" in out and "check it" in out
    if which not in ("commonlit", "feedback-prize-ell", "nlp-getting-started"):
        return  # not a built-in: nothing to compare with
    builtin = {"commonlit": "commonlitreadabilityprize",
               "feedback-prize-ell": "feedback-prize-english-language-learning",
               "nlp-getting-started": "nlp-getting-started"}[which]
    b = BUILTIN[builtin]
    assert (c.id_col, c.target_cols, c.model_task, c.metric_name) == (
        b.id_col, b.target_cols, b.model_task, b.metric_name
    )
    # the built-in description reads the real files
    train, test = read_table(b, data, "train"), read_table(b, data, "test")
    assert len(b.input_texts(train)) == len(train) and len(b.input_texts(test)) == len(test)


def test_init_without_a_sample_submission_is_one_line(tmp_path, capsys):
    data = tiny_data("commonlitreadabilityprize", tmp_path / "d")
    (data / "sample_submission.csv").unlink()
    assert init_main(["--data", str(data), "--out", str(tmp_path / "c.json")]) == 2
    assert_one_line_error(capsys.readouterr().err, "no sample submission CSV found")
    assert not (tmp_path / "c.json").exists()


def test_init_is_its_own_command_and_competition_points_to_it(tmp_path):
    # `python -m utils.infer` as a user runs it (the module's __main__), and utils.competition's help
    # names it: the description module no longer imports its inference, one floor above it.
    data = tiny_data("commonlitreadabilityprize", tmp_path / "d")
    r = cli("utils.infer", ["--data", str(data), "--out", str(tmp_path / "c.json")])
    assert r.returncode == 0 and "wrote" in r.stdout, r.stderr
    assert load_competition(str(tmp_path / "c.json")).task == "regression"
    assert "python -m utils.infer --data DIR" in cli("utils.competition", ["--help"]).stdout


def test_init_tells_ordinal_and_multiclass_from_the_values(tmp_path):
    data = tiny_data("learning-agency-lab-automated-essay-scoring-2", tmp_path / "aes")
    c, why = infer(data)
    assert c.task == "ordinal" and c.metric_name == "qwk" and c.target_range == (1.0, 6.0)
    train = pd.read_csv(data / "train.csv")
    labels = np.select([train.score > 4, train.score > 2], ["high", "mid"], "low")
    train.assign(score=labels).to_csv(data / "train.csv", index=False)
    c, why = infer(data)
    assert c.task == "multiclass" and any("non-numeric" in w for w in why)
    # Two string labels: binary, with the guessed [negative, positive] order said to be checked.
    train.assign(score=np.where(train.score > 3, "high", "low")).to_csv(data / "train.csv", index=False)
    c, why = infer(data)
    assert c.task == "binary" and c.classes == ("high", "low") and any("check which one" in w for w in why)


# ----------------------------------------------------------------------------- metrics


def test_metrics_match_scikit_learn():
    from sklearn.metrics import accuracy_score, cohen_kappa_score, f1_score, log_loss, roc_auc_score

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    p1 = np.clip(y * 0.4 + rng.uniform(0, 0.6, 200), 0, 1)
    prob = np.stack([1 - p1, p1], axis=1)
    assert get_metric("f1").score(y, prob) == pytest.approx(f1_score(y, p1 >= 0.5))
    assert get_metric("accuracy").score(y, prob) == pytest.approx(accuracy_score(y, p1 >= 0.5))
    assert get_metric("roc_auc").score(y, prob) == pytest.approx(roc_auc_score(y, p1))
    assert get_metric("log_loss").score(y, prob) == pytest.approx(log_loss(y, prob))
    s = rng.integers(1, 7, 200)
    v = s + rng.normal(0, 0.7, 200)
    assert get_metric("qwk").score(s, v[:, None]) == pytest.approx(
        cohen_kappa_score(s, np.rint(v).astype(int), weights="quadratic"))
    Y = rng.normal(size=(50, 3))
    P = Y + rng.normal(0, 0.5, (50, 3))
    assert get_metric("mcrmse").score(Y, P) == pytest.approx(np.mean(np.sqrt(((Y - P) ** 2).mean(0))))
    assert get_metric("mcrmse").loss(Y, P) > 0 and get_metric("f1").loss(y, prob) < 0  # minimised


def test_correlations_match_scipy_per_target_and_averaged():
    from scipy.stats import pearsonr, spearmanr

    rng = np.random.default_rng(3)
    Y = rng.uniform(size=(80, 2))
    P = Y ** 3 + rng.normal(0, 0.2, (80, 2))  # monotone but not linear: the two differ
    for name, ref in (("pearson", pearsonr), ("spearman", spearmanr)):
        m = get_metric(name)
        each = [ref(Y[:, j], P[:, j])[0] for j in range(2)]
        assert m.score(Y[:, :1], P[:, :1]) == pytest.approx(each[0])
        assert m.score(Y, P) == pytest.approx(np.mean(each))
        assert m.greater_is_better and m.loss(Y, P) == pytest.approx(-np.mean(each))
    assert get_metric("pearson").score(Y, P) != pytest.approx(get_metric("spearman").score(Y, P))
    # A constant prediction has no correlation: 0, not NaN (checkpoints still compare).
    assert get_metric("pearson").score(Y[:, :1], np.full((80, 1), 0.5)) == 0.0
    # A competition.json may name them; they score values, so a classification task is refused.
    comp = Competition.from_dict({"slug": "us-patent-phrase-to-phrase-matching", "text_cols": ["anchor", "target"],
                                  "target_cols": ["score"], "metric": "pearson", "target_range": [0, 1]})
    assert comp.metric_name == "pearson"
    with pytest.raises(CompetitionError, match="pearson scores values; a classification model"):
        Competition(slug="x", text_cols=("t",), task="binary", metric="pearson")


def test_fitted_rules_help_in_sample_and_are_honest_across_folds():
    rng = np.random.default_rng(1)
    y = (rng.uniform(size=600) < 0.3).astype(int)
    p1 = np.where(y == 1, rng.uniform(0.15, 0.6, 600), rng.uniform(0, 0.4, 600))  # positives rarely pass 0.5
    prob = np.stack([1 - p1, p1], axis=1)
    f1 = get_metric("f1")
    rule = f1.fit_rule(y, prob)
    assert rule["threshold"] < 0.5 and f1.score(y, prob, rule) > f1.score(y, prob)
    folds = np.arange(600) % 3
    honest, rules = f1.honest_score(y, prob, folds)
    assert set(rules) == {0, 1, 2} and f1.score(y, prob) < honest <= f1.score(y, prob, rule) + 1e-9
    # Perturbation: fold 0's labels changed, fold 0's rule (fitted on folds 1, 2) stays the same.
    y2 = y.copy()
    y2[folds == 0] = 1 - y2[folds == 0]
    assert f1.honest_score(y2, prob, folds)[1][0] == rules[0]
    assert f1.honest_score(y2, prob, folds)[1][1] != rules[1]

    s = rng.integers(1, 7, 600)
    v = 3.5 + 0.6 * (s - 3.5) + rng.normal(0, 0.5, 600)  # shrunk towards the mean, as models are
    qwk = get_metric("qwk")
    cuts = qwk.fit_rule(s, v[:, None])
    assert len(cuts["cutpoints"]) == 5 and qwk.score(s, v[:, None], cuts) > qwk.score(s, v[:, None])
    labels = apply_rule(cuts, v[:, None])
    assert labels.min() >= 1 and labels.max() <= 6
    s2 = s.copy()
    s2[folds == 2] = 1
    assert qwk.honest_score(s2, v[:, None], folds)[1][2] == qwk.honest_score(s, v[:, None], folds)[1][2]


def test_every_metric_is_registered_with_what_it_needs():
    from utils.metrics import BUILTIN_METRICS

    assert set(BUILTIN_METRICS) == {"rmse", "mcrmse", "f1", "accuracy", "roc_auc", "log_loss", "qwk", "pearson",
                                    "spearman", "jaccard", "char_f1", "f5"}
    assert {m for m in METRICS if m not in BUILTIN_METRICS} <= {f"{r}@{k}" for r in ("map", "recall")
                                                               for k in range(1, 1001)}  # made when asked for
    with pytest.raises(ValueError, match="unknown metric 'auc'; valid: rmse, mcrmse"):
        get_metric("auc")
    for m in METRICS.values():
        assert m.needs in ("values", "labels", "probabilities", "spans")
        assert m.rule in ("", "threshold", "cutpoints")


def test_descriptions_are_frozen_and_compare_by_value():
    c = BUILTIN["nlp-getting-started"]
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        c.slug = "x"
    assert Competition.from_dict(json.loads(json.dumps(c.to_dict()))) == c


def test_a_runs_settings_name_its_competition():
    """What predict, ensembling and the runs table read from a run saved before runs recorded
    their competition: CommonLit's columns are CommonLit, others a custom description."""
    from utils.competition import from_settings

    assert from_settings({}) is BUILTIN["commonlitreadabilityprize"]
    assert from_settings({"competition": "nlp-getting-started"}).slug == "nlp-getting-started"
    ell = from_settings({"text_col": "full_text", "target_cols": ["cohesion", "syntax"], "id_col": "text_id"})
    assert (ell.slug, ell.task, ell.id_col, ell.text_cols) == ("custom", "multi_regression", "text_id", ("full_text",))
    clf = from_settings({"task": "classification", "target_cols": ["level"]})
    assert (clf.task, clf.metric_name) == ("multiclass", "log_loss")


def test_the_benchmark_average_scores_the_mean_of_its_runs_on_the_same_rows(tmp_path, monkeypatch, capsys):
    import importlib.util

    from conftest import ROOT

    from utils.metrics import mcrmse
    from utils.runs import write_metrics

    monkeypatch.syspath_prepend(str(ROOT / "bench"))  # as `python bench/competitions.py` has it: its helpers
    spec = importlib.util.spec_from_file_location("bench_competitions", ROOT / "bench" / "competitions.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    cols = list(BUILTIN[bench.SETUPS["ell"]["slug"]].target_cols)  # the kit's own description
    rng = np.random.default_rng(0)
    y = rng.integers(2, 10, size=(8, len(cols))) / 2
    preds = [y + rng.normal(0, 0.4, y.shape) for _ in range(2)]
    runs = []
    for k, p in enumerate(preds):
        oof = pd.DataFrame({"id": [f"e{i}" for i in range(8)]})
        for j, c in enumerate(cols):
            oof[c], oof[f"pred_{c}"] = y[:, j], p[:, j]
        oof["fold"] = 0  # the benchmark's runs validate fold 0
        order = rng.permutation(8) if k else np.arange(8)  # a run's rows in another order
        (tmp_path / f"run{k}").mkdir()
        oof.iloc[order].to_csv(tmp_path / f"run{k}" / "oof.csv", index=False)
        # A kit run records its competition: what its OOF columns mean.
        write_metrics(tmp_path / f"run{k}", {"competition": BUILTIN[bench.SETUPS["ell"]["slug"]].to_dict()})
        runs.append(str(tmp_path / f"run{k}"))
    r = bench.average("ell", bench.SETUPS["ell"], runs)
    assert r["mcrmse"] == pytest.approx(mcrmse(y, (preds[0] + preds[1]) / 2))
    assert r["mcrmse"] < min(mcrmse(y, p) for p in preds)  # independent errors: the mean is better
    # From the command line: the saved runs alone, no data read, the file's own fields kept.
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    monkeypatch.setattr(bench, "ROOT", tmp_path)
    saved = {"slug": "feedback-prize-english-language-learning", "metric": "MCRMSE", "command": "the first",
             "baseline": {"model": "TF-IDF + ridge", "mcrmse": 0.6},
             "kit": [{"model": "m + attention pooling", "run": f"run{k}", "mcrmse": mcrmse(y, p), "max_len": 512,
                      "minutes": 1.0, "seed": 42 + k} for k, p in enumerate(preds)]}
    (tmp_path / "competition_ell.json").write_text(json.dumps(saved))
    monkeypatch.setattr(sys, "argv", ["competitions.py", "ell", "--average", "run0", "run1"])
    bench.main()
    res = json.loads((tmp_path / "competition_ell.json").read_text())
    assert (res["command"], res["baseline"], res["kit"][:2]) == (saved["command"], saved["baseline"], saved["kit"])
    assert res["kit"][2]["members"] == ["run0", "run1"]
    assert res["kit"][2]["mcrmse"] == pytest.approx(r["mcrmse"])
    assert "of: attention fit head; attention fit head seed 43" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["competitions.py", "ell", "--average", "run0", "run9"])
    with pytest.raises(SystemExit, match="run9 is not a run of competition_ell.json"):
        bench.main()
    pd.read_csv(tmp_path / "run1" / "oof.csv").iloc[1:].to_csv(tmp_path / "run1" / "oof.csv", index=False)
    with pytest.raises(SystemExit, match="did not validate the same rows"):
        bench.average("ell", bench.SETUPS["ell"], runs)
    # A member is named by what sets it apart from the recipe, its seed included.
    two_seeds = [{"model": "m + attention+mean pooling", "fit": "head_tail", "lr": 1e-4, "epochs": 4, "seed": s}
                 for s in (42, 43)]
    assert [bench.member_name(r) for r in two_seeds] == [
        "attention+mean fit head_tail 4 epochs lr 0.0001", "attention+mean fit head_tail 4 epochs lr 0.0001 seed 43"]
    assert bench.member_name({**two_seeds[0], "layers": 4}) == (
        "attention+mean fit head_tail a mix of the last 4 layers 4 epochs lr 0.0001")


@pytest.mark.parametrize("shape", ["words", "offsets", "labels"])
def test_init_describes_a_span_competition_instead_of_guessing_a_class(shape, tmp_path):
    """Tweet's selected_text (a part of its text) and NBME's location (character offsets) are not
    classes (as a multiclass target they would train on 18,000 'labels'): init writes a span task.
    A short label column that is no part of the text is a class as before."""
    words = ("love sunny day phone broke again normal tuesday great game tonight worst traffic ever seen "
             "es el un la de en").split()
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(words, 8)) for _ in range(60)]
    if shape == "words":
        answer = [" ".join(t.split()[2:5]) for t in texts]
    elif shape == "offsets":
        answer = [f"['{i} {i + 4}']" if i % 3 else "[]" for i in range(len(texts))]
    else:  # a short code that is also a word of most texts (a language id): a class, not a span
        answer = ["es" if "es" in t.split() else "en" for t in texts]
    col = "location" if shape == "offsets" else "selected_text"
    pd.DataFrame({"id": range(60), "text": texts, col: answer}).to_csv(tmp_path / "train.csv", index=False)
    pd.DataFrame({"id": [100, 101], "text": texts[:2]}).to_csv(tmp_path / "test.csv", index=False)
    pd.DataFrame({"id": [100, 101], col: ""}).to_csv(tmp_path / "sample_submission.csv", index=False)
    if shape == "labels":
        assert infer(tmp_path)[0].task == "binary"
        return
    comp, why = infer(tmp_path)
    words = "character offsets" if shape == "offsets" else "is a part of column 'text' in 100% of rows"
    assert any(words in w and w.startswith("task spans") for w in why)
    assert (comp.task, comp.span_col, comp.text_cols, comp.target_cols) == ("spans", "text", ("text",), (col,))
    assert (comp.span_labels, comp.span_count, comp.metric_name) == (
        ("offsets", "many", "char_f1") if shape == "offsets" else ("text", "one", "jaccard"))


@pytest.mark.parametrize("slug", ["tweet-sentiment-extraction", "nbme-score-clinical-patient-notes"])
def test_init_on_the_span_competitions_real_files_finds_the_built_in_description(slug):
    """Tweet (the sentiment as the condition, stratified on it) and NBME (the notes and features
    joined from the tables of neither role, keys written 000 in one and 0 in the other; the
    feature as the condition, grouped by note) as the built-in descriptions read them."""
    from helpers import real_dir

    comp, why = infer(real_dir(slug))
    builtin = BUILTIN[slug]
    assert not [w for w in why if "not used" in w]  # the condition is used: no note says otherwise
    for field in ("id_col", "text_cols", "target_cols", "task", "metric_name", "span_col", "span_labels",
                  "span_count", "stratify_col"):
        assert getattr(comp, field) == getattr(builtin, field), field
    assert sorted(comp.train_joins) == sorted(builtin.train_joins) and comp.folds == builtin.folds
    train = read_table(comp, real_dir(slug), "train")
    assert len(train) == len(read_table(builtin, real_dir(slug), "train")) and train[comp.span_col].str.len().min() >= 0
