"""A decoder with LoRA through the rest of the kit, as an encoder goes: a killed run resumed to the
uninterrupted result, the honest-CV perturbation, a blend with an encoder run, pseudo-labels from a
LoRA teacher (and a LoRA student trained on them), the runs table, and --log-with."""

import json
import re

import numpy as np
import pandas as pd
import pytest
from conftest import tiny_frame
from helpers import (
    K,
    assert_one_line_error,
    assert_same_fold_k,
    cfg_for,
    cli,
    kill_in_fold_1,
    lora_for,
    perturb,
    pseudo_labels,
    relabel,
    train_argv,
)

from utils import ensemble, pseudo
from utils import predict as predict_cli
from utils import runs as runs_cli
from utils.data import make_folds
from utils.predict import predict_folds, predict_run
from utils.train import run_cv

# versions: LoRA decoders (peft) through training, resuming, blending and pseudo-labels
pytestmark = pytest.mark.versions

LORA_FLAGS = ("--pooling", "last", "--lora-r", 4, "--lr", 5e-3, "--head-lr", 5e-3)  # helpers.LORA, as flags


def oof_by_id(run) -> pd.DataFrame:
    return pd.read_csv(run / "oof.csv", dtype={"id": str}).set_index("id").sort_index()


# ----------------------------------------------------------------------------- a killed run


def test_a_lora_run_killed_mid_fold_resumes_to_the_uninterrupted_result(tiny_csv, tiny_decoders, tmp_path):
    """tests/test_reliability.py's kill-and-rerun, on a decoder with LoRA: the finished fold's
    adapters are kept byte for byte, the killed fold goes on from its last saved state (its
    adapters, optimizer and random states), and the run ends exactly where the uninterrupted one
    does."""
    model = tiny_decoders["llama"]
    ref = tmp_path / "ref"
    run_cv(lora_for(tiny_csv, ref, model, epochs=3))
    out = tmp_path / "run"
    argv = train_argv(tiny_csv, out, model, "--epochs", 3, *LORA_FLAGS)
    kill_in_fold_1(argv, tmp_path)  # fold 0 saved, fold 1 mid-way (12 steps)
    assert (out / "fold0").is_dir() and not (out / "fold1").exists()
    assert json.loads((out / "metrics.json").read_text())["folds_done"] == [0]
    fold0 = {p.name: p.read_bytes() for p in (out / "fold0").iterdir()}
    assert json.loads(fold0["kit_config.json"])["model"]["lora_r"] == 4  # the adapters, not a whole model

    res = cli("utils.train", argv)  # the same command again
    assert res.returncode == 0, res.stderr
    assert "fold 0: finished earlier, skipped" in res.stdout and "fold 0 step" not in res.stdout
    # fold 1 goes on from its last saved state (step 2 or 4), not from its first step
    assert re.search(r"fold 1: resumed at step [24]/", res.stdout) and "fold 1 step 2/" not in res.stdout
    assert {p.name: p.read_bytes() for p in (out / "fold0").iterdir()} == fold0
    a, b = oof_by_id(ref), oof_by_id(out)
    assert a.index.equals(b.index) and a.fold.equals(b.fold)
    assert (a.pred == b.pred).all()  # identical to the uninterrupted run
    assert np.ptp(b.pred) > 1e-3  # the adapters learned something: predictions differ by text
    hist = lambda r: runs_cli.read_history(r, 1)["history"]  # noqa: E731
    assert [h["step"] for h in hist(out)] == [h["step"] for h in hist(ref)]
    assert np.allclose([h["rmse"] for h in hist(out)], [h["rmse"] for h in hist(ref)], atol=1e-5)
    assert runs_cli.read_metrics(out)["cv"] == pytest.approx(runs_cli.read_metrics(ref)["cv"], abs=1e-5)


# ----------------------------------------------------------------------------- honest CV


