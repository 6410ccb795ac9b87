import json

import numpy as np
import pandas as pd
import pytest
from conftest import tiny_frame
from helpers import cfg_for

from utils.ensemble import (
    blend_report,
    blend_weights,
    fit_weights,
    honest_blend,
    load_members,
    load_oofs,
    normalize_weights,
    save_blend,
)
from utils.metrics import get_metric
from utils.objective import REGRESSION
from utils.predict import check_submission, main, predict, predict_run
from utils.train import run_cv


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, tiny_bert):
    d = tmp_path_factory.mktemp("runs")
    tiny_frame(60).to_csv(d / "train.csv", index=False)
    tiny_frame(9, seed=5).drop(columns=["target", "standard_error"]).to_csv(d / "test.csv", index=False)
    for name, pooling in (("attn", "attention"), ("mean", "mean")):
        run_cv(cfg_for(d / "train.csv", d / name, tiny_bert, pooling=pooling))
    return d


def test_predict_cli_writes_checked_submission_in_test_order(two_runs, capsys):
    d = two_runs
    report = blend_report([d / "attn", d / "mean"])
    save_blend(d / "blend.json", report)
    out = d / "submission.csv"
    test = pd.read_csv(d / "test.csv", dtype={"id": str})
    test[["id"]].assign(target=0.0).to_csv(d / "sample_submission.csv", index=False)  # what checks it
    rc = main(["--test-csv", str(d / "test.csv"), "--runs", str(d / "attn"), str(d / "mean"),
               "--blend", str(d / "blend.json"), "--out", str(out)])
    assert rc == 0
    sub = pd.read_csv(out, dtype={"id": str})
    assert list(sub.columns) == ["id", "target"] and sub.id.tolist() == test.id.tolist()
    texts = test.excerpt.tolist()
    a, b = predict_run(d / "attn", texts, progress=False), predict_run(d / "mean", texts, progress=False)
    w = report["weights"]
    assert np.allclose(sub.target, w[0] * a + w[1] * b, atol=1e-6)
    assert np.allclose(predict([d / "attn", d / "mean"], texts, progress=False), (a + b) / 2)
    assert "attn:" in capsys.readouterr().out


def test_predict_cli_errors_are_one_line(two_runs, tmp_path, capsys):
    d = two_runs
    pd.DataFrame(columns=["id", "excerpt"]).to_csv(tmp_path / "empty.csv", index=False)
    cases = [
        (["--test-csv", str(tmp_path / "empty.csv"), "--runs", str(d / "attn")], "empty.csv has no data rows"),
        (["--test-csv", str(d / "test.csv"), "--runs", str(tmp_path / "nope")], "run folder not found"),
        (
            ["--test-csv", str(d / "test.csv"), "--runs", str(d / "attn"), "--weights", "1", "2"],
            "2 blend weights for 1 runs",
        ),
    ]
    for argv, msg in cases:
        assert main(argv + ["--out", str(tmp_path / "s.csv")]) == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1
    assert not (tmp_path / "s.csv").exists()


def test_submission_with_other_ids_is_refused():
    test = pd.DataFrame({"id": ["a", "b"], "excerpt": ["x", "y"]})
    check_submission(pd.DataFrame({"id": ["a", "b"], "target": [0.1, 0.2]}), test)
    with pytest.raises(ValueError, match="ids differ"):
        check_submission(pd.DataFrame({"id": ["a", "c"], "target": [0.1, 0.2]}), test)
    with pytest.raises(ValueError, match="order differs"):
        check_submission(pd.DataFrame({"id": ["b", "a"], "target": [0.1, 0.2]}), test)
    with pytest.raises(ValueError, match="non-finite"):
        check_submission(pd.DataFrame({"id": ["a", "b"], "target": [0.1, np.nan]}), test)


def test_blend_weights_nonnegative_sum_to_one_and_honest():
    rng = np.random.default_rng(0)
    y = rng.normal(size=400)
    good, bad = y + rng.normal(0, 0.3, 400), y + rng.normal(0, 0.9, 400)
    useless = rng.normal(size=400)
    P = np.stack([good, bad, useless], axis=1)
    w = fit_weights(P, y)
    assert (w >= 0).all() and w.sum() == pytest.approx(1.0)
    assert w[0] > w[1] and w[2] < 0.05
    folds = np.arange(400) % 5
    # One target's honest blend: fold k's weights fitted on the other folds, applied to fold k.
    cv_pred, _, per_fold, _ = honest_blend(P[:, :, None], y.reshape(-1, 1), folds, REGRESSION, get_metric("rmse"))
    cv_pred = cv_pred[:, 0]
    in_sample = np.sqrt(np.mean((P @ w - y) ** 2))
    assert np.sqrt(np.mean((cv_pred - y) ** 2)) >= in_sample - 1e-9  # CV estimate is not optimistic
    assert len(per_fold) == 5
    assert normalize_weights([1, 3], 2).tolist() == [0.25, 0.75]
    with pytest.raises(ValueError, match="non-negative"):
        normalize_weights([-1, 2], 2)


