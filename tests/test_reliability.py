"""Reliability (issue 6): bad input through the CLIs, a SIGKILLed run resumed, runs from another
backbone or pooling mode, and model folders saved by another transformers major version."""

import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest
from conftest import tiny_frame
from helpers import assert_one_line_error, cfg_for, cli, kill_in_fold_1, train_argv

from utils import predict as predict_cli
from utils import train as train_cli
from utils.model import TextModel, load_tokenizer
from utils.predict import check_submission, predict_run
from utils.train import run_cv

# versions: model folders saved by another transformers version, CLIs training and predicting
pytestmark = pytest.mark.versions

# ----------------------------------------------------------------------------- bad train.csv


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda d: d.drop(columns="target"), "train.csv is missing column 'target'; found: id, url_legal,"),
        (lambda d: d.assign(excerpt=d.excerpt.where(d.index != 3, "   ")),
         "train.csv: column 'excerpt' is empty at row 5 (id id0003)"),
        (lambda d: d.assign(excerpt=d.excerpt.where(d.index != 0, None)),
         "train.csv: column 'excerpt' is empty at row 2 (id id0000)"),
        (lambda d: d.assign(target=d.target.astype(object).where(d.index != 4, "hard")),
         "train.csv: column 'target' is not a finite number at row 6 (id id0004)"),
        (lambda d: d.assign(target=d.target.astype(object).where(d.index != 9, "inf")),
         "train.csv: column 'target' is not a finite number at row 11 (id id0009)"),
        (lambda d: d.assign(id=d.id.where(d.index != 7, "id0001")),
         "train.csv: column 'id' has duplicate ids at row 3 (id id0001), row 9 (id id0001)"),
    ],
    ids=["missing-column", "blank-excerpt", "nan-excerpt", "text-target", "inf-target", "duplicate-id"],
)
def test_train_cli_refuses_bad_train_csv_in_one_line(mutate, message, tiny_bert, tmp_path, capsys):
    mutate(tiny_frame(20)).to_csv(tmp_path / "train.csv", index=False)
    out = tmp_path / "run"
    assert train_cli.main(train_argv(tmp_path / "train.csv", out, tiny_bert)) == 2
    assert_one_line_error(capsys.readouterr().err, message)
    assert not list(out.glob("fold*"))


def test_train_cli_model_not_found_is_clear_and_the_fixed_command_then_runs(tiny_bert, tiny_csv, tmp_path, capsys):
    out, missing = tmp_path / "run", tmp_path / "models" / "deberta-v3-large"
    res = cli("utils.train", train_argv(tiny_csv, out, missing))  # a fresh process: no traceback
    assert res.returncode == 2
    assert_one_line_error(res.stderr, f"model not found: {missing}")
    # A hub-style name that is neither a folder nor reachable (tests run offline).
    assert train_cli.main(train_argv(tiny_csv, out, "nobody-xyz/no-such-model")) == 2
    assert_one_line_error(capsys.readouterr().err, "model not found: nobody-xyz/no-such-model")
    # Nothing was trained under the wrong name, so the corrected command needs no --overwrite.
    assert train_cli.main(train_argv(tiny_csv, out, tiny_bert, "--max-steps", 1)) == 0
    assert json.loads((out / "config.json").read_text())["model"] == tiny_bert


def test_train_cli_reads_bom_crlf_extra_columns_and_counts_truncated_texts(tiny_bert, tmp_path, capsys):
    df = tiny_frame(60).assign(grade=7, notes="hand-edited")  # extra columns: kept, unused
    df.loc[2, "excerpt"] = 'Café naïve résumé, "quoted"\nand a second line.'
    path = tmp_path / "train.csv"
    path.write_bytes(b"\xef\xbb\xbf" + df.to_csv(index=False, lineterminator="\r\n").encode())
    out = tmp_path / "run"
    assert train_cli.main(train_argv(path, out, tiny_bert, "--max-len", 16, "--max-steps", 1)) == 0
    oof = pd.read_csv(out / "oof.csv", dtype={"id": str})
    assert sorted(oof.id) == sorted(df.id)  # the BOM did not eat the first column's name
    assert np.allclose(oof.set_index("id").loc[df.id, "target"], df.target)
    tok = load_tokenizer(tiny_bert)
    n_long = sum(len(ids) > 16 for ids in tok(df.excerpt.tolist())["input_ids"])
    assert 0 < n_long < 60
    log = capsys.readouterr().out
    for k in (0, 1):
        assert f"fold {k}: {n_long} of 60 texts truncated to max_len 16" in log
        assert json.loads((out / f"fold{k}" / "history.json").read_text())["n_truncated"] == n_long


