"""Bad input met by the CLIs and the functions under them: one clear line, never a traceback nor a
silent wrong result. A tracker whose package is missing; a test file with no sample submission; a
resumed tuning study (stale trials, the sampler's seed); a malformed metrics.json; the runs
table's default folder; the CV scored as the submission is (clipped to the targets' range)."""

import json

import numpy as np
import optuna
import pandas as pd
import pytest
from conftest import tiny_frame
from helpers import assert_one_line_error, cfg_for, one_fold_argv, tiny_data

from utils import predict as predict_cli
from utils import runs as runs_cli
from utils import train as train_cli
from utils import tune as tune_cli
from utils.competition import load_competition
from utils.config import config_from_args
from utils.data import DataError
from utils.metrics import get_metric

# versions: accelerate's trackers, training and tuning runs
pytestmark = pytest.mark.versions

# ----------------------------------------------------------------------------- 1. --log-with


@pytest.mark.parametrize("tracker, pip", [("tensorboard", "pip install tensorboard"),
                                          ("comet_ml", "pip install comet-ml")])
def test_a_tracker_whose_package_is_missing_is_refused_before_training(tracker, pip, tiny_csv, tiny_bert,
                                                                       tmp_path, capsys, monkeypatch):
    import accelerate.tracking

    monkeypatch.setattr(accelerate.tracking, "get_available_trackers", lambda: [])  # none installed
    out = tmp_path / "run"
    assert train_cli.main(one_fold_argv(tiny_csv, tiny_bert, out, "--log-with", f"{tracker}")) == 2
    assert_one_line_error(capsys.readouterr().err, f"--log-with {tracker}", pip)
    assert not list(out.glob("fold*"))  # nothing trained


def test_an_unknown_tracker_is_one_line_listing_the_known_ones(tiny_csv, tiny_bert, tmp_path, capsys):
    assert train_cli.main(one_fold_argv(tiny_csv, tiny_bert, tmp_path / "run", "--log-with", "tensorbord")) == 2
    assert_one_line_error(capsys.readouterr().err, "--log-with tensorbord", "tensorboard, wandb")


# ----------------------------------------------------------------------------- 2. sample submission


@pytest.fixture(scope="module")
def one_run(tmp_path_factory, tiny_bert):
    d = tmp_path_factory.mktemp("probe-run")
    tiny_frame(40).to_csv(d / "train.csv", index=False)
    train_cli.run_cv(cfg_for(d / "train.csv", d / "run", tiny_bert, max_steps=1, only_folds=(0,)))
    return d / "run"


def test_a_test_file_without_a_sample_submission_is_refused_naming_the_path(one_run, tmp_path, capsys,
                                                                            monkeypatch):
    test = tiny_frame(5, seed=3).drop(columns=["target", "standard_error"])
    test.to_csv(tmp_path / "test.csv", index=False)
    out = tmp_path / "submission.csv"
    argv = ["--test-csv", str(tmp_path / "test.csv"), "--runs", str(one_run), "--out", str(out)]
    loads = []
    monkeypatch.setattr(predict_cli, "load_fold", lambda *a, **k: loads.append(a) or 1 / 0)
    assert predict_cli.main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, str(tmp_path / "sample_submission.csv"),
                          "--no-sample-submission")
    assert not out.exists() and not loads  # refused before any model loads
    monkeypatch.undo()
    # Knowingly: written in the test file's order, with a note that nothing was checked.
    assert predict_cli.main([*argv, "--no-sample-submission"]) == 0
    err = capsys.readouterr().err
    assert "not checked" in err and "sample_submission.csv" in err
    sub = pd.read_csv(out, dtype={"id": str})
    assert sub.id.tolist() == test.id.tolist() and list(sub.columns) == ["id", "target"]


def test_write_submission_refuses_a_sample_path_that_is_not_there(tmp_path):
    test = pd.DataFrame({"id": ["a", "b"], "excerpt": ["x", "y"]})
    comp = load_competition()
    with pytest.raises(DataError, match="sample_submission.csv"):
        predict_cli.write_submission(tmp_path / "s.csv", test, np.zeros(2), comp,
                                     sample=tmp_path / "sample_submission.csv")
    assert not (tmp_path / "s.csv").exists()


# ----------------------------------------------------------------------------- 3. a resumed study


@pytest.fixture()
def cheap_trials(monkeypatch):
    """run_cv replaced by a function of the trial's settings: a study in seconds."""
    monkeypatch.setattr(train_cli, "run_cv", lambda cfg, comp=None, on_validation=None: {"cv": cfg.lr + cfg.head_lr})


def test_a_resumed_study_does_not_replay_the_earlier_trials(cheap_trials, tiny_csv, tiny_bert, tmp_path):
    base = config_from_args(one_fold_argv(tiny_csv, tiny_bert, tmp_path / "s"))
    tune_cli.tune(base, ["lr", "head_lr"], 2, tmp_path / "s", log=lambda *a: None)
    tune_cli.tune(base, ["lr", "head_lr"], 4, tmp_path / "s", log=lambda *a: None)
    study = optuna.load_study(study_name="kit", storage=f"sqlite:///{tmp_path / 's' / 'study.db'}")
    params = [tuple(sorted(t.params.items())) for t in study.trials]
    assert len(params) == 4 and len(set(params)) == 4, params