def test_blend_report_and_json_format(two_runs):
    d = two_runs
    r = blend_report([d / "attn", d / "mean"])
    assert r["runs"] == ["attn", "mean"] and sum(r["weights"]) == pytest.approx(1.0)
    assert r["score_blend_in_sample"] <= min(r["scores"].values()) + 1e-9
    save_blend(d / "b.json", r)
    assert blend_weights(d / "b.json", [d / "mean", d / "attn"])[0].tolist() == r["weights"][::-1]
    assert json.loads((d / "b.json").read_text())["weights"] == r["weights"]
    df = load_oofs([d / "attn", d / "mean"])
    assert len(df) == 60 and {"attn", "mean", "fold", "target"} <= set(df.columns)
    m = load_members([d / "attn", d / "mean"])
    assert m["P"].shape == (60, 2, 1) and m["names"] == ["attn", "mean"] and m["truth"] == ["target"]
    assert np.allclose(m["P"][:, :, 0], df[["attn", "mean"]]) and np.allclose(m["y"][:, 0], df["target"])


def test_runs_with_different_folds_are_refused(two_runs, tiny_bert, tmp_path):
    d = two_runs
    run_cv(cfg_for(d / "train.csv", tmp_path / "other", tiny_bert, fold_seed=1, max_steps=1))
    with pytest.raises(ValueError, match="folds.csv differs"):
        load_members([d / "attn", tmp_path / "other"])


def test_blend_of_any_number_of_runs_plus_a_baseline_on_the_same_folds(two_runs, tiny_bert):
    from utils.ensemble import add_oof

    d = two_runs
    # A third member: another training seed (4th place averaged 5 seeds x 5 folds).
    run_cv(cfg_for(d / "train.csv", d / "attn-seed1", tiny_bert, seed=1))
    runs = [d / "attn", d / "mean", d / "attn-seed1"]
    oofs = load_oofs(runs)
    # A baseline that knows the answer up to noise: the blend must lean on it.
    rng = np.random.default_rng(0)
    oracle = pd.Series(oofs["target"].to_numpy() + rng.normal(0, 0.05, len(oofs)), index=oofs["id"])
    r = blend_report(runs, extra={"oracle": oracle})
    assert r["runs"] == ["attn", "mean", "attn-seed1", "oracle"]
    assert len(r["weights"]) == 4 and sum(r["weights"]) == pytest.approx(1.0)
    assert min(r["weights"]) >= 0 and r["weights"][3] > 0.8
    assert np.shape(r["correlation"]) == (4, 4)
    assert r["score_blend_cv"] < min(v for k, v in r["scores"].items() if k != "oracle")
    # The equal-weight average is the plain mean of the members' OOF columns.
    members = add_oof(oofs, "oracle", oracle)[r["runs"]].to_numpy()
    truth = oofs["target"].to_numpy()
    assert r["score_equal_average"] == pytest.approx(float(np.sqrt(((members.mean(1) - truth) ** 2).mean())))
    # The figure shows every member: bars for each, and their 4 x 4 correlation matrix.
    from utils import plots

    fig = plots.blend_figure(r, add_oof(oofs, "oracle", oracle))
    assert len(fig.axes) == 3 and len(fig.axes[1].patches) == 4 and len(fig.axes[2].texts) == 16
    assert len(plots.blend_figure(blend_report(runs[:1])).axes) == 2  # one run: nothing to compare
    with pytest.raises(ValueError, match="oracle has no out-of-fold prediction for 1 of"):
        blend_report(runs, extra={"oracle": oracle.iloc[1:]})
    with pytest.raises(ValueError, match="two blend members are named 'mean'"):
        blend_report(runs, extra={"mean": oracle})


def test_ensemble_cli_writes_the_blend_predict_reads(two_runs, tmp_path, capsys):
    from utils.ensemble import main

    d = two_runs
    out = tmp_path / "blend.json"
    assert main(["--runs", str(d / "attn"), str(d / "mean"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "blend, weights fitted inside CV (honest)" in text and f"wrote {out}" in text
    report = blend_report([d / "attn", d / "mean"])
    assert blend_weights(out, [d / "attn", d / "mean"])[0].tolist() == pytest.approx(report["weights"])
    assert main(["--runs", str(d / "attn"), str(tmp_path / "missing"), "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith("error: ")