# ----------------------------------------------------------------------------- predict CLI


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_bert, tiny_roberta):
    """Two runs with another backbone, pooling and layer mix: BERT attention, RoBERTa mean of 2 layers."""
    d = tmp_path_factory.mktemp("reliability-runs")
    tiny_frame(60).to_csv(d / "train.csv", index=False)
    run_cv(cfg_for(d / "train.csv", d / "bert-attn", tiny_bert))
    run_cv(cfg_for(d / "train.csv", d / "roberta-mean", tiny_roberta, pooling="mean", layers=2,
                   only_folds=(0,)))
    return d


def test_runs_from_other_backbones_and_pooling_are_rebuilt_from_their_own_config(runs, tmp_path):
    train = pd.read_csv(runs / "train.csv", dtype={"id": str})
    train.drop(columns=["target", "standard_error"]).to_csv(tmp_path / "test.csv", index=False)
    for name, runs_argv in (("rob.csv", ["roberta-mean"]), ("both.csv", ["bert-attn", "roberta-mean"])):
        argv = ["--test-csv", str(tmp_path / "test.csv"), "--out", str(tmp_path / name), "--runs",
                *[str(runs / r) for r in runs_argv], "--no-sample-submission"]
        assert predict_cli.main(argv) == 0
    kit = json.loads((runs / "roberta-mean" / "fold0" / "kit_config.json").read_text())["model"]
    assert (kit["pooling"], kit["layers"]) == ("mean", 2)
    # The RoBERTa run's only fold, rebuilt from its folder alone, reproduces its own OOF.
    sub = pd.read_csv(tmp_path / "rob.csv", dtype={"id": str}).set_index("id")
    oof = pd.read_csv(runs / "roberta-mean" / "oof.csv", dtype={"id": str})
    assert np.abs(sub.loc[oof.id, "target"].to_numpy() - oof.pred.to_numpy()).max() < 1e-5
    both = pd.read_csv(tmp_path / "both.csv", dtype={"id": str})
    bert = predict_run(runs / "bert-attn", train.excerpt.tolist(), progress=False)
    assert np.allclose(both.target, (bert + sub.loc[both.id, "target"].to_numpy()) / 2, atol=1e-6)


def test_test_csv_with_one_row_works_and_keeps_its_id_verbatim(runs, tmp_path, capsys):
    test = tiny_frame(1, seed=3).drop(columns=["target", "standard_error"]).assign(id="007e10")
    test.to_csv(tmp_path / "test.csv", index=False)
    out = tmp_path / "submission.csv"
    argv = ["--test-csv", str(tmp_path / "test.csv"), "--runs", str(runs / "bert-attn"), "--out", str(out),
            "--no-sample-submission"]
    assert predict_cli.main(argv) == 0
    assert "wrote" in capsys.readouterr().out
    lines = out.read_text().splitlines()
    assert lines[0] == "id,target" and len(lines) == 2 and lines[1].startswith("007e10,")
    expected = predict_run(runs / "bert-attn", test.excerpt.tolist(), progress=False)
    assert float(lines[1].split(",")[1]) == pytest.approx(float(expected[0]), abs=1e-6)


def test_blank_test_texts_get_the_training_mean_and_the_submission_is_still_written(runs, tmp_path, capsys):
    # A hidden test set nobody can see: one blank excerpt must not cost the whole submission.
    test = tiny_frame(5, seed=4).drop(columns=["target", "standard_error"])
    test.loc[1, "excerpt"], test.loc[3, "excerpt"] = "   \n ", None
    test.to_csv(tmp_path / "test.csv", index=False)
    out = tmp_path / "submission.csv"
    argv = ["--test-csv", str(tmp_path / "test.csv"), "--runs", str(runs / "bert-attn"), "--out", str(out),
            "--no-sample-submission"]
    assert predict_cli.main(argv) == 0
    err = capsys.readouterr().err
    assert "warning: test.csv: column 'excerpt' is empty at row 3 (id id0001), row 5 (id id0003)" in err
    sub = pd.read_csv(out, dtype={"id": str})
    assert sub.id.tolist() == test.id.tolist() and np.isfinite(sub.target).all()
    # Each fold's saved training mean, averaged over the folds; the real rows as before.
    train, folds = pd.read_csv(runs / "train.csv"), pd.read_csv(runs / "bert-attn" / "folds.csv")
    means = [train.target[folds.fold.to_numpy() != k].mean() for k in (0, 1)]
    assert sub.target[1] == pytest.approx(np.mean(means)) and sub.target[3] == pytest.approx(np.mean(means))
    real = [0, 2, 4]
    expected = predict_run(runs / "bert-attn", test.excerpt[real].tolist(), progress=False)
    assert np.allclose(sub.target[real], expected, atol=1e-6)
    # Training keeps refusing blank texts.
    with pytest.raises(Exception, match="column 'excerpt' is empty at row 3"):
        from utils.data import read_csv

        read_csv(tmp_path / "test.csv", "excerpt", target_cols=())


