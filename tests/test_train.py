import json

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import tiny_frame
from helpers import assert_fold_reproduces_its_oof, cfg_for

from utils.competition import from_settings
from utils.config import TrainConfig, config_from_args
from utils.model import TextModel
from utils.train import build_optimizer, eval_period, main, run_cv

# versions: the training loop on the tiny models (transformers, accelerate)
pytestmark = pytest.mark.versions


def test_cv_outputs_and_invariants(tiny_csv, tiny_bert, tmp_path):
    out = tmp_path / "run"
    metrics = run_cv(cfg_for(tiny_csv, out, tiny_bert))
    oof = pd.read_csv(out / "oof.csv", dtype={"id": str})
    folds = pd.read_csv(out / "folds.csv", dtype={"id": str})
    train = pd.read_csv(tiny_csv, dtype={"id": str})
    assert list(oof.columns) == ["id", "target", "pred", "fold"]
    assert sorted(oof.id) == sorted(train.id) == sorted(folds.id)  # every row exactly once
    merged = oof.merge(folds, on="id", suffixes=("", "_f"))
    assert (merged.fold == merged.fold_f).all()
    rmse = float(np.sqrt(((oof.target - oof.pred) ** 2).mean()))
    assert metrics["metric"] == "rmse" and metrics["cv"] == pytest.approx(rmse)
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["cv"] == pytest.approx(rmse)
    # One vocabulary: the older keys are no longer written.
    assert not {"cv_rmse", "fold_rmse", "cv_log_loss", "mcrmse", "rmse_per_target"} & set(saved)
    for k in (0, 1):
        part = oof[oof.fold == k]
        fold_rmse = float(np.sqrt(((part.target - part.pred) ** 2).mean()))
        assert saved["fold_score"][str(k)] == pytest.approx(fold_rmse)
        hist = json.loads((out / f"fold{k}" / "history.json").read_text())
        assert min(h["rmse"] for h in hist["history"]) == pytest.approx(fold_rmse, abs=1e-5)
    assert set(saved["versions"]) >= {"torch", "transformers"}
    assert saved["seconds_per_fold"].keys() == {"0", "1"}
    assert not list(out.glob(".*.tmp"))


def test_best_checkpoint_reproduces_its_oof(tiny_csv, tiny_bert, tmp_path):
    from utils.predict import predict_run

    out = tmp_path / "run"
    run_cv(cfg_for(tiny_csv, out, tiny_bert, only_folds=(1,)))
    assert_fold_reproduces_its_oof(out, 1, tiny_csv)
    assert predict_run(out, ["a b"], progress=False).shape == (1,)


def test_weight_average_is_what_validates_and_the_training_weights_come_back_bit_for_bit():
    from utils.train import WeightAverage

    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1).to(torch.bfloat16))
    model[0].bias.requires_grad_(False)  # frozen: never averaged, never touched
    average = WeightAverage(model, decay=0.9)
    assert set(average.shadow) == {"0.weight", "1.weight", "1.bias"}
    start = {n: p.detach().float().clone() for n, p in model.named_parameters()}
    expected = dict(start)
    for step in (1, 2, 3, 40):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.37)
        average.update(step)
        d = min(0.9, (1 + step) / (10 + step))  # the ramp: 0.18, 0.25, 0.31, then the cap
        for n in average.shadow:
            expected[n] = d * expected[n] + (1 - d) * dict(model.named_parameters())[n].detach().float()
    for n, v in average.shadow.items():
        assert torch.allclose(v, expected[n], atol=1e-6) and v.dtype == torch.float32
    trained = {n: p.detach().clone() for n, p in model.named_parameters()}
    with average.validated():
        for n, p in model.named_parameters():
            if n in average.shadow:
                assert torch.equal(p, average.shadow[n].to(p.dtype)) and not torch.equal(p, trained[n])
            else:
                assert torch.equal(p, trained[n])
    for n, p in model.named_parameters():
        assert torch.equal(p, trained[n]) and p.dtype == trained[n].dtype
    off = WeightAverage(model, decay=0.0)  # --ema off: nothing copied, nothing swapped
    off.update(1)
    with off.validated():
        assert not off.shadow and all(torch.equal(p, trained[n]) for n, p in model.named_parameters())


def test_ema_keeps_and_saves_the_average_and_leaves_training_alone(tiny_csv, tiny_bert, tmp_path, monkeypatch):
    from utils.train import WeightAverage

    # Two micro-batches per optimizer step: the average moves once per step, not per micro-batch.
    common = dict(only_folds=(1,), eval_every=1, batch_size=4, grad_accum=2)
    run_cv(cfg_for(tiny_csv, tmp_path / "plain", tiny_bert, **common))
    updates, update = [], WeightAverage.update
    monkeypatch.setattr(WeightAverage, "update", lambda self, step: (updates.append(step), update(self, step)))
    run_cv(cfg_for(tiny_csv, tmp_path / "ema", tiny_bert, ema=0.9, **common))
    steps = json.loads((tmp_path / "ema" / "fold1" / "history.json").read_text())["steps"]
    assert updates == list(range(1, steps + 1)) and steps == 8  # 30 rows: 4 steps of 2 x 4 per epoch, 2 epochs
    hist = {r: json.loads((tmp_path / r / "fold1" / "history.json").read_text())["history"] for r in ("plain", "ema")}
    # The same training: the loss of every step is the same; only what is validated differs.
    assert [h["train_loss"] for h in hist["plain"]] == [h["train_loss"] for h in hist["ema"]]
    assert [h["rmse"] for h in hist["plain"]] != [h["rmse"] for h in hist["ema"]]
    assert json.loads((tmp_path / "ema" / "config.json").read_text())["ema"] == 0.9
    assert_fold_reproduces_its_oof(tmp_path / "ema", 1, tiny_csv)  # the checkpoint is the average it scored
    with pytest.raises(ValueError, match="ema must be in"):
        cfg_for(tiny_csv, tmp_path / "x", tiny_bert, ema=1.0)


