"""python -m utils.tune: Optuna trials that are kit runs, pruned on the kit's validations, in a
SQLite study that resumes; the best trial printed as the utils.train command that reproduces it."""

import json
import shlex

import optuna
import pytest
from helpers import assert_one_line_error, one_fold_argv

from utils import tune as tune_cli
from utils.config import config_from_args
from utils.runs import read_metrics


def argv(tiny_csv, tiny_bert, out, *extra):
    """helpers.one_fold_argv with 4 steps: two validations a trial, for the pruner."""
    return one_fold_argv(tiny_csv, tiny_bert, out, *extra, max_steps=4)


def test_a_study_resumes_and_prints_the_command_of_its_best_trial(tiny_csv, tiny_bert, tmp_path, capsys):
    out = tmp_path / "study"
    assert tune_cli.main(argv(tiny_csv, tiny_bert, out, "--trials", "2", "--space", "lr,head_lr")) == 0
    assert tune_cli.main(argv(tiny_csv, tiny_bert, out, "--trials", "3", "--space", "lr,head_lr")) == 0
    text = capsys.readouterr().out
    assert "2 trial(s) done, 1 to run" in text  # the second call resumed the stored study
    study = optuna.load_study(study_name="kit", storage=f"sqlite:///{out / 'study.db'}")
    # The resumed call ran the third trial to its end; the median pruner may stop it at its first
    # validation (trials 0 and 1 are its reference), so either finished state is the study's answer.
    finished = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    assert len(study.trials) == 3 and all(t.state in finished for t in study.trials)
    assert study.trials[2].intermediate_values  # it trained and reported, not only registered
    best = study.best_trial
    assert best.value == min(t.value for t in study.trials if t.value is not None)
    assert best.value == read_metrics(out / f"trial{best.number}")["cv"]
    command = next(ln.split("reproduce it: ", 1)[1] for ln in text.splitlines() if "reproduce it: " in ln)
    cfg = config_from_args(shlex.split(command)[3:])
    assert (cfg.lr, cfg.head_lr) == pytest.approx((best.params["lr"], best.params["head_lr"]))
    assert cfg.out.endswith(f"trial{best.number}") and cfg.max_steps == 4 and cfg.only_folds == ()


def test_a_trial_that_falls_behind_is_pruned_at_the_validation_that_shows_it(tiny_csv, tiny_bert, tmp_path):
    from utils.config import TrainConfig

    base = config_from_args(argv(tiny_csv, tiny_bert, tmp_path / "s"))
    assert isinstance(base, TrainConfig)
    # Any RMSE is above 0: every trial is pruned at its first validation (step 2 of 4).
    res = None
    with pytest.raises(RuntimeError, match="no trial completed"):
        res = tune_cli.tune(base, ["lr"], 2, tmp_path / "s", pruner=optuna.pruners.ThresholdPruner(upper=0.0))
    assert res is None
    study = optuna.load_study(study_name="kit", storage=f"sqlite:///{tmp_path / 's' / 'study.db'}")
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.PRUNED] * 2
    assert all(list(t.intermediate_values) == [2] for t in study.trials)  # stopped at step 2
    assert not (tmp_path / "s" / "trial0" / "fold0").exists()  # a pruned fold is not kept


def test_an_unknown_setting_to_search_is_one_line(tiny_csv, tiny_bert, tmp_path, capsys):
    assert tune_cli.main(argv(tiny_csv, tiny_bert, tmp_path / "s", "--space", "lr,colour")) == 2
    assert_one_line_error(capsys.readouterr().err, "--space colour: choose from lr, head_lr")