def test_a_trial_left_running_by_a_killed_process_is_marked_failed(cheap_trials, tiny_csv, tiny_bert, tmp_path):
    base = config_from_args(one_fold_argv(tiny_csv, tiny_bert, tmp_path / "s"))
    tune_cli.tune(base, ["lr"], 1, tmp_path / "s", log=lambda *a: None)
    storage = f"sqlite:///{tmp_path / 's' / 'study.db'}"
    optuna.load_study(study_name="kit", storage=storage).ask()  # a trial whose process was killed
    lines = []
    res = tune_cli.tune(base, ["lr"], 3, tmp_path / "s", log=lines.append)
    states = [t.state for t in optuna.load_study(study_name="kit", storage=storage).trials]
    S = optuna.trial.TrialState
    assert states == [S.COMPLETE, S.FAIL, S.COMPLETE, S.COMPLETE]  # the killed trial takes no slot
    assert res["n_complete"] == 3
    assert any("trial 1" in ln and "FAIL" in ln for ln in lines), lines


# ----------------------------------------------------------------------------- 4, 5. the runs table


def fake_run(folder, metrics=None):
    """A run folder as the table reads it: config.json, and metrics.json (any JSON) when given."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model": "roberta-base", "train_csv": "t.csv", "folds": 2}))
    if metrics is not None:
        (folder / "metrics.json").write_text(json.dumps(metrics))
    return folder


@pytest.mark.parametrize("metrics, what", [([], "list"), ({"cv": 0.5, "folds_done": 3}, "folds_done")])
def test_a_malformed_metrics_file_is_a_note_in_the_table_and_one_line_when_read(metrics, what, tmp_path, capsys):
    fake_run(tmp_path / "runs" / "bad", metrics)
    fake_run(tmp_path / "runs" / "good", {"metric": "rmse", "cv": 0.5, "folds_done": [0, 1]})
    assert runs_cli.main([str(tmp_path / "runs")]) == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.err and "bad" in out.out and "good" in out.out
    notes = [ln for ln in out.err.splitlines() if "metrics.json" in ln]
    assert len(notes) == 1 and notes[0].startswith("note: ") and what in notes[0], out.err
    with pytest.raises(ValueError, match=f"metrics.json.*{what}"):
        runs_cli.read_metrics(tmp_path / "runs" / "bad")


def test_the_default_runs_folder_is_the_working_folders_as_train_out_is(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert runs_cli.main([]) == 2  # no runs/ here
    assert_one_line_error(capsys.readouterr().err, str(tmp_path / "runs"))
    fake_run(tmp_path / "runs" / "mine", {"metric": "rmse", "cv": 0.5, "folds_done": [0, 1]})
    assert runs_cli.main([]) == 0
    assert "mine" in capsys.readouterr().out


# ----------------------------------------------------------------------------- 6. CV as submitted


def test_the_cv_is_scored_on_predictions_clipped_to_the_target_range(tiny_bert, tmp_path, monkeypatch):
    slug = "feedback-prize-english-language-learning"
    comp = load_competition(slug)  # targets in [1, 5]; an untrained head predicts near 0
    data = tiny_data(slug, tmp_path / "data", 24)
    out = tmp_path / "run"
    raw_preds = []
    real = train_cli.as_submitted

    def keep_raw(c, pred):  # the model's own outputs, before the rule clips them
        raw_preds.append(pred.copy())
        return real(c, pred)

    monkeypatch.setattr(train_cli, "as_submitted", keep_raw)
    metrics = train_cli.run_cv(cfg_for(data / "train.csv", out, tiny_bert, competition=slug, max_steps=1,
                                       max_len=32, lr=1e-6, head_lr=1e-6))
    oof = pd.read_csv(out / "oof.csv", dtype={"text_id": str})
    truth = oof[list(comp.target_cols)].to_numpy(float)
    written = oof[[f"pred_{c}" for c in comp.target_cols]].to_numpy(float)
    assert (np.concatenate(raw_preds) < 1).any()  # the probe is real: some predictions are outside the range
    assert ((written >= 1) & (written <= 5)).all()  # oof.csv holds them as the submission writes them
    clipped, metric = written, get_metric("mcrmse")
    assert metrics["cv"] == pytest.approx(metric.score(truth, clipped))  # recomputed from oof.csv
    for k in (0, 1):
        part = oof.fold.to_numpy() == k
        assert metrics["fold_score"][k] == pytest.approx(metric.score(truth[part], clipped[part]))
    hist = json.loads((out / "fold0" / "history.json").read_text())["history"]
    assert hist[-1]["mcrmse"] == pytest.approx(metrics["fold_score"][0])  # the checkpoint's score too