def test_seed_determinism_and_shared_folds(tiny_csv, tiny_bert, tmp_path):
    a = run_cv(cfg_for(tiny_csv, tmp_path / "a", tiny_bert))
    b = run_cv(cfg_for(tiny_csv, tmp_path / "b", tiny_bert))
    run_cv(cfg_for(tiny_csv, tmp_path / "c", tiny_bert, seed=7))
    read = lambda r: pd.read_csv(tmp_path / r / "oof.csv")  # noqa: E731
    assert read("a").equals(read("b")) and a["cv"] == b["cv"]
    assert not np.allclose(read("a").pred, read("c").pred)
    folds = lambda r: pd.read_csv(tmp_path / r / "folds.csv")  # noqa: E731
    assert folds("a").equals(folds("c"))  # --seed never moves the folds


def test_resume_skips_finished_folds_and_refuses_other_arguments(tiny_csv, tiny_bert, tmp_path, capsys):
    out = tmp_path / "run"
    run_cv(cfg_for(tiny_csv, out, tiny_bert, only_folds=(0,)))
    assert json.loads((out / "metrics.json").read_text())["folds_done"] == [0]
    weights = (out / "fold0" / "kit_model.safetensors").read_bytes()
    run_cv(cfg_for(tiny_csv, out, tiny_bert))  # adds fold 1, skips fold 0
    assert "fold 0: finished earlier, skipped" in capsys.readouterr().out
    assert (out / "fold0" / "kit_model.safetensors").read_bytes() == weights
    assert json.loads((out / "metrics.json").read_text())["folds_done"] == [0, 1]
    assert len(pd.read_csv(out / "oof.csv")) == 60
    argv = ["--train-csv", str(tiny_csv), "--out", str(out), "--model", tiny_bert, "--folds", "2",
            "--epochs", "2", "--batch-size", "8", "--eval-every", "2", "--lr", "0.001",
            "--no-progress"]
    assert main(argv + ["--pooling", "mean"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "pooling: 'attention' -> 'mean'" in err and "--overwrite" in err
    assert err.count("\n") == 1
    assert main(argv + ["--pooling", "mean", "--overwrite", "--only-folds", "1"]) == 0
    assert not (out / "fold0").exists()
    assert json.loads((out / "metrics.json").read_text())["config"]["pooling"] == "mean"


def test_folds_csv_is_reused(tiny_csv, tiny_bert, tmp_path):
    ids = pd.read_csv(tiny_csv, dtype={"id": str}).id
    custom = pd.DataFrame({"id": ids, "fold": (np.arange(60) * 7) % 2})
    custom.to_csv(tmp_path / "f.csv", index=False)
    run_cv(cfg_for(tiny_csv, tmp_path / "r", tiny_bert, folds_csv=str(tmp_path / "f.csv"), max_steps=1))
    written = pd.read_csv(tmp_path / "r" / "folds.csv", dtype={"id": str})
    assert written.equals(custom)


def test_cli_defaults_match_the_issue_and_config():
    cfg = config_from_args(["--train-csv", "t.csv", "--model", "m", "--out", "o"])
    assert (cfg.pooling, cfg.folds, cfg.epochs, cfg.batch_size, cfg.max_len) == ("attention", 5, 3, 16, 256)
    assert (cfg.lr, cfg.head_lr, cfg.seed, cfg.fold_seed) == (2e-5, 1e-3, 42, 42)
    cfg = config_from_args(["--train-csv", "t", "--model", "m", "--out", "o", "--only-folds", "0", "3",
                            "--eval-schedule", "0.50:16,0.49:8,0:1", "--no-group-by-length"])
    assert cfg.only_folds == (0, 3) and cfg.eval_schedule == ((0.5, 16), (0.49, 8), (0.0, 1))
    assert not cfg.group_by_length
    with pytest.raises(ValueError, match="valid: attention, mean"):
        TrainConfig(train_csv="t", out="o", model="m", pooling="sum")


def test_eval_schedule_evaluates_more_often_as_rmse_falls():
    cfg = TrainConfig(train_csv="t", out="o", model="m",
                      eval_schedule=((0.50, 16), (0.49, 8), (0.48, 4), (0.47, 2), (0, 1)))
    assert [eval_period(cfg, r) for r in (np.inf, 0.55, 0.495, 0.485, 0.475, 0.3)] == [16, 16, 8, 4, 2, 1]
    assert eval_period(TrainConfig(train_csv="t", out="o", model="m", eval_every=40), 0.1) == 40


def test_layerwise_lr_decay_groups(tiny_bert):
    from utils.model import ModelSpec

    model = TextModel.from_backbone(tiny_bert, ModelSpec())
    cfg = TrainConfig(train_csv="t", out="o", model="m", lr=1e-4, head_lr=1e-3, llrd=0.5)
    opt = build_optimizer(model, cfg)
    lr_of = {id(p): g["lr"] for g in opt.param_groups for p in g["params"]}
    wd_of = {id(p): g["weight_decay"] for g in opt.param_groups for p in g["params"]}
    named = dict(model.named_parameters())
    assert lr_of[id(named["backbone.encoder.layer.1.output.dense.weight"])] == pytest.approx(1e-4)
    assert lr_of[id(named["backbone.encoder.layer.0.output.dense.weight"])] == pytest.approx(5e-5)
    assert lr_of[id(named["backbone.embeddings.word_embeddings.weight"])] == pytest.approx(2.5e-5)
    assert lr_of[id(named["pooling.score.0.weight"])] == pytest.approx(1e-3)
    assert wd_of[id(named["backbone.encoder.layer.1.output.dense.bias"])] == 0.0
    assert sum(len(g["params"]) for g in opt.param_groups) == len(named)


def test_se_loss_trusts_precise_targets_more():
    from utils.train import compute_loss

    comp = from_settings({})  # CommonLit: one regression target
    cfg = TrainConfig(train_csv="t", out="o", model="m", loss="se", min_se=0.05)
    preds = torch.tensor([[0.0], [0.0], [0.0]])
    y = torch.tensor([[1.0, 0.5], [1.0, 0.25], [1.0, 0.0]])  # target, standard error
    # (pred - target)^2 / (2 se^2), se clamped at min_se (the reference row has se 0)
    expected = np.mean([1 / (2 * 0.5**2), 1 / (2 * 0.25**2), 1 / (2 * 0.05**2)])
    assert compute_loss(cfg, comp, preds, y).item() == pytest.approx(expected)
    mse = TrainConfig(train_csv="t", out="o", model="m")
    assert compute_loss(mse, comp, preds, y[:, :1]).item() == pytest.approx(1.0)
    rmse_cfg = TrainConfig(train_csv="t", out="o", model="m", loss="rmse")
    assert compute_loss(rmse_cfg, comp, torch.tensor([[0.0], [0.0]]), torch.tensor([[3.0], [4.0]])).item() \
        == pytest.approx(np.sqrt(12.5), rel=1e-4)


def test_grad_accum_takes_one_optimizer_step_per_k_batches(tiny_csv, tiny_bert, tmp_path):
    # 60 rows, 2 folds: 30 training rows = 4 batches of 8 per epoch; 2 epochs.
    for accum, steps in ((1, 8), (2, 4)):
        run_cv(cfg_for(tiny_csv, tmp_path / f"a{accum}", tiny_bert, grad_accum=accum, only_folds=(0,)))
        info = json.loads((tmp_path / f"a{accum}" / "fold0" / "history.json").read_text())
        assert info["steps"] == steps


def test_bf16_precision_on_cpu_runs_in_bf16_and_keeps_fp32_weights(tiny_csv, tiny_bert, tmp_path, capsys):
    run_cv(cfg_for(tiny_csv, tmp_path / "bf16", tiny_bert, precision="bf16", only_folds=(0,)))
    assert "mixed precision bf16" in capsys.readouterr().out
    model, _ = TextModel.load(tmp_path / "bf16" / "fold0")
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    run_cv(cfg_for(tiny_csv, tmp_path / "fp32", tiny_bert, only_folds=(0,)))
    a, b = (pd.read_csv(tmp_path / r / "oof.csv").pred for r in ("bf16", "fp32"))
    assert 0 < np.abs(a - b).max() < 0.5  # the same training, rounded differently


def test_pooling_and_layer_options_shape_the_model(tiny_csv, tiny_bert, tmp_path):
    run_cv(cfg_for(tiny_csv, tmp_path / "am", tiny_bert, pooling="attention+mean", layers=2, only_folds=(0,)))
    run_cv(cfg_for(tiny_csv, tmp_path / "cls", tiny_bert, pooling="cls", only_folds=(0,)))
    am, _ = TextModel.load(tmp_path / "am" / "fold0")
    cls, _ = TextModel.load(tmp_path / "cls" / "fold0")
    assert (am.spec.pooling, am.spec.layers, cls.spec.pooling) == ("attention+mean", 2, "cls")
    state = am.state_dict()
    assert state["layer_mix.logits"].shape == (2,)
    assert not torch.equal(state["layer_mix.logits"], torch.zeros(2))  # trained, not left at init
    head = [v for k, v in state.items() if k.startswith("head") and k.endswith("weight")]
    assert head[-1].shape[-1] == 64  # attention and mean concatenated: 2 x hidden 32
    assert not any(k.startswith("layer_mix") for k in cls.state_dict())


def test_eval_schedule_sets_the_validation_steps(tiny_csv, tiny_bert, tmp_path):
    schedule = ((0.5, 3), (0, 1))
    cfg = cfg_for(tiny_csv, tmp_path / "s", tiny_bert, eval_schedule=schedule, only_folds=(0,), epochs=3)
    run_cv(cfg)
    hist = json.loads((tmp_path / "s" / "fold0" / "history.json").read_text())["history"]
    steps_per_epoch = 4
    for prev, cur in zip(hist, hist[1:]):
        gap, period = cur["step"] - prev["step"], eval_period(cfg, prev["best"])
        end_of_epoch = cur["step"] % steps_per_epoch == 0
        assert gap == period or (end_of_epoch and gap < period), (prev, cur)
    assert [h["step"] for h in hist][:2] == [3, 4]  # every 3 steps, and at the epoch's end


def test_drop_reference_leaves_the_row_out_everywhere(tmp_path, tiny_bert):
    df = tiny_frame(60)
    df.loc[5, ["id", "target", "standard_error"]] = ["436ce79fe", 0.0, 0.0]
    df.to_csv(tmp_path / "t.csv", index=False)
    run_cv(cfg_for(tmp_path / "t.csv", tmp_path / "r", tiny_bert, drop_reference=True, max_steps=1))
    for name in ("oof.csv", "folds.csv"):
        assert "436ce79fe" not in set(pd.read_csv(tmp_path / "r" / name, dtype={"id": str}).id)
    assert json.loads((tmp_path / "r" / "metrics.json").read_text())["n_oof"] == 59


def test_multi_target_regression(tmp_path, tiny_bert):
    df = tiny_frame(60).assign(content=lambda d: d.target * 0.5 + 1)
    df.to_csv(tmp_path / "t.csv", index=False)
    m = run_cv(
        cfg_for(tmp_path / "t.csv", tmp_path / "r", tiny_bert), from_settings({"target_cols": ["target", "content"]})
    )
    oof = pd.read_csv(tmp_path / "r" / "oof.csv")
    assert {"pred_target", "pred_content"} <= set(oof.columns)
    per = m["per_metric"]["rmse"]["per_target"]
    assert m["metric"] == "mcrmse" and m["cv"] == pytest.approx((per["target"] + per["content"]) / 2)


def test_classification(tmp_path, tiny_bert):
    df = tiny_frame(60)
    df["level"] = np.where(df.target < df.target.median(), "hard", "easy")
    df.to_csv(tmp_path / "t.csv", index=False)
    m = run_cv(cfg_for(tmp_path / "t.csv", tmp_path / "r", tiny_bert, num_labels=2),
               from_settings({"task": "classification", "target_cols": ["level"]}))
    oof = pd.read_csv(tmp_path / "r" / "oof.csv")
    assert np.allclose(oof[["prob_easy", "prob_hard"]].sum(axis=1), 1.0, atol=1e-6)
    assert m["metric"] == "log_loss" and m["cv"] > 0
    assert 0 <= m["per_metric"]["accuracy"]["cv"] <= 1
    acc = (oof.pred == oof.level).mean()
    assert m["per_metric"]["accuracy"]["cv"] == pytest.approx(acc)


def test_cpu_fp16_is_refused_clearly(tiny_csv, tiny_bert, tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    argv = ["--train-csv", str(tiny_csv), "--out", str(tmp_path / "r"), "--model", tiny_bert,
            "--precision", "fp16"]
    assert main(argv) == 2
    assert "fp16 needs a CUDA GPU" in capsys.readouterr().err


@pytest.mark.parametrize(
    "capability,expected",
    [((6, 0), "fp16"), ((7, 0), "fp16"), ((7, 5), "fp16"), ((8, 0), "bf16"), ((8, 9), "bf16"),
     ((9, 0), "bf16")],
    ids=["P100", "V100", "T4", "A100", "L4", "H100"],
)
def test_auto_precision_follows_compute_capability(monkeypatch, capability, expected, tiny_bert, tiny_decoders):
    # A T4 answers is_bf16_supported() == True (emulated bf16, no tensor cores): the rule must
    # not ask it. Training and inference resolve "auto" alike.
    from utils.backbone import precision_for
    from utils.train import check_backbone

    def mixed_precision(cfg):  # what accelerate is given for a run of this config here
        return check_backbone(cfg).accelerate

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    cfg = TrainConfig(train_csv="t", out="o", model=tiny_bert)
    assert mixed_precision(cfg) == expected
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[expected]
    for training in (True, False):  # the one rule: prediction resolves "auto" as training does
        prec = precision_for("auto", None, "cuda", training=training)
        assert prec.autocast_dtype == prec.weight_dtype == dtype and prec.grad_scaler == (expected == "fp16")
    assert prec.autocast("cuda").fast_dtype == dtype
    # An explicit choice is kept.
    assert mixed_precision(TrainConfig(train_csv="t", out="o", model=tiny_bert, precision="fp32")) == "no"
    assert mixed_precision(TrainConfig(train_csv="t", out="o", model=tiny_bert, precision="bf16")) == "bf16"
    # Gemma 2 never in fp16: fp32 where the GPU has no bf16
    gemma = TrainConfig(train_csv="t", out="o", model=tiny_decoders["gemma2"])
    assert mixed_precision(gemma) == ("bf16" if expected == "bf16" else "no")


def test_auto_precision_is_fp32_without_cuda(monkeypatch, tiny_bert):
    from utils.backbone import precision_for
    from utils.train import check_backbone

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert check_backbone(TrainConfig(train_csv="t", out="o", model=tiny_bert)).accelerate == "no"
    with pytest.raises(ValueError, match="fp16 needs a CUDA GPU"):
        precision_for("fp16")
    # Prediction off CUDA: a frozen base loads in fp32 whatever was asked, and nothing is refused.
    assert precision_for("bf16", training=False).weight_dtype == torch.float32
    assert precision_for("fp16", training=False).name == "fp16"


def test_a_fold_that_never_improves_stops_with_one_clear_line(tiny_csv, tiny_bert, tmp_path, capsys,
                                                              monkeypatch):
    import utils.train as train

    real = train.compute_loss
    # Every loss NaN from the first step: the weights turn NaN, every validation score is NaN.
    monkeypatch.setattr(train, "compute_loss", lambda *a: real(*a) * float("nan"))
    out = tmp_path / "r"
    argv = ["--train-csv", str(tiny_csv), "--out", str(out), "--model", tiny_bert, "--folds", "2",
            "--epochs", "2", "--batch-size", "8", "--eval-every", "2", "--no-progress"]
    assert main(argv) == 2
    from helpers import assert_one_line_error

    assert_one_line_error(capsys.readouterr().err, "error: fold 0: no finite validation score in 2 steps",
                          "weights became NaN/inf by step 2", "lower --lr", "--precision fp32 or bf16")
    # Nothing half-written: no fold folder, no OOF, no metrics, no temp files.
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "folds.csv"]


def test_a_fold_that_diverges_after_improving_keeps_its_best_checkpoint(tiny_csv, tiny_bert, tmp_path,
                                                                       monkeypatch, capsys):
    import utils.train as train

    real, calls = train.compute_loss, {"n": 0}

    def loss_then_nan(*a):
        calls["n"] += 1
        return real(*a) * (float("nan") if calls["n"] > 4 else 1.0)

    monkeypatch.setattr(train, "compute_loss", loss_then_nan)
    out = tmp_path / "r"
    m = run_cv(cfg_for(tiny_csv, out, tiny_bert, only_folds=(0,), epochs=4))
    hist = json.loads((out / "fold0" / "history.json").read_text())
    assert np.isfinite(m["cv"]) and hist["steps"] < 4 * 4  # stopped early
    assert m["cv"] == pytest.approx(min(h["rmse"] for h in hist["history"] if np.isfinite(h["rmse"])))
    assert "weights became NaN/inf at step" in capsys.readouterr().out


def test_head_tail_fitting_is_saved_with_the_run_and_used_in_prediction(tiny_csv, tiny_bert, tmp_path, capsys):
    from utils.model import TextModel
    from utils.predict import predict_model, predict_run

    run_cv(cfg_for(tiny_csv, tmp_path / "r", tiny_bert, max_len=12, fit="head_tail", only_folds=(0,), max_steps=2))
    assert "texts truncated to max_len 12 (their first and last tokens kept)" in capsys.readouterr().out
    texts = pd.read_csv(tiny_csv).excerpt.tolist()[:6]
    model, tok = TextModel.load(tmp_path / "r" / "fold0")
    tail = predict_model(model, tok, texts, 12, fit="head_tail")[:, 0]
    head = predict_model(model, tok, texts, 12, fit="head")[:, 0]
    assert np.allclose(predict_run(tmp_path / "r", texts, progress=False), tail, atol=1e-6)
    assert not np.allclose(tail, head)  # the fitting matters, and prediction used the run's own
    with pytest.raises(ValueError, match="unknown fit 'middle'; valid: head, head_tail, windows"):
        cfg_for(tiny_csv, tmp_path / "x", tiny_bert, fit="middle")


def test_sliding_windows_train_validate_and_predict_as_the_mean_of_the_windows(tiny_csv, tiny_bert, tmp_path, capsys):
    import torch

    from utils.batching import Collator, encode_windows
    from utils.model import TextModel
    from utils.predict import predict_run

    run_cv(cfg_for(tiny_csv, tmp_path / "r", tiny_bert, max_len=12, fit="windows", only_folds=(0,), max_steps=2))
    assert "read in overlapping windows, predictions averaged" in capsys.readouterr().out
    texts = pd.read_csv(tiny_csv).excerpt.tolist()[:6]
    model, tok = TextModel.load(tmp_path / "r" / "fold0")
    wins, owner, _ = encode_windows(texts, tok, 12)
    assert len(wins) > len(texts)
    batch = Collator(tok.pad_token_id or 0)([{"input_ids": w, "index": i} for i, w in enumerate(wins)])
    with torch.no_grad():  # every window predicted alone
        alone = model.eval()(batch["input_ids"], batch["attention_mask"]).float().numpy()[:, 0]
    mean = [alone[np.asarray(owner) == i].mean() for i in range(len(texts))]
    assert np.allclose(predict_run(tmp_path / "r", texts, progress=False), mean, atol=1e-4)
    oof = pd.read_csv(tmp_path / "r" / "oof.csv")
    assert len(oof) == 30 and oof["pred"].notna().all()  # one validation row per text, not per window


@pytest.mark.parametrize("cli", ["train", "pretrain"])
def test_every_option_says_what_it_does_and_its_default(cli):
    """--help comes from the dataclass: each field's comment and default, so it cannot drift."""
    import dataclasses

    from utils import config, pretrain

    parser, classes = (config.build_parser(), (TrainConfig, config.Columns)) if cli == "train" else (
        pretrain.build_parser(), (pretrain.PretrainConfig,))
    actions = {a.dest: a for a in parser._actions if a.dest != "help"}
    fields = [f for cls in classes for f in dataclasses.fields(cls)]
    assert set(actions) == {f.name for f in fields}
    for f in fields:
        assert actions[f.name].help, f"--{f.name.replace('_', '-')} has no help"
    text = " ".join(parser.format_help().split())
    if cli == "train":
        assert "--layers LAYERS pool a learned mix of the last N hidden layers (default: 1)" in text
        assert ("--fit FIT a longer text: head = first tokens; head_tail = first quarter + end; windows = "
                "overlapping windows, predictions averaged (empty: the competition's) --") in text
        assert "--competition COMPETITION built-in slug or competition.json (empty: the column flags below) --" in text
    else:
        assert "--mlm-probability MLM_PROBABILITY share of tokens masked" in text


def test_a_run_says_how_to_reproduce_it(tiny_csv, tiny_bert, tmp_path):
    """metrics.json: the command that makes the run's config, the git commit and whether the tree
    was dirty (from a checkout), the hardware, the training file's sha256, seconds per fold."""
    import dataclasses
    import hashlib
    import shlex
    import subprocess
    from pathlib import Path

    from utils.config import for_competition, parse_args

    cfg = cfg_for(tiny_csv, tmp_path / "r", tiny_bert, max_steps=1, pooling="mean",
                  eval_schedule=((0.5, 2), (0.0, 1)), backbone_dropout=True)
    m = run_cv(cfg)
    again, comp = parse_args(shlex.split(m["command"])[3:])
    # the run's config as it records it (fit filled in), run control (progress) aside; its competition
    assert again == dataclasses.replace(for_competition(cfg, comp), progress=True)
    assert comp == from_settings({})
    root = Path(__file__).resolve().parents[1]
    if (root / ".git").exists():
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        assert m["git"]["commit"] == head and isinstance(m["git"]["dirty"], bool)
    assert (
        m["hardware"]["cpu"] and m["hardware"]["cpu_count"] >= 1
        and m["hardware"]["gpu_count"] == len(m["hardware"]["gpus"])
    )
    assert m["config"]["train_csv_sha256"] == hashlib.sha256(Path(tiny_csv).read_bytes()).hexdigest()
    assert set(m["seconds_per_fold"]) == {0, 1}
    import socket

    assert socket.gethostname() not in json.dumps(m["hardware"])


def test_out_of_memory_halves_the_micro_batch_and_keeps_the_effective_batch(tiny_csv, tiny_bert, tmp_path,
                                                                            monkeypatch, capsys):
    """A fake CUDA out-of-memory error for training batches above 4 texts: the run completes at
    micro-batch 4 x 4 accumulation steps, with the optimizer steps of a run made at 4 x 4."""
    from utils.model import TextModel

    forward = TextModel.forward

    def small_memory(self, input_ids, attention_mask):
        if self.training and input_ids.shape[0] > 4:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return forward(self, input_ids, attention_mask)

    monkeypatch.setattr(TextModel, "forward", small_memory)
    m = run_cv(cfg_for(tiny_csv, tmp_path / "r", tiny_bert, batch_size=16, epochs=1, eval_every=100))
    log = capsys.readouterr().out
    assert "fold 0: out of memory at micro-batch 16; now 8 x 2 accumulation steps (effective batch 16" in log
    assert "fold 0: out of memory at micro-batch 8; now 4 x 4 accumulation steps" in log
    assert "fold 1: out of memory" not in log  # the next fold starts at the size that fits
    monkeypatch.setattr(TextModel, "forward", forward)
    ref = run_cv(cfg_for(tiny_csv, tmp_path / "ref", tiny_bert, batch_size=4, grad_accum=4, epochs=1, eval_every=100))
    for k in (0, 1):
        h = json.loads((tmp_path / "r" / f"fold{k}" / "history.json").read_text())
        h_ref = json.loads((tmp_path / "ref" / f"fold{k}" / "history.json").read_text())
        assert (h["batch_size"], h["grad_accum"]) == (4, 4) and h["steps"] == h_ref["steps"]
    assert m["config"]["batch_size"] == 16 and np.isfinite(m["cv"]) and np.isfinite(ref["cv"])


def test_log_with_tensorboard_writes_every_validation_of_every_fold(tiny_csv, tiny_bert, tmp_path):
    """--log-with tensorboard (accelerate's tracker): the event file, read back by TensorBoard's own
    reader, holds each validation's metric, training loss and learning rate, per fold, at its step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_cv(cfg_for(tiny_csv, tmp_path / "r", tiny_bert, max_steps=4, log_with="tensorboard"))
    events = list((tmp_path / "r" / "logs").rglob("events.out.tfevents.*"))
    assert events
    acc = EventAccumulator(str(events[0].parent))
    acc.Reload()
    for k in (0, 1):
        h = json.loads((tmp_path / "r" / f"fold{k}" / "history.json").read_text())["history"]
        for tag, key in ((f"fold{k}/valid_rmse", "rmse"), (f"fold{k}/train_loss", "train_loss"), (f"fold{k}/lr", "lr")):
            logged = [(e.step, e.value) for e in acc.Scalars(tag)]
            assert [s for s, _ in logged] == [e["step"] for e in h]
            assert np.allclose([v for _, v in logged], [e[key] for e in h], rtol=1e-5)
    assert json.loads((tmp_path / "r" / "config.json").read_text()).get("log_with") is None  # not part of a run


def test_progress_bars_do_not_flood_a_log_file(tiny_csv, tiny_bert, tmp_path):
    """Output to a file (a log, a Kaggle batch run): no bar redraws, one line per validation."""
    import subprocess
    import sys

    argv = [sys.executable, "-m", "utils.train", "--train-csv", str(tiny_csv), "--out", str(tmp_path / "r"),
            "--model", tiny_bert, "--folds", "2", "--max-steps", "4", "--eval-every", "2", "--batch-size", "8",
            "--progress"]
    with open(tmp_path / "log.txt", "w") as log:
        assert subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, timeout=600).returncode == 0
    text = (tmp_path / "log.txt").read_text()
    assert "\r" not in text and "it/s]" not in text
    assert len([ln for ln in text.splitlines() if " step " in ln and "valid rmse" in ln]) == 4
    test = tmp_path / "test.csv"
    pd.read_csv(tiny_csv).drop(columns=["target", "standard_error"]).to_csv(test, index=False)
    predict = [sys.executable, "-m", "utils.predict", "--test-csv", str(test), "--runs", str(tmp_path / "r"),
               "--out", str(tmp_path / "s.csv"), "--no-sample-submission"]
    with open(tmp_path / "plog.txt", "w") as log:
        assert subprocess.run(predict, stdout=log, stderr=subprocess.STDOUT, timeout=600).returncode == 0
    text = (tmp_path / "plog.txt").read_text()
    assert "\r" not in text and "it/s]" not in text and "wrote" in text


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_head_bias_mean_starts_the_head_at_the_training_rows_mean(tmp_path, tiny_bert, task):
    from safetensors.torch import load_file

    df = tiny_frame(60).assign(content=lambda d: d.target * 0.5 + 3)  # scores far from 0, as essays'
    df["level"] = np.where(df.target < df.target.quantile(0.3), "hard", "easy")  # 70/30 classes
    df.to_csv(tmp_path / "t.csv", index=False)
    # a third class never seen:
    kw, comp = (({}, from_settings({"target_cols": ["target", "content"]})) if task == "regression"
                else ({"num_labels": 3}, from_settings({"task": "classification", "target_cols": ["level"]})))
    start = {}
    for on in (False, True):  # lr 0: the saved head is the head as it started
        out = tmp_path / f"r{on}"
        run_cv(cfg_for(tmp_path / "t.csv", out, tiny_bert, lr=0.0, head_lr=0.0, max_steps=2, only_folds=(0,),
                       head_bias_mean=on, **kw), comp)
        start[on] = load_file(out / "fold0" / "kit_model.safetensors")
    folds = pd.read_csv(out / "folds.csv", dtype={"id": str})
    train = df[df.id.isin(folds.id[folds.fold != 0])]
    if task == "regression":
        expected = train[["target", "content"]].mean().to_numpy()
    else:  # class shares in the kit's label order (sorted: easy, hard), then the unseen third class
        expected = np.append(train.level.value_counts(normalize=True).sort_index().to_numpy(), 0.0)
    # What a blank text is predicted as: the same means (shares), with the option or without.
    assert np.allclose(json.loads((out / "fold0" / "history.json").read_text())["target_mean"], expected)
    if task == "classification":
        expected = np.log(np.maximum(expected, 1e-6))  # logits whose softmax is the shares
    assert np.allclose(start[True]["head.bias"].numpy(), expected, atol=1e-5)
    assert not np.allclose(start[False]["head.bias"].numpy(), expected, atol=0.1)  # the default: near 0
    # Only the bias differs: the same seed draws the same head and pooling.
    assert torch.equal(start[True]["head.weight"], start[False]["head.weight"])


def test_a_correlation_metric_chooses_checkpoints_and_is_reported(tiny_csv, tiny_bert, tmp_path):
    """A competition scored by Pearson (greater is better): checkpoints maximise it, metrics.json
    reports it over the OOF rows, the loss's RMSE beside it."""
    from utils.competition import BUILTIN, Competition
    from utils.metrics import pearson

    comp = Competition.from_dict({**BUILTIN["commonlitreadabilityprize"].to_dict(), "slug": "by-pearson",
                                  "metric": "pearson"})
    comp.save(tmp_path / "competition.json")
    out = tmp_path / "r"
    m = run_cv(cfg_for(tiny_csv, out, tiny_bert, competition=str(tmp_path / "competition.json")))
    oof = pd.read_csv(out / "oof.csv")
    assert m["metric"] == "pearson" and m["cv"] == pytest.approx(pearson(oof[["target"]], oof[["pred"]]))
    assert set(m["per_metric"]) == {"rmse"}
    for k in (0, 1):
        hist = json.loads((out / f"fold{k}" / "history.json").read_text())["history"]
        part = oof[oof.fold == k]
        assert m["fold_score"][k] == pytest.approx(pearson(part[["target"]], part[["pred"]]))
        assert max(h["pearson"] for h in hist) == pytest.approx(m["fold_score"][k], abs=1e-5)  # the best kept


class Stop(Exception):
    pass


@pytest.mark.parametrize("settings", [
    dict(eval_every=3, save_every=1, head_dropout=0.3, backbone_dropout=True),  # dropout draws restored
    dict(eval_every=1, grad_accum=2, batch_size=4, ema=0.9),  # saved at validations only
])
def test_a_fold_stopped_mid_epoch_resumes_to_the_identical_result(tiny_csv, tiny_bert, tmp_path, capsys, settings):
    from utils import resume

    common = dict(only_folds=(1,), epochs=3, **settings)
    ref = tmp_path / "ref"
    run_cv(cfg_for(tiny_csv, ref, tiny_bert, **common))
    out = tmp_path / "run"

    def stop(fold, step, value):  # killed at the validation of step 7 (of 4 per epoch), before its save
        if step == 7:
            raise Stop

    with pytest.raises(Stop):
        run_cv(cfg_for(tiny_csv, out, tiny_bert, **common), on_validation=stop)
    saved = json.loads((resume.folder(out, 1) / "progress.json").read_text())
    assert saved["step"] == 6 and saved["epoch"] == 1 and not (out / "fold1").exists()  # mid-epoch
    capsys.readouterr()
    run_cv(cfg_for(tiny_csv, out, tiny_bert, **common))  # the same command again
    log = capsys.readouterr().out
    assert f"fold 1: resumed at step {saved['step']}/" in log
    assert f"fold 1 step {saved['step']}/" not in log  # nothing before the saved step is trained again
    assert (out / "oof.csv").read_bytes() == (ref / "oof.csv").read_bytes()  # identical, not close
    hist = lambda r: json.loads((r / "fold1" / "history.json").read_text())  # noqa: E731
    assert hist(out)["history"] == hist(ref)["history"]
    assert hist(out)["predict_seconds"] > 0  # the last validation's time, beside the history (it differs)
    assert hist(out)["steps"] == hist(ref)["steps"]
    assert not resume.folder(out, 1).exists()  # dropped once the fold is written


def test_a_saved_fold_refuses_other_arguments_and_restarts_at_another_micro_batch(tiny_csv, tiny_bert, tmp_path,
                                                                                   capsys):
    from utils import resume

    out = tmp_path / "run"

    def stop(fold, step, value):
        raise Stop

    with pytest.raises(Stop):
        run_cv(cfg_for(tiny_csv, out, tiny_bert, only_folds=(0,)), on_validation=stop)
    assert resume.pending(out) == [] and not resume.folder(out, 0).exists()  # stopped before the first save
    with pytest.raises(Stop):
        run_cv(cfg_for(tiny_csv, out, tiny_bert, only_folds=(0,), save_every=1),
               on_validation=lambda f, s, v: s == 4 and stop(f, s, v))
    assert resume.pending(out) == [0]
    # Another argument while a fold is saved: refused in one line, nothing deleted.
    with pytest.raises(RuntimeError, match="different arguments") as e:
        run_cv(cfg_for(tiny_csv, out, tiny_bert, only_folds=(0,), lr=2e-3))
    assert "\n" not in str(e.value) and resume.pending(out) == [0]
    # A state of another micro-batch than the run can take (an out-of-memory retry halves it, so a
    # smaller one that divides the batch goes on): the fold starts over, said in one line.
    capsys.readouterr()
    state = resume.folder(out, 0) / "progress.json"
    state.write_text(json.dumps({**json.loads(state.read_text()), "micro_batch": 5}))
    with pytest.raises(Stop):
        run_cv(cfg_for(tiny_csv, out, tiny_bert, only_folds=(0,), batch_size=8),
               on_validation=lambda f, s, v: s == 4 and stop(f, s, v))
    log = capsys.readouterr().out
    assert "fold 0: its saved state was trained at micro-batch 5, not 8: the fold starts over" in log
    # Another number of processes deals other batches: the fold starts over too.
    state.write_text(json.dumps({**json.loads(state.read_text()), "processes": 2}))
    run_cv(cfg_for(tiny_csv, out, tiny_bert, only_folds=(0,), batch_size=8))
    log = capsys.readouterr().out
    assert "fold 0: its saved state was trained by 2 process(es), not 1: the fold starts over" in log
    assert (out / "fold0").is_dir() and resume.pending(out) == []
    # --save-every -1: nothing is saved to go on from.
    with pytest.raises(Stop):
        run_cv(cfg_for(tiny_csv, tmp_path / "never", tiny_bert, only_folds=(0,), save_every=-1),
               on_validation=lambda f, s, v: s == 4 and stop(f, s, v))
    assert not (tmp_path / "never" / "resume").exists()


def test_a_fold_that_fails_leaves_no_state_for_the_corrected_command_to_refuse(tiny_csv, tiny_bert, tmp_path,
                                                                                monkeypatch):
    import utils.train as train
    from utils import resume

    real = train.scores
    # Every validation scores NaN (a broken metric): states are saved, then the fold fails.
    monkeypatch.setattr(train, "scores", lambda *a: {**real(*a), "score": float("nan"), "rmse": float("nan")})
    out = tmp_path / "r"
    with pytest.raises(train.TrainingError, match="scored each validation NaN"):
        run_cv(cfg_for(tiny_csv, out, tiny_bert, only_folds=(0,)))
    assert resume.pending(out) == [] and not (out / "resume").exists()
    monkeypatch.setattr(train, "scores", real)
    assert run_cv(cfg_for(tiny_csv, out, tiny_bert, only_folds=(0,), lr=2e-3))["folds_done"] == [0]