@pytest.mark.parametrize(
    "content,message",
    [
        ("", "test.csv: cannot be read as a UTF-8 CSV"),  # 0 bytes: not even a header
        ("id,excerpt\n", "test.csv has no data rows"),
        ("id,text\na1,Some words.\n", "test.csv is missing column 'excerpt'; found: id, text"),
        ("id,excerpt\na1,Some words.\na1,Other words.\n", "'id' has duplicate ids at row 2 (id a1), row 3"),
    ],
    ids=["zero-bytes", "header-only", "missing-column", "duplicate-id"],
)
def test_predict_cli_refuses_bad_test_csv_in_one_line(runs, tmp_path, capsys, content, message):
    (tmp_path / "test.csv").write_text(content)
    argv = ["--test-csv", str(tmp_path / "test.csv"), "--runs", str(runs / "bert-attn"),
            "--out", str(tmp_path / "s.csv")]
    assert predict_cli.main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, message)
    assert not (tmp_path / "s.csv").exists()


def _break_weights(fold):
    data = (fold / "kit_model.safetensors").read_bytes()
    (fold / "kit_model.safetensors").write_bytes(data[: len(data) // 2])  # an interrupted upload


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda f: (f / "kit_model.safetensors").unlink(), "fold1 is incomplete: missing kit_model.safetensors"),
        (lambda f: (f / "config.json").unlink(), "fold1 is incomplete: missing config.json"),
        (lambda f: (f / "tokenizer.json").unlink(), "fold1 is incomplete: missing the tokenizer vocabulary"),
        (lambda f: (f / "kit_config.json").write_text('{"model": '), "fold1/kit_config.json is corrupt"),
        (_break_weights, "fold1/kit_model.safetensors is corrupt or incomplete"),
    ],
    ids=["weights", "config", "tokenizer", "half-kit-config", "half-weights"],
)
def test_predict_cli_names_the_damaged_checkpoint_folder_and_file(runs, tmp_path, capsys, damage, message):
    run = tmp_path / "bert-attn"
    shutil.copytree(runs / "bert-attn", run)
    damage(run / "fold1")
    argv = ["--test-csv", str(runs / "train.csv"), "--runs", str(run), "--out", str(tmp_path / "s.csv"),
            "--no-sample-submission"]
    assert predict_cli.main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, message)
    assert not (tmp_path / "s.csv").exists()


def test_submission_whose_ids_differ_from_test_csv_is_refused():
    test = pd.DataFrame({"id": ["007", "1e3", "c12"], "excerpt": ["x", "y", "z"]})
    for ids, message in (
        (["007", "1e3", "c12", "d99"], "ids not in both: ['d99']"),  # an extra row
        (["7", "1000.0", "c12"], "ids not in both: ['007', '1000.0', '1e3', '7']"),  # ids parsed as numbers
        (["007", "007", "c12"], "ids not in both: ['1e3']"),  # a duplicate in place of a row
    ):
        sub = pd.DataFrame({"id": ids, "target": 0.0})
        with pytest.raises(ValueError, match="submission ids differ from test.csv ids") as e:
            check_submission(sub, test)
        assert message in str(e.value) and "\n" not in str(e.value)


# ----------------------------------------------------------------------------- interrupted runs


