"""A blend.json and the runs it is applied to: prediction and pseudo-labelling take exactly the
runs the blend was fitted on (by folder name and by identity: a run retrained in a folder of the
same name is another run), and never average runs of two competitions. Every refusal is one line,
exit code 2, nothing written, and comes from saved files before any model loads."""

import shutil

import pandas as pd
import pytest
from conftest import tiny_frame
from helpers import assert_one_line_error, cfg_for, change_weights, pseudo_argv, tiny_data

from utils import ensemble, predict, pseudo
from utils.model import TextModel
from utils.runs import identity, read_metrics, write_metrics
from utils.train import run_cv


@pytest.fixture(scope="module")
def fitted(tmp_path_factory, tiny_bert):
    """Two CommonLit runs (attn, mean) on the same folds, their blend.json, a test file and a
    file of texts to pseudo-label."""
    d = tmp_path_factory.mktemp("members")
    tiny_frame(40).to_csv(d / "train.csv", index=False)
    tiny_frame(6, seed=5).drop(columns=["target", "standard_error"]).to_csv(d / "test.csv", index=False)
    tiny_frame(6, seed=9)[["id", "excerpt"]].assign(id=lambda f: "new" + f.id).to_csv(d / "texts.csv", index=False)
    for name, pooling in (("attn", "attention"), ("mean", "mean")):
        run_cv(cfg_for(d / "train.csv", d / "runs" / name, tiny_bert, pooling=pooling, max_steps=2))
    ensemble.save_blend(d / "blend.json", ensemble.blend_report([d / "runs" / "attn", d / "runs" / "mean"]))
    return d


def runs_of(folder) -> list:
    return [folder / "attn", folder / "mean"]


def predict_argv(d, runs, out, *extra) -> list:
    return ["--test-csv", str(d / "test.csv"), "--runs", *map(str, runs), "--out", str(out), "--no-sample-submission",
            *map(str, extra)]


@pytest.fixture()
def no_model_loads(monkeypatch):
    """Loading a model raises: a refusal must come from the saved files alone."""

    def refuse(*a, **k):
        raise AssertionError("a model was loaded before the checks on saved files")

    monkeypatch.setattr(TextModel, "load", refuse)


def assert_refused(cli, argv, out, capsys, *parts):
    assert cli.main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, *parts)
    assert not out.exists()


def retrained_copy(src, dst, fold: int = 0):
    """A copy of run `src` in `dst` whose fold's weights differ (as if that fold were trained
    again): same folder name, same config and folds, another run."""
    shutil.copytree(src, dst)
    change_weights(dst, fold)
    return dst


def test_exact_copies_of_the_blends_runs_predict(fitted, tmp_path, capsys):
    """Copies of the runs (e.g. a models dataset) are the same runs: the blend applies."""
    copies = tmp_path / "copies"
    for run in runs_of(fitted / "runs"):
        shutil.copytree(run, copies / run.name)
    assert [identity(r) for r in runs_of(copies)] == [identity(r) for r in runs_of(fitted / "runs")]
    out = tmp_path / "s.csv"
    assert predict.main(predict_argv(fitted, runs_of(copies), out, "--blend", fitted / "blend.json")) == 0
    assert len(pd.read_csv(out)) == 6


def test_a_blend_applied_to_other_runs_of_the_same_names_is_refused(fitted, tmp_path, capsys, no_model_loads):
    """blend.json fitted on attn and mean, given attn and mean of another folder where attn's fold 0
    was trained again: predict and pseudo stop in one line naming the run."""
    other = tmp_path / "other"
    retrained_copy(fitted / "runs" / "attn", other / "attn")
    shutil.copytree(fitted / "runs" / "mean", other / "mean")
    assert identity(other / "attn") != identity(fitted / "runs" / "attn")
    assert identity(other / "mean") == identity(fitted / "runs" / "mean")
    blend = fitted / "blend.json"
    out = tmp_path / "s.csv"
    parts = ("blend.json was fitted on another run named 'attn'", "fit the blend again on these runs")
    assert_refused(predict, predict_argv(fitted, runs_of(other), out, "--blend", blend), out, capsys, *parts)
    out = tmp_path / "p.csv"
    assert_refused(pseudo, pseudo_argv(fitted, runs_of(other), out, "--blend", blend), out, capsys, *parts)
    assert not out.with_suffix(".json").exists()