@pytest.fixture(scope="module")
def twins(tmp_path_factory, tiny_decoders, tiny_bert):
    """tests/test_honesty.py's twins with a LoRA decoder among the teachers: a LoRA run ("lora",
    Llama) and an encoder run ("bert") on 3 given folds, trained on the data ("same") and on the
    data with fold K's labels replaced ("changed"); "relabelled" is "same" with other labels on
    fold K's rows of their oof.csv. One validation per fold (at its end). Each gets a blend."""
    d = tmp_path_factory.mktemp("decoder-honest")
    train = tiny_frame(60)
    folds = make_folds(train, 3, 42)
    pd.DataFrame({"id": train.id, "fold": folds}).to_csv(d / "folds.csv", index=False)
    texts = tiny_frame(16, seed=9)[["id", "excerpt"]].assign(id=lambda f: "new" + f.id)
    texts.to_csv(d / "texts.csv", index=False)
    shared = dict(folds=3, epochs=1, eval_every=1000, folds_csv=str(d / "folds.csv"))
    for variant, frame in (("same", train), ("changed", perturb(train, folds, K))):
        v = d / variant
        v.mkdir()
        frame.to_csv(v / "train.csv", index=False)
        run_cv(lora_for(v / "train.csv", v / "lora", tiny_decoders["llama"], **shared))
        run_cv(cfg_for(v / "train.csv", v / "bert", tiny_bert, **shared))
    v = d / "relabelled"
    v.mkdir()
    (v / "train.csv").write_text((d / "same" / "train.csv").read_text())
    for name in ("lora", "bert"):
        relabel(d / "same" / name, v / name, K)
    for variant in ("same", "changed", "relabelled"):
        v = d / variant
        ensemble.save_blend(v / "blend.json", ensemble.blend_report([v / "lora", v / "bert"]))
    return d


def labels_from(v, texts, *extra) -> pd.DataFrame:
    """utils.pseudo's CLI on the variant's LoRA and encoder teachers."""
    return pseudo_labels(v, ("lora", "bert"), texts, *extra)


def test_a_lora_folds_outputs_and_pseudo_labels_ignore_its_own_labels(twins):
    """Fold K's labels changed in the training data: the LoRA run's fold-K adapters, their
    out-of-fold predictions, and fold K's pseudo-label column and the rows --max-std keeps for
    it come out identical (fold-K models never saw those labels); every other fold's move."""
    d = twins
    same, changed = d / "same" / "lora", d / "changed" / "lora"
    a, b = oof_by_id(same), oof_by_id(changed)
    held = a.fold == K
    assert np.allclose(a.pred[held], b.pred[held], atol=1e-5)
    assert not np.allclose(a.pred[~held], b.pred[~held], atol=1e-3)  # the change did reach the others
    texts = tiny_frame(16, seed=9).excerpt.tolist()
    pa, pb = predict_folds(same, texts, progress=False), predict_folds(changed, texts, progress=False)
    assert np.allclose(pa[K], pb[K], atol=1e-5) and not np.allclose(pa[1], pb[1], atol=1e-3)
    # utils.pseudo with --max-std: fold K's labels and kept rows, from the LoRA and encoder teachers
    cut = float(labels_from(d / "same", d / "texts.csv")[f"target_std_fold{K}"].quantile(0.5))
    la, lb = (labels_from(d / v, d / "texts.csv", "--max-std", cut) for v in ("same", "changed"))
    assert_same_fold_k(la, lb, 16)


def test_fold_ks_blend_weights_of_a_lora_and_an_encoder_run_ignore_its_oof_labels(twins):
    d = twins
    same, other = (json.loads((d / v / "blend.json").read_text()) for v in ("same", "relabelled"))
    assert same["runs"] == ["lora", "bert"]
    assert np.allclose(same["weights_per_fold"][str(K)], other["weights_per_fold"][str(K)], atol=1e-6)
    assert same["score_blend_cv"] != pytest.approx(other["score_blend_cv"])  # the change is seen


# ----------------------------------------------------------------------------- blend, pseudo, student