def test_the_benchmark_report_counts_pruned_minutes_against_the_completed_trials(tmp_path):
    import importlib.util

    from conftest import ROOT

    spec = importlib.util.spec_from_file_location("bench_tune", ROOT / "bench" / "tune.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    study = optuna.create_study(study_name="kit", storage=f"sqlite:///{tmp_path / 'study.db'}")
    dist = {"lr": optuna.distributions.FloatDistribution(1e-6, 1e-3, log=True)}
    for lr, value, minutes in ((1e-5, 0.55, 20.0), (3e-5, 0.53, 24.0), (5e-5, 0.56, 40.0)):
        study.add_trial(optuna.trial.create_trial(
            params={"lr": lr}, distributions=dist, value=value, user_attrs={"minutes": minutes},
            intermediate_values={40: value + 0.1, 80: value}))
    study.add_trial(optuna.trial.create_trial(
        params={"lr": 1e-4}, distributions=dist, state=optuna.trial.TrialState.PRUNED,
        user_attrs={"minutes": 5.0}, intermediate_values={40: 0.9}))
    res = bench.report(tmp_path)
    assert (res["n_complete"], res["n_pruned"], res["n_unfinished"]) == (3, 1, 0)
    assert res["best"]["params"] == {"lr": 3e-5} and res["best"]["valid_rmse"] == 0.53
    # A completed trial's minutes are their median (a trial slowed by another job moves it less)
    assert res["minutes"] == 89.0 and res["minutes_saved_by_pruning"] == 24.0 - 5.0
    pruned = next(t for t in res["trials"] if t["state"] == "PRUNED")
    assert (pruned["last_step"], pruned["last_valid_rmse"]) == (40, 0.9)
    assert "| 3 | 1.0e-04 |" in bench.table(res) and "0.9000 at step 40" in bench.table(res)


def test_a_lora_run_searches_its_rank_and_scale_over_the_lr_range_adapters_train_at(tiny_csv, tiny_decoders,
                                                                                      tmp_path, capsys):
    """--space lr,lora_r,lora_alpha on a decoder with LoRA: each trial trains adapters of the rank
    it drew, records the scale it drew, and the best one is printed as its utils.train command."""
    from safetensors.torch import load_file

    from utils.model import KIT_CONFIG, WEIGHTS

    out = tmp_path / "study"
    extra = ("--pooling", "last", "--lora-r", "4", "--head-lr", "5e-3", "--trials", "2",
             "--space", "lr,lora_r,lora_alpha")
    assert tune_cli.main(argv(tiny_csv, tiny_decoders["llama"], out, *extra)) == 0
    study = optuna.load_study(study_name="kit", storage=f"sqlite:///{out / 'study.db'}")
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * 2  # 2 startup trials: never pruned
    for t in study.trials:
        assert t.distributions["lr"].high == tune_cli.LORA_SPACE["lr"][2]  # not the encoders' 2e-4
        fold = out / f"trial{t.number}" / "fold0"
        ranks = {w.shape[0] for k, w in load_file(str(fold / WEIGHTS)).items() if ".lora_A." in k}
        assert ranks == {t.params["lora_r"]}
        saved = json.loads((fold / KIT_CONFIG).read_text())["model"]
        assert saved["lora_alpha"] == t.params["lora_alpha"]
    best = study.best_trial
    command = next(ln.split("reproduce it: ", 1)[1] for ln in capsys.readouterr().out.splitlines()
                   if "reproduce it: " in ln)
    cfg = config_from_args(shlex.split(command)[3:])
    assert (cfg.lora_r, cfg.lora_alpha, cfg.pooling) == (best.params["lora_r"], best.params["lora_alpha"], "last")
    assert cfg.lr == pytest.approx(best.params["lr"])


def test_a_decoders_poolings_include_last_and_an_encoders_keep_theirs(tiny_decoders, tiny_bert):
    from utils.config import TrainConfig

    decoder = TrainConfig(train_csv="t.csv", out="o", model=tiny_decoders["qwen2"], pooling="last", lora_r=8)
    encoder = TrainConfig(train_csv="t.csv", out="o", model=tiny_bert)
    assert (
        "last" in tune_cli.space_for(decoder)["pooling"][1] and "cls" not in tune_cli.space_for(decoder)["pooling"][1]
    )
    assert tune_cli.space_for(encoder)["pooling"] == tune_cli.SPACE["pooling"]
    assert tune_cli.space_for(encoder)["lr"] == tune_cli.SPACE["lr"] != tune_cli.space_for(decoder)["lr"]


@pytest.mark.parametrize("space", ["lr,lora_r", "lora_alpha", "lr,lora_dropout"])
def test_lora_settings_searched_without_lora_are_refused_in_one_line(space, tiny_csv, tiny_bert, tmp_path, capsys):
    out = tmp_path / "s"
    assert tune_cli.main(argv(tiny_csv, tiny_bert, out, "--space", space)) == 2
    lora = ",".join(s for s in space.split(",") if s.startswith("lora_"))
    assert_one_line_error(capsys.readouterr().err, f"--space {lora}: the trials train the whole backbone",
                          "give --lora-r")
    assert not out.exists()  # refused before a study or a trial was started