def test_sigkill_mid_fold_then_rerun_resumes_to_the_uninterrupted_result(tiny_csv, tiny_bert, tmp_path):
    # Reference: the same run, uninterrupted, in this process (also pins CLI == API numbers).
    ref = tmp_path / "ref"
    run_cv(cfg_for(tiny_csv, ref, tiny_bert, epochs=4))
    out = tmp_path / "run"
    argv = train_argv(tiny_csv, out, tiny_bert, "--epochs", 4)
    kill_in_fold_1(argv, tmp_path)  # fold 0 saved, fold 1 mid-way (16 steps)
    assert (out / "fold0").is_dir() and not (out / "fold1").exists()
    # What the killed run left is whole: written atomically, or not at all.
    assert json.loads((out / "metrics.json").read_text())["folds_done"] == [0]
    assert len(pd.read_csv(out / "oof.csv")) == 30
    fold0 = {p.name: p.read_bytes() for p in (out / "fold0").iterdir()}
    # Leftovers of a kill during a save: half-written temp folder and file; never to be read.
    stale = out / ".fold1.k1ll3d.tmp"
    stale.mkdir()
    (stale / "kit_model.safetensors").write_bytes(b"\0" * 10)
    (out / ".oof.csv.k1ll3d.tmp").write_text("id,target,pred,fold\nid0000,")

    res = cli("utils.train", argv)  # the same command again
    assert res.returncode == 0, res.stderr
    assert "fold 0: finished earlier, skipped" in res.stdout
    assert "fold 0 step" not in res.stdout
    # fold 1 goes on from its last saved state (step 2 or 4), not from its first step
    assert re.search(r"fold 1: resumed at step [24]/", res.stdout) and "fold 1 step 2/" not in res.stdout
    assert {p.name: p.read_bytes() for p in (out / "fold0").iterdir()} == fold0
    assert not list(out.glob(".*.tmp"))
    a = pd.read_csv(ref / "oof.csv", dtype={"id": str}).sort_values("id").reset_index(drop=True)
    b = pd.read_csv(out / "oof.csv", dtype={"id": str}).sort_values("id").reset_index(drop=True)
    assert a.id.equals(b.id) and a.fold.equals(b.fold)
    assert (a.pred == b.pred).all()  # identical to the uninterrupted run
    hist = lambda r: json.loads((r / "fold1" / "history.json").read_text())["history"]  # noqa: E731
    assert [h["step"] for h in hist(out)] == [h["step"] for h in hist(ref)]
    assert np.allclose([h["rmse"] for h in hist(out)], [h["rmse"] for h in hist(ref)], atol=1e-5)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["folds_done"] == [0, 1]
    assert metrics["cv"] == pytest.approx(json.loads((ref / "metrics.json").read_text())["cv"], abs=1e-5)


# ----------------------------------------------------------------------------- versions


@pytest.mark.parametrize("tokenizer_class", ["TokenizersBackend", "PreTrainedTokenizerFast"])
def test_folder_saved_by_either_transformers_version_loads(runs, tmp_path, tokenizer_class):
    # A generic fast tokenizer is saved as class "TokenizersBackend" by transformers 5.x, which 4.x
    # has no class for, and as "PreTrainedTokenizerFast" by 4.x. A run trained on one Kaggle image
    # must still predict on another.
    run = tmp_path / "run"
    shutil.copytree(runs / "bert-attn", run)
    for fold in run.glob("fold[0-9]*"):
        cfg_path = fold / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text())
        cfg["tokenizer_class"] = tokenizer_class
        cfg_path.write_text(json.dumps(cfg))
    texts = tiny_frame(7, seed=9).excerpt.tolist()
    expected = predict_run(runs / "bert-attn", texts, progress=False)
    assert np.allclose(predict_run(run, texts, progress=False), expected, atol=1e-6)
    _, tok = TextModel.load(run / "fold0")
    assert tok.pad_token_id == 0 and tok("the cat")["input_ids"][0] == tok.cls_token_id


def test_a_kill_between_the_two_renames_of_a_save_keeps_the_old_state(tmp_path, monkeypatch):
    """A fold's state is saved with files.atomic_dir, which renames the old state aside before the
    new one comes in: a kill between the two renames leaves the old state, which the next run
    finds (resume.pending, the saved progress), not nothing and a restart from step 0."""
    import os

    from utils import files, resume

    def save(step: int) -> None:
        with files.atomic_dir(resume.folder(tmp_path, 0)) as tmp:
            (tmp / resume.SUMMARY).write_text(json.dumps({"step": step, "epoch": 0, "micro_batch": 8}))
            (tmp / resume.STATE).write_bytes(b"state")

    save(10)
    real = os.replace

    def killed(src, dst):  # the process dies as the new state is renamed into place
        if str(src).endswith(".tmp"):
            raise KeyboardInterrupt
        return real(src, dst)

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        save(20)
    monkeypatch.undo()
    assert resume.pending(tmp_path) == [0] and resume.saved_micro_batch(tmp_path, 0) == 8
    assert json.loads((resume.folder(tmp_path, 0) / resume.SUMMARY).read_text())["step"] == 10
    save(30)  # and the next save replaces it as usual, leaving nothing aside
    assert json.loads((resume.folder(tmp_path, 0) / resume.SUMMARY).read_text())["step"] == 30
    assert sorted(p.name for p in (tmp_path / "resume").iterdir()) == ["fold0"]


def test_a_backbone_with_truncated_weights_is_one_line_naming_it(tiny_bert, tiny_csv, tmp_path, capsys):
    """A backbone folder whose model.safetensors was cut short (an interrupted copy or download):
    one line naming the folder, not safetensors' traceback."""
    model = tmp_path / "bert"
    shutil.copytree(tiny_bert, model)
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    assert train_cli.main(train_argv(tiny_csv, tmp_path / "run", model, "--max-steps", 1)) == 2
    assert_one_line_error(capsys.readouterr().err, f"the weights of {model} are corrupt or incomplete")