def test_a_blend_of_a_lora_run_and_an_encoder_run_is_fitted_on_oof_and_predicts_its_weighted_mean(twins, tmp_path):
    d = twins / "same"
    blend = json.loads((d / "blend.json").read_text())
    w = np.array(blend["weights"])
    assert (w >= 0).all() and w.sum() == pytest.approx(1.0)
    assert blend["identities"]["lora"] == runs_cli.identity(d / "lora")
    # fitted on the members' OOF: its in-sample score is the blend of their OOF predictions
    oofs = ensemble.load_oofs([d / "lora", d / "bert"])
    blended = oofs[["lora", "bert"]].to_numpy() @ w
    assert blend["score_blend_in_sample"] == pytest.approx(np.sqrt(np.mean((blended - oofs.target) ** 2)))
    assert blend["score_blend_in_sample"] <= min(blend["scores"].values()) + 1e-6  # a member is a blend too
    # utils.predict with the blend: the weighted mean of each run's fold average
    test = tiny_frame(6, seed=5).drop(columns=["target", "standard_error"])
    test.to_csv(tmp_path / "test.csv", index=False)
    argv = ["--test-csv", str(tmp_path / "test.csv"), "--runs", str(d / "lora"), str(d / "bert"),
            "--blend", str(d / "blend.json"), "--out", str(tmp_path / "sub.csv"), "--no-sample-submission"]
    assert predict_cli.main(argv) == 0
    sub = pd.read_csv(tmp_path / "sub.csv", dtype={"id": str})
    texts = test.excerpt.tolist()
    expected = (
        w[0] * predict_run(d / "lora", texts, progress=False) + w[1] * predict_run(d / "bert", texts, progress=False)
    )
    assert sub.id.tolist() == test.id.tolist() and np.allclose(sub.target, expected, atol=1e-6)


def test_pseudo_labels_from_a_lora_teacher_train_a_lora_student(twins, tiny_decoders, tmp_path):
    """Fold k's pseudo-label is the blend (fold k's weights) of the LoRA and encoder teachers'
    fold-k models; a LoRA student trains on them (--pseudo-csv), its folds adapters only."""
    from safetensors.torch import load_file

    from utils.model import WEIGHTS

    d = twins / "same"
    blend = json.loads((d / "blend.json").read_text())
    p = labels_from(d, twins / "texts.csv", "--blend", d / "blend.json")
    assert json.loads((d / "pseudo.json").read_text())["runs"] == ["lora", "bert"]
    texts = p.excerpt.tolist()
    per_run = [predict_folds(d / r, texts, progress=False) for r in ("lora", "bert")]
    for k in (0, 1, 2):
        w = blend["weights_per_fold"][str(k)]
        assert np.allclose(p[f"target_fold{k}"], w[0] * per_run[0][k][:, 0] + w[1] * per_run[1][k][:, 0], atol=1e-6)
    student = tmp_path / "student"
    m = run_cv(lora_for(d / "train.csv", student, tiny_decoders["llama"], folds=3, folds_csv=str(twins / "folds.csv"),
                        pseudo_csv=str(d / "pseudo.csv"), pseudo_epochs=1, epochs=1, only_folds=(K,)))
    assert runs_cli.read_history(student, K)["n_pseudo"] == 16 and np.isfinite(m["cv"])
    state = load_file(str(student / f"fold{K}" / WEIGHTS))
    assert state and all("lora_" in n or not n.startswith("backbone.") for n in state)


