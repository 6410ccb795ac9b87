"""The honest-CV promise, pinned by perturbation: change the labels of fold k's validation rows and
recompute everything fold k uses from them (its blend weights, its pseudo-label column and the rows
it keeps); each must come out identical. Any later per-fold artefact gets a test of this shape.

Also: a run knows its inputs by content, runs that cannot be blended are refused, folds files are
checked before training, and checks on saved metadata come before any model loads."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from conftest import tiny_frame
from helpers import (
    K,
    assert_one_line_error,
    assert_same_fold_k,
    cfg_for,
    perturb,
    pseudo_labels,
    relabel,
)

from utils import ensemble, predict, pseudo
from utils.bundle import read_blend
from utils.competition import from_settings
from utils.data import make_folds
from utils.train import RunError, run_cv
from utils.train import main as train_main


def make_pseudo(v, texts, *extra) -> pd.DataFrame:
    return pseudo_labels(v, ("attn", "mean"), texts, *extra)


@pytest.fixture(scope="module")
def twins(tmp_path_factory, tiny_bert):
    """Two teacher runs (attention, mean) on 3 given folds, trained twice: on the data ("same"),
    and on the data with fold K's labels replaced ("changed"); and a copy of "same" whose oof.csv
    has other labels on fold K ("relabelled": what a blend reads). One validation per fold (at
    its end), so fold K's labels choose no checkpoint of fold K's models. Each gets a blend."""
    d = tmp_path_factory.mktemp("honest")
    train = tiny_frame(60)
    folds = make_folds(train, 3, 42)
    pd.DataFrame({"id": train.id, "fold": folds}).to_csv(d / "folds.csv", index=False)
    texts = tiny_frame(16, seed=9)[["id", "excerpt"]].assign(id=lambda f: "new" + f.id)
    texts.to_csv(d / "texts.csv", index=False)
    for variant, frame in (("same", train), ("changed", perturb(train, folds, K))):
        v = d / variant
        v.mkdir()
        frame.to_csv(v / "train.csv", index=False)
        for name, pooling in (("attn", "attention"), ("mean", "mean")):
            run_cv(cfg_for(v / "train.csv", v / name, tiny_bert, pooling=pooling, folds=3, epochs=1,
                           eval_every=1000, folds_csv=str(d / "folds.csv")))
    v = d / "relabelled"
    v.mkdir()
    (v / "train.csv").write_text((d / "same" / "train.csv").read_text())
    for name in ("attn", "mean"):
        relabel(d / "same" / name, v / name, K)
    for variant in ("same", "changed", "relabelled"):
        v = d / variant
        ensemble.save_blend(v / "blend.json", ensemble.blend_report([v / "attn", v / "mean"]))
    # One --max-std for every variant, from the unchanged teachers' fold-K spreads.
    cut = float(make_pseudo(d / "same", d / "texts.csv")[f"target_std_fold{K}"].quantile(0.5))
    (d / "max_std.txt").write_text(repr(cut))
    return d


def max_std(d) -> str:
    """The --max-std every variant uses (the median of the unchanged fold-K spreads)."""
    return (d / "max_std.txt").read_text()


def test_fold_ks_pseudo_labels_and_rows_ignore_its_labels_in_the_training_data(twins):
    """Teachers retrained with fold K's labels changed: fold K's column and the rows --max-std
    keeps for it come only from fold-K models, which never saw those labels."""
    d = twins
    a, b = (make_pseudo(d / v, d / "texts.csv", "--max-std", max_std(d)) for v in ("same", "changed"))
    assert_same_fold_k(a, b, 16)
    # The change did reach everything else: the other folds' models trained on fold K's rows.
    other = a.index.intersection(b.index)
    assert not np.allclose(a.loc[other, "target_std_fold1"], b.loc[other, "target_std_fold1"], atol=1e-3)


def test_fold_ks_blend_weights_and_pseudo_labels_ignore_its_labels_in_the_oof(twins):
    """The runs' oof.csv with other labels on fold K: fold K's blend weights, and so its
    pseudo-label column made with --blend, come out identical."""
    d = twins
    same, other = (json.loads((d / v / "blend.json").read_text()) for v in ("same", "relabelled"))
    assert np.allclose(same["weights_per_fold"][str(K)], other["weights_per_fold"][str(K)], atol=1e-6)
    assert same["score_blend_cv"] != pytest.approx(other["score_blend_cv"])  # the change is seen
    a, b = (make_pseudo(d / v, d / "texts.csv", "--blend", d / v / "blend.json", "--max-std", max_std(d))
            for v in ("same", "relabelled"))
    assert_same_fold_k(a, b, 16)


def test_pseudo_labels_use_each_folds_blend_weights(twins):
    d = twins / "same"
    blend = json.loads((d / "blend.json").read_text())
    p = make_pseudo(d, twins / "texts.csv", "--blend", d / "blend.json")
    info = json.loads((d / "pseudo.json").read_text())
    assert info["weights_per_fold"] == {k: pytest.approx(w) for k, w in blend["weights_per_fold"].items()}
    runs = [d / "attn", d / "mean"]
    texts = p.excerpt.tolist()
    for k in (0, 1, 2):
        per_run = [predict.predict_folds(r, texts, progress=False)[k][:, 0] for r in runs]
        w = blend["weights_per_fold"][str(k)]
        expected = w[0] * per_run[0] + w[1] * per_run[1]
        kept = p[f"target_fold{k}"].notna().to_numpy()
        assert np.allclose(p[f"target_fold{k}"][kept], expected[kept], atol=1e-6)


@pytest.mark.parametrize("k", [0, 1, 2])
def test_blend_weights_of_fold_k_do_not_move_when_its_oof_labels_do(twins, tmp_path, k):
    runs = []
    for name in ("attn", "mean"):
        src, dst = twins / "same" / name, tmp_path / name
        dst.mkdir()
        oof = pd.read_csv(src / "oof.csv", dtype={"id": str})
        rows = oof.fold == k
        oof.loc[rows, "target"] = np.linspace(-3, 3, int(rows.sum()))  # the same change in both runs
        oof.to_csv(dst / "oof.csv", index=False)
        (dst / "folds.csv").write_text((src / "folds.csv").read_text())
        runs.append(dst)
    before = ensemble.blend_report([twins / "same" / "attn", twins / "same" / "mean"])
    after = ensemble.blend_report(runs)
    assert np.allclose(before["weights_per_fold"][k], after["weights_per_fold"][k], atol=1e-6)
    assert not np.allclose(before["score_blend_cv"], after["score_blend_cv"])  # the change is seen


def test_the_bundle_keeps_weights_per_fold_in_step_with_the_runs(twins, tmp_path):
    from utils.bundle import BundleError

    d = twins / "same"
    blend = json.loads((d / "blend.json").read_text())
    blend["runs"].append("tfidf-ridge")
    blend["weights"].append(0.0)
    for k, w in blend["weights_per_fold"].items():
        blend["weights_per_fold"][k] = [w[0] * 0.5, w[1] * 0.5, 0.5]
    (tmp_path / "blend.json").write_text(json.dumps(blend))
    # A blend is bundled only with exactly its members (utils.ensemble.check_members), even one of
    # weight 0 left out: its weights_per_fold were fitted with that member.
    with pytest.raises(BundleError, match="its member\\(s\\) tfidf-ridge not given"):
        read_blend(tmp_path / "blend.json", [d / "attn", d / "mean"])
    narrowed = read_blend(d / "blend.json", [d / "mean", d / "attn"])  # in the runs' order
    assert narrowed["runs"] == ["mean", "attn"]
    narrowed = read_blend(d / "blend.json", [d / "attn", d / "mean"])
    assert narrowed["runs"] == ["attn", "mean"]
    for k, w in narrowed["weights_per_fold"].items():
        original = json.loads((d / "blend.json").read_text())["weights_per_fold"][k]
        assert np.allclose(w, original) and sum(w) == pytest.approx(1.0)


# ----------------------------------------------------------------------------- blends


def test_runs_with_the_same_folder_name_are_refused_in_one_line(twins, tmp_path, capsys):
    a, b = twins / "same" / "attn", twins / "changed" / "attn"
    assert ensemble.main(["--runs", str(a), str(b), "--out", str(tmp_path / "b.json")]) == 2
    assert_one_line_error(capsys.readouterr().err, "share the folder name 'attn'")
    assert ensemble.main(["--runs", str(a), str(a), "--out", str(tmp_path / "b.json")]) == 2
    assert_one_line_error(capsys.readouterr().err, "is given twice")
    assert not (tmp_path / "b.json").exists()


def copy_run(src, dst, folds):
    """A copy of run `src` as if only `folds` had finished (its oof.csv keeps those rows)."""
    dst.mkdir(parents=True)
    oof = pd.read_csv(src / "oof.csv", dtype={"id": str})
    oof[oof.fold.isin(folds)].to_csv(dst / "oof.csv", index=False)
    (dst / "folds.csv").write_text((src / "folds.csv").read_text())
    return dst


def test_runs_with_other_finished_folds_blend_on_two_shared_folds_or_are_refused(twins, tmp_path, capsys):
    d = twins / "same"
    a = copy_run(d / "attn", tmp_path / "a", [0, 1, 2])
    b = copy_run(d / "mean", tmp_path / "b", [0, 1])
    report = ensemble.blend_report([a, b])
    assert report["folds"] == [0, 1] and set(report["weights_per_fold"]) == {0, 1}
    assert "note: blending on folds 0, 1" in capsys.readouterr().err
    c = copy_run(d / "mean", tmp_path / "c", [0])
    assert ensemble.main(["--runs", str(a), str(c), "--out", str(tmp_path / "b.json")]) == 2
    assert_one_line_error(capsys.readouterr().err, "share 1 finished fold(s)", "a has 0, 1, 2; ",
                          "c has 0", "at least two shared folds")
    assert not (tmp_path / "b.json").exists()


def test_a_run_of_other_targets_is_refused_in_one_line(twins, tmp_path, capsys):
    import dataclasses

    from utils.competition import load_competition
    from utils.runs import write_metrics

    run = copy_run(twins / "same" / "attn", tmp_path / "multi", [0, 1, 2])
    oof = pd.read_csv(run / "oof.csv").rename(columns={"target": "cohesion"})
    oof.to_csv(run / "oof.csv", index=False)
    # The run records the competition it was trained for: one of another target.
    other = dataclasses.replace(load_competition("commonlitreadabilityprize"), slug="other-targets",
                                target_cols=("cohesion",))
    write_metrics(run, {"competition": other.to_dict()})
    assert ensemble.main(["--runs", str(run), str(twins / "same" / "mean"), "--out", str(tmp_path / "b.json")]) == 2
    assert_one_line_error(capsys.readouterr().err, "predicts regression ['target']", "['cohesion']",
                          "only runs of the same competition and targets blend")


def test_classification_runs_blend_probabilities_not_their_labels(tmp_path, tiny_bert, capsys):
    df = tiny_frame(40)
    df["level"] = np.where(df.target < df.target.median(), "hard", "easy")
    df.to_csv(tmp_path / "t.csv", index=False)
    for name in ("a", "b"):
        run_cv(cfg_for(tmp_path / "t.csv", tmp_path / name, tiny_bert, max_steps=1, seed=len(name)),
               from_settings({"task": "classification", "target_cols": ["level"]}))
    argv = ["--runs", str(tmp_path / "a"), str(tmp_path / "b"), "--target", "level", "--out", str(tmp_path / "b.json")]
    assert ensemble.main(argv) == 0
    report = json.loads((tmp_path / "b.json").read_text())
    assert report["metric"] == "log_loss" and report["outputs"] == ["easy", "hard"]
    m = ensemble.load_members([tmp_path / "a", tmp_path / "b"], "level")
    blended = ensemble.blend(m["P"], report["weights"])
    assert np.allclose(blended.sum(1), 1) and report["score_blend_in_sample"] == pytest.approx(
        float(-np.mean(np.log(blended[np.arange(len(blended)), m["y"]]))))


@pytest.mark.parametrize("content,message", [
    ('{"weights_per_fold": {}}', "expected {'runs': [...], 'weights': [...]}"),
    ('{"runs": ["attn", "mean"], "weights": [1.0]}', "'runs' and 'weights' must be lists of the same length"),
    ("not json", "cannot be read as a blend.json"),
])
def test_a_broken_blend_json_is_one_line_in_prediction(twins, tmp_path, capsys, content, message):
    d = twins / "same"
    (tmp_path / "blend.json").write_text(content)
    argv = ["--test-csv", str(twins / "texts.csv"), "--runs", str(d / "attn"), str(d / "mean"),
            "--blend", str(tmp_path / "blend.json"), "--out", str(tmp_path / "s.csv")]
    assert predict.main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, message)
    assert not (tmp_path / "s.csv").exists()


# ----------------------------------------------------------------------------- cheap checks first


def test_saved_metadata_is_checked_before_any_model_loads(twins, tmp_path, monkeypatch, capsys):
    """A teacher that is not a single regression target, or runs of other tasks, fail at once:
    loading a model would raise here, so the one-line error must come from the saved configs."""
    from utils.model import TextModel

    def no_loading(*a, **k):
        raise AssertionError("a model was loaded before the metadata checks")

    monkeypatch.setattr(TextModel, "load", no_loading)
    run = twins / "same" / "attn"
    clf = tmp_path / "clf"
    clf.mkdir()
    for f in ("folds.csv", "oof.csv", "config.json"):
        (clf / f).write_text((run / f).read_text())
    for k in (0, 1, 2):
        (clf / f"fold{k}").mkdir()
        spec = json.loads((run / f"fold{k}" / "kit_config.json").read_text())
        spec["model"].update(task="classification", num_outputs=2, target_names=["0", "1"])
        (clf / f"fold{k}" / "kit_config.json").write_text(json.dumps(spec))
    argv = ["--runs", str(run), str(clf), "--texts", str(twins / "texts.csv"), "--train-csv",
            str(twins / "same" / "train.csv"), "--out", str(tmp_path / "p.csv")]
    assert pseudo.main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "clf predicts task 'classification'",
                          "only runs of the same task and targets blend")
    argv = ["--test-csv", str(twins / "texts.csv"), "--runs", str(run), str(clf), "--out", str(tmp_path / "s.csv")]
    assert predict.main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "clf predicts task 'classification'")


# ----------------------------------------------------------------------------- a run's inputs


def test_a_resume_whose_inputs_changed_at_the_same_paths_is_refused(tiny_bert, tmp_path, capsys):
    model = tmp_path / "backbone"
    shutil.copytree(tiny_bert, model)
    train = tiny_frame(60)
    train.to_csv(tmp_path / "train.csv", index=False)
    pd.DataFrame({"id": train.id, "fold": make_folds(train, 2, 42)}).to_csv(tmp_path / "folds.csv", index=False)
    argv = ["--train-csv", str(tmp_path / "train.csv"), "--out", str(tmp_path / "run"), "--model", str(model),
            "--folds", "2", "--only-folds", "0", "--max-steps", "1", "--batch-size", "8",
            "--folds-csv", str(tmp_path / "folds.csv"), "--no-progress"]
    assert train_main(argv) == 0
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["train_csv_sha256"] and saved["folds_csv_sha256"] and saved["model_sha256"]
    folds_before = (tmp_path / "run" / "folds.csv").read_text()

    # The backbone pretrained again into the same folder: other weights, same path.
    from transformers import AutoModel

    for f in model.iterdir():  # every file rewritten with the same bytes: the same run
        f.write_bytes(f.read_bytes())
    assert train_main(argv + ["--only-folds", "1"]) == 0
    shutil.rmtree(tmp_path / "run" / "fold1")
    m = AutoModel.from_pretrained(model)
    m.embeddings.word_embeddings.weight.data += 0.01
    m.save_pretrained(model)
    assert train_main(argv + ["--only-folds", "1"]) == 2
    assert_one_line_error(capsys.readouterr().err, "model_sha256 changed (the --model folder's files)")
    assert not (tmp_path / "run" / "fold1").exists()
    AutoModel.from_pretrained(tiny_bert).save_pretrained(model)  # back as it was

    # The folds file regenerated at the same path: refused, and OUT/folds.csv left as it was.
    pd.DataFrame({"id": train.id, "fold": make_folds(train, 2, 7)}).to_csv(tmp_path / "folds.csv", index=False)
    assert train_main(argv + ["--only-folds", "1"]) == 2
    assert_one_line_error(capsys.readouterr().err, "folds_csv_sha256 changed (--folds-csv's content)")
    assert (tmp_path / "run" / "folds.csv").read_text() == folds_before
    pd.DataFrame({"id": train.id, "fold": make_folds(train, 2, 42)}).to_csv(tmp_path / "folds.csv", index=False)

    # The training file's labels changed at the same path.
    train.assign(target=train.target + 0.5).to_csv(tmp_path / "train.csv", index=False)
    assert train_main(argv + ["--only-folds", "1"]) == 2
    assert_one_line_error(capsys.readouterr().err, "train_csv_sha256 changed (--train-csv's content)")
    train.to_csv(tmp_path / "train.csv", index=False)
    assert train_main(argv + ["--only-folds", "1"]) == 0  # the inputs as they were: resumes
    assert (tmp_path / "run" / "fold1").is_dir()


def test_a_hub_name_is_its_own_identity(tmp_path):
    from utils.competition import from_settings
    from utils.config import TrainConfig, identity

    cfg = TrainConfig(train_csv=str(tmp_path / "t.csv"), out=str(tmp_path / "o"), model="roberta-base")
    ident = identity(cfg, from_settings({}))
    assert ident["model_sha256"] is None and ident["model"] == "roberta-base"


def test_pretraining_records_the_precision_it_resolved():
    from utils.pretrain import PretrainConfig, training_identity

    cfg = PretrainConfig(model="m", texts=("t.csv",), out="o", precision="auto")
    on_t4 = training_identity(cfg, ["a"], ["b"], 1, "fp16")
    on_a100 = training_identity(cfg, ["a"], ["b"], 1, "bf16")
    assert on_t4["precision"] == "fp16" and on_a100["precision"] == "bf16"


# ----------------------------------------------------------------------------- folds files


@pytest.mark.parametrize("make_bad,message", [
    (lambda f: f.assign(fold=f.fold % 4), "folds 0, 1, 2, 3, but --folds 5 needs each of folds 0..4"),
    (lambda f: f.assign(fold=f.fold % 4 + 1), "folds 1, 2, 3, 4, but --folds 5 needs each of folds 0..4"),
    (lambda f: f.assign(fold=f.fold.astype(float) + 0.5), "column 'fold' is not a fold number (0, 1, ...) at row 2"),
    (lambda f: f.iloc[1:], "has no fold for 1 training ids, e.g. id0000"),
    (lambda f: pd.concat([f, f.iloc[:1]]), "column 'id' has duplicate ids"),
], ids=["four-of-five", "numbered-1-to-4", "not-whole", "id-missing", "id-twice"])
def test_a_bad_folds_file_is_refused_before_any_training(tiny_bert, tmp_path, capsys, make_bad, message):
    train = tiny_frame(60)
    train.to_csv(tmp_path / "train.csv", index=False)
    good = pd.DataFrame({"id": train.id, "fold": np.arange(60) % 5})
    make_bad(good).to_csv(tmp_path / "folds.csv", index=False)
    argv = ["--train-csv", str(tmp_path / "train.csv"), "--out", str(tmp_path / "run"), "--model", tiny_bert,
            "--folds-csv", str(tmp_path / "folds.csv"), "--max-steps", "1", "--no-progress"]
    assert train_main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, message)
    assert not list((tmp_path / "run").glob("fold[0-9]*"))


def test_a_run_saved_before_content_hashes_resumes_on_its_paths(tiny_csv, tiny_bert, tmp_path):
    """An old run folder (config.json without content hashes, or without a setting added since,
    which then ran with its default) still resumes on its paths."""
    cfg = cfg_for(tiny_csv, tmp_path / "run", tiny_bert, only_folds=(0,), max_steps=1)
    run_cv(cfg)
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    for key in ("train_csv_sha256", "folds_csv_sha256", "model_sha256", "fit"):
        saved.pop(key)
    (tmp_path / "run" / "config.json").write_text(json.dumps(saved))
    run_cv(cfg_for(tiny_csv, tmp_path / "run", tiny_bert, only_folds=(1,), max_steps=1))
    assert (tmp_path / "run" / "fold1").is_dir()
    with pytest.raises(RunError, match="max_steps"):
        run_cv(cfg_for(tiny_csv, tmp_path / "run", tiny_bert, only_folds=(1,), max_steps=2))