def test_a_blend_given_some_of_its_runs_is_refused(fitted, tmp_path, capsys, no_model_loads):
    blend = fitted / "blend.json"
    for runs, what in (([fitted / "runs" / "attn"], "its member(s) mean not given"),
                       ([fitted / "runs" / "mean"], "its member(s) attn not given")):
        out = tmp_path / "s.csv"
        assert_refused(predict, predict_argv(fitted, runs, out, "--blend", blend), out, capsys,
                       "blend.json blends attn, mean, not the runs given", what)
        out = tmp_path / "p.csv"
        assert_refused(pseudo, pseudo_argv(fitted, runs, out, "--blend", blend), out, capsys,
                       "blend.json blends attn, mean, not the runs given", what)


@pytest.fixture(scope="module")
def tweets_run(tmp_path_factory, tiny_bert):
    """A tiny run of the tweets competition (nlp-getting-started: a binary classifier)."""
    slug = "nlp-getting-started"
    d = tmp_path_factory.mktemp("tweets")
    data = tiny_data(slug, d / "data", 24)
    run_cv(cfg_for(data / "train.csv", d / "tweets", tiny_bert, competition=slug, max_steps=1, max_len=32))
    return d / "tweets"


def test_runs_of_two_competitions_are_refused(fitted, tweets_run, tmp_path, capsys, no_model_loads):
    """A tweets classifier and a CommonLit regression: predict and pseudo stop in one line naming
    both competitions (never an average of a probability and a readability score)."""
    commonlit = fitted / "runs" / "attn"
    for runs in ([commonlit, tweets_run], [tweets_run, commonlit]):
        out = tmp_path / "s.csv"
        assert_refused(predict, predict_argv(fitted, runs, out), out, capsys, "nlp-getting-started",
                       "commonlitreadabilityprize", "only runs of the same competition average or blend")
        out = tmp_path / "p.csv"
        assert_refused(pseudo, pseudo_argv(fitted, runs, out), out, capsys, "nlp-getting-started",
                       "commonlitreadabilityprize", "only runs of the same competition average or blend")


def test_runs_of_two_competitions_with_the_same_outputs_are_refused(fitted, tmp_path, capsys, no_model_loads):
    """Two regressions of one column named 'target' on the same folds, of other competitions: the
    models' outputs agree, the competitions do not."""
    other = tmp_path / "other-comp"
    shutil.copytree(fitted / "runs" / "mean", other)
    metrics = read_metrics(other)
    comp = dict(metrics["competition"], slug="another-readability-contest")
    write_metrics(other, {**metrics, "competition": comp})
    runs = [fitted / "runs" / "attn", other]
    out = tmp_path / "s.csv"
    assert_refused(predict, predict_argv(fitted, runs, out), out, capsys,
                   "other-comp was trained for another-readability-contest", "commonlitreadabilityprize")
    out = tmp_path / "p.csv"
    assert_refused(pseudo, pseudo_argv(fitted, runs, out), out, capsys,
                   "other-comp was trained for another-readability-contest", "commonlitreadabilityprize")
    # Blending them, and bundling them, is refused the same way (before any fit or weight conversion).
    assert_refused(ensemble, ["--runs", *map(str, runs), "--out", str(tmp_path / "b.json")], tmp_path / "b.json",
                   capsys, "other-comp was trained for another-readability-contest")
    from utils.bundle import BundleError, build_models

    with pytest.raises(BundleError, match="other-comp was trained for another-readability-contest"):
        build_models(tmp_path / "bundle", "someone", "commonlit-kit-models", runs)
    assert not (tmp_path / "bundle").exists()