def test_a_lora_teacher_whose_base_model_moved_is_given_it_with_base_model(tiny_csv, tiny_decoders, tmp_path, capsys):
    """The recorded base gone (the teacher trained on one machine, labels made on another): one
    line saying how to give it, nothing written; --base-model then labels with it."""
    import shutil

    base = shutil.copytree(tiny_decoders["llama"], tmp_path / "llama")
    run_cv(lora_for(tiny_csv, tmp_path / "teacher", str(base), max_steps=2))
    moved = base.rename(tmp_path / "attached-llama")
    texts = tiny_frame(5, seed=3)[["id", "excerpt"]].assign(id=lambda f: "new" + f.id)
    texts.to_csv(tmp_path / "texts.csv", index=False)
    out = tmp_path / "pseudo.csv"
    argv = ["--runs", str(tmp_path / "teacher"), "--texts", str(tmp_path / "texts.csv"), "--train-csv",
            str(tiny_csv), "--out", str(out), "--no-progress"]
    assert pseudo.main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, f"base model {base} not found", "--base-model")
    assert not out.exists()
    assert pseudo.main([*argv, "--base-model", str(moved)]) == 0
    labels = pd.read_csv(out, dtype={"id": str})
    folds = predict_folds(tmp_path / "teacher", texts.excerpt.tolist(), progress=False, base_model=str(moved))
    for k in (0, 1):
        assert np.allclose(labels[f"target_fold{k}"], folds[k][:, 0], atol=1e-6)


# ----------------------------------------------------------------------------- runs table, trackers


def test_the_runs_table_names_each_runs_family_and_how_it_trains(twins, tmp_path, capsys):
    d = twins / "same"
    df = runs_cli.table([d / "lora", d / "bert"]).set_index("run")
    assert df.loc["lora", "family"] == "llama" and df.loc["bert", "family"] == "bert"
    assert df.loc["lora", "tuning"] == "LoRA r=4 alpha=8" and df.loc["bert", "tuning"] == "full"
    assert "lora_r" not in df.columns and "lora_alpha" not in df.columns  # what `tuning` says
    assert "pooling" in df.columns and df.loc["lora", "pooling"] == "last"
    assert df.loc["lora", "folds done"] == "3/3" and np.isfinite(df.loc["lora", "cv"])
    assert "tuning" not in runs_cli.table([d / "bert"]).columns  # no adapters listed: no column
    assert runs_cli.main([str(d)]) == 0
    out = capsys.readouterr().out
    assert "LoRA r=4 alpha=8" in out and "llama" in out
    assert runs_cli.main(["--diff", str(d / "lora"), str(d / "bert")]) == 0
    assert "lora_r: 4 -> 0" in capsys.readouterr().out
    assert runs_cli.tuning({"lora_r": 8, "lora_alpha": 32.0, "load_in_4bit": True}) == "QLoRA r=8 alpha=32"


@pytest.mark.parametrize("model, name", [
    ("/kaggle/input/gemma-2/transformers/gemma-2-9b-it/2", "gemma-2/gemma-2-9b-it"),
    ("/kaggle/input/models/qwen-lm/qwen2.5/transformers/7b-instruct/1", "qwen2.5/7b-instruct"),
    ("/kaggle/input/llama-3-8b-weights/2", "2"),  # a dataset's folder, not a Kaggle Model's layout
    ("meta-llama/Llama-3.2-1B", "Llama-3.2-1B"),
])
def test_the_table_names_a_kaggle_model_by_its_model_and_variation(model, name):
    assert runs_cli.backbone_name(model) == name


def test_log_with_tensorboard_on_a_lora_run(tiny_csv, tiny_decoders, tmp_path):
    """--log-with tensorboard on a decoder with LoRA: each validation's metric, training loss and
    learning rate of the fold, read back by TensorBoard's own reader, at its step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = tmp_path / "r"
    run_cv(lora_for(tiny_csv, run, tiny_decoders["qwen2"], max_steps=4, only_folds=(0,), log_with="tensorboard"))
    events = list((run / "logs").rglob("events.out.tfevents.*"))
    assert events
    acc = EventAccumulator(str(events[0].parent))
    acc.Reload()
    h = runs_cli.read_history(run, 0)["history"]
    assert len(h) >= 2
    for tag, key in (("fold0/valid_rmse", "rmse"), ("fold0/train_loss", "train_loss"), ("fold0/lr", "lr")):
        logged = [(e.step, e.value) for e in acc.Scalars(tag)]
        assert [s for s, _ in logged] == [e["step"] for e in h]
        assert np.allclose([v for _, v in logged], [e[key] for e in h], rtol=1e-5)