def test_a_blend_saved_before_identities_is_matched_by_names_with_a_note(fitted, tmp_path, capsys):
    """A blend.json from the previous version (no "identities") still applies to exactly its runs,
    said on stderr; given some of its runs it is refused as any blend is."""
    import json

    old = json.loads((fitted / "blend.json").read_text())
    old.pop("identities")
    (tmp_path / "old.json").write_text(json.dumps(old))
    out = tmp_path / "s.csv"
    assert predict.main(predict_argv(fitted, runs_of(fitted / "runs"), out, "--blend", tmp_path / "old.json")) == 0
    assert "records no run identities" in capsys.readouterr().err and len(pd.read_csv(out)) == 6
    out = tmp_path / "t.csv"
    assert_refused(predict, predict_argv(fitted, [fitted / "runs" / "attn"], out, "--blend", tmp_path / "old.json"),
                   out, capsys, "member(s) mean not given")


def fold0_copy(src, dst):
    """A copy of run `src` whose oof.csv keeps fold 0 only (as if fold 0 alone had finished)."""
    shutil.copytree(src, dst)
    oof = pd.read_csv(dst / "oof.csv", dtype={"id": str})
    oof[oof.fold == 0].to_csv(dst / "oof.csv", index=False)
    return dst


def test_runs_sharing_one_fold_blend_with_equal_weights_fitting_nothing(fitted, tweets_run, tmp_path, capsys):
    """Seeds compared on fold 0: fitted weights are refused (no other fold to fit them on), the
    equal-weight average is not, and prediction applies it; a metric whose labels come from a rule
    fitted on other folds (F1's threshold) is refused even then."""
    import numpy as np

    runs = [fold0_copy(r, tmp_path / r.name) for r in runs_of(fitted / "runs")]
    out = tmp_path / "blend.json"
    assert_refused(ensemble, ["--runs", *map(str, runs), "--out", str(out)], out, capsys,
                   "share 1 finished fold(s)", "--equal")
    assert ensemble.main(["--runs", *map(str, runs), "--out", str(out), "--equal"]) == 0
    text = capsys.readouterr().out
    assert "equal-weight average" in text and "fitted inside CV" not in text
    report = ensemble.read_blend(out)
    assert report["equal"] and report["folds"] == [0] and report["weights"] == [0.5, 0.5]
    assert report["weights_per_fold"] is None
    m = ensemble.load_members(runs, min_folds=1)
    rmse = float(np.sqrt(((m["P"][:, :, 0].mean(1) - m["y"][:, 0]) ** 2).mean()))
    assert len(m["y"]) == (pd.read_csv(runs[0] / "oof.csv").fold == 0).sum()
    assert report["score_equal_average"] == pytest.approx(rmse) == report["score_blend_cv"]
    assert ensemble.blend_weights(out, runs)[0].tolist() == [0.5, 0.5]
    sub = tmp_path / "s.csv"
    assert predict.main(predict_argv(fitted, runs, sub, "--blend", out)) == 0 and len(pd.read_csv(sub)) == 6
    capsys.readouterr()
    labels = tmp_path / "pseudo.csv"
    assert pseudo.main(pseudo_argv(fitted, runs, labels, "--blend", out)) == 0 and labels.exists()
    assert "weights_per_fold" not in capsys.readouterr().err  # equal weights were fitted on nothing
    from utils import plots

    assert [t.get_text() for t in plots.blend_figure(report).axes[0].get_xticklabels()] == [
        "attn", "mean", "equal average"]
    tweets = [fold0_copy(tweets_run, tmp_path / name) for name in ("t1", "t2")]
    t = out.with_name("t.json")
    assert_refused(ensemble, ["--runs", *map(str, tweets), "--out", str(t), "--equal"], t, capsys,
                   "rule fitted on other folds", "finish another fold")
    assert ensemble.main(["--runs", *map(str, tweets), "--out", str(t)]) == 2
    assert "--equal" not in capsys.readouterr().err  # it would be refused too: not offered
    # Runs with no finished fold in common: nothing to average either.
    other = tmp_path / "fold1"
    shutil.copytree(runs[1], other)
    pd.read_csv(fitted / "runs" / "mean" / "oof.csv", dtype={"id": str}).query("fold == 1").to_csv(
        other / "oof.csv", index=False)
    assert_refused(ensemble, ["--runs", str(runs[0]), str(other), "--out", str(t), "--equal"], t, capsys,
                   "share no finished fold", "attn has 0; ", "fold1 has 1")
