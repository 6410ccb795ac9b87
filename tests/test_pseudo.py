"""Pseudo-labels per fold (python -m utils.pseudo) and training with them (--pseudo-csv)."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import tiny_frame
from helpers import assert_one_line_error, cfg_for, pseudo_argv, train_argv

from utils import pseudo as pseudo_cli
from utils import train as train_cli
from utils.model import TextModel, load_tokenizer
from utils.predict import predict_model
from utils.train import RunError, compute_loss, run_cv


@pytest.fixture(scope="module")
def teachers(tmp_path_factory, tiny_bert):
    """Two teacher runs on the same 2 folds, and a CSV of texts to label: 12 new texts, 3 that are
    train texts with other whitespace, 1 blank."""
    d = tmp_path_factory.mktemp("pseudo")
    train = tiny_frame(60)
    train.to_csv(d / "train.csv", index=False)
    for name, pooling in (("attn", "attention"), ("mean", "mean")):
        run_cv(cfg_for(d / "train.csv", d / name, tiny_bert, pooling=pooling))
    new = tiny_frame(12, seed=7).drop(columns=["target", "standard_error"])
    new["id"] = [f"new{i}" for i in range(12)]
    dup = train.iloc[:3].drop(columns=["target", "standard_error"]).assign(
        id=["dup0", "dup1", "dup2"], excerpt=lambda f: "  " + f.excerpt.str.replace(" ", "\n "))
    blank = pd.DataFrame({"id": ["blank0"], "excerpt": ["  "]})
    pd.concat([new, dup, blank]).to_csv(d / "texts.csv", index=False)
    return d


def make(d, out, *extra) -> int:
    return pseudo_cli.main(pseudo_argv(d, (d / "attn", d / "mean"), out, *extra))


def test_each_fold_column_is_that_folds_models_only(teachers, tmp_path, capsys):
    d = teachers
    assert make(d, tmp_path / "p.csv") == 0
    log = capsys.readouterr()
    assert "3 texts already in train.csv dropped, 1 blank dropped, 12 to label" in log.out
    p = pd.read_csv(tmp_path / "p.csv", dtype={"id": str})
    assert list(p.columns) == ["id", "excerpt", "target_fold0", "target_std_fold0", "target_fold1",
                               "target_std_fold1", "target", "target_std"]
    assert p.id.tolist() == [f"new{i}" for i in range(12)]  # duplicates and the blank are gone
    every = []
    for k in (0, 1):
        fold_k = []
        for run in ("attn", "mean"):
            model, tok = TextModel.load(d / run / f"fold{k}")
            fold_k.append(predict_model(model, tok, p.excerpt.tolist(), 256)[:, 0])
        every += fold_k
        assert np.allclose(p[f"target_fold{k}"], np.mean(fold_k, axis=0), atol=1e-6)
        assert np.allclose(p[f"target_std_fold{k}"], np.std(fold_k, axis=0), atol=1e-6)
    assert np.allclose(p.target, (p.target_fold0 + p.target_fold1) / 2, atol=1e-9)
    assert np.allclose(p.target_std, np.std(every, axis=0), atol=1e-6)
    info = json.loads((tmp_path / "p.json").read_text())
    assert info["folds"] == [0, 1] and info["runs"] == ["attn", "mean"]
    assert info["n_dropped_train_duplicates"] == 3 and info["n_rows"] == 12


def test_max_std_filters_each_fold_on_its_own_models(teachers, tiny_bert, tmp_path, capsys):
    d = teachers
    assert make(d, tmp_path / "all.csv") == 0
    full = pd.read_csv(tmp_path / "all.csv", dtype={"id": str})
    # fold 0's median spread: fold 0 keeps about half its texts whatever the other fold's spreads
    cut = float(np.median(full["target_std_fold0"]))
    assert make(d, tmp_path / "some.csv", "--max-std", str(cut)) == 0
    some = pd.read_csv(tmp_path / "some.csv", dtype={"id": str}).set_index("id")
    out = capsys.readouterr().out
    for k in (0, 1):
        keep = full[f"target_std_fold{k}"] <= cut  # fold k's own models decide, nothing else
        kept = some[f"target_fold{k}"].dropna()
        assert sorted(kept.index) == sorted(full.id[keep])
        assert np.allclose(kept, full.set_index("id").loc[kept.index, f"target_fold{k}"])
        assert f"fold {k} keeps {int(keep.sum())}" in out
    either = (full.target_std_fold0 <= cut) | (full.target_std_fold1 <= cut)
    assert sorted(some.index) == sorted(full.id[either])  # a text no fold keeps is dropped
    assert any(0 < (full[f"target_std_fold{k}"] <= cut).sum() < 12 for k in (0, 1))  # it chose
    info = json.loads((tmp_path / "some.json").read_text())
    assert info["n_rows_per_fold"] == {str(k): int(some[f"target_fold{k}"].notna().sum()) for k in (0, 1)}

    # A student trains each fold on that fold's kept rows only.
    argv = student_argv(d, tmp_path / "s", tmp_path / "some.csv", tiny_bert, "--max-steps", "1")
    assert train_cli.main(argv) == 0
    for k in (0, 1):
        info = json.loads((tmp_path / "s" / f"fold{k}" / "history.json").read_text())
        assert info["n_pseudo"] == int(some[f"target_fold{k}"].notna().sum())


def test_a_max_std_that_keeps_nothing_or_has_one_teacher_is_refused(teachers, tmp_path, capsys):
    d = teachers
    assert make(d, tmp_path / "p.csv", "--max-std", "0") == 2
    assert_one_line_error(capsys.readouterr().err, "--max-std 0 leaves none of the 12 texts in any fold",
                          "nothing written")
    assert not (tmp_path / "p.csv").exists() and not (tmp_path / "p.json").exists()
    argv = ["--runs", str(d / "attn"), "--texts", str(d / "texts.csv"), "--train-csv",
            str(d / "train.csv"), "--out", str(tmp_path / "p.csv"), "--max-std", "0.5"]
    assert pseudo_cli.main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "--max-std needs two teacher runs or more")
    assert not (tmp_path / "p.csv").exists()


def test_teachers_with_other_folds_are_refused(teachers, tiny_bert, tmp_path, capsys):
    d = teachers
    run_cv(cfg_for(d / "train.csv", tmp_path / "other", tiny_bert, fold_seed=1, max_steps=1))
    argv = ["--runs", str(d / "attn"), str(tmp_path / "other"), "--texts", str(d / "texts.csv"),
            "--train-csv", str(d / "train.csv"), "--out", str(tmp_path / "p.csv")]
    assert pseudo_cli.main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "has other folds.csv than", "same --fold-seed")
    assert not (tmp_path / "p.csv").exists()


@pytest.mark.parametrize(
    "content,message",
    [
        ("", "texts.csv: cannot be read as a UTF-8 CSV"),
        ("id,text\na,Some words.\n", "texts.csv is missing column 'excerpt'; found: id, text"),
        ("id,excerpt\n", "texts.csv has no data rows"),
    ],
    ids=["empty-file", "missing-text-column", "header-only"],
)
def test_bad_texts_get_one_clear_line(teachers, tmp_path, capsys, content, message):
    d = teachers
    (tmp_path / "texts.csv").write_text(content)
    argv = ["--runs", str(d / "attn"), "--texts", str(tmp_path / "texts.csv"),
            "--train-csv", str(d / "train.csv"), "--out", str(tmp_path / "p.csv")]
    assert pseudo_cli.main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, message)


# ----------------------------------------------------------------------------- training with them


def student_argv(d, out, pseudo, model, *extra) -> list:
    """helpers.train_argv on d/train.csv, with the pseudo-labels in `pseudo`."""
    return train_argv(d / "train.csv", out, model, "--pseudo-csv", pseudo, *extra)


@pytest.fixture(scope="module")
def labels(teachers, tmp_path_factory):
    d = tmp_path_factory.mktemp("labels")
    assert make(teachers, d / "pseudo.csv") == 0
    return d / "pseudo.csv"


def test_pseudo_rows_join_training_only_never_validation_or_oof(teachers, labels, tiny_bert, tmp_path, capsys):
    d = teachers
    assert train_cli.main(student_argv(d, tmp_path / "s", labels, tiny_bert)) == 0
    assert "12 pseudo-labelled rows join every fold's training side (mixed, weight 1)" in capsys.readouterr().out
    oof = pd.read_csv(tmp_path / "s" / "oof.csv", dtype={"id": str})
    train = pd.read_csv(d / "train.csv", dtype={"id": str})
    assert sorted(oof.id) == sorted(train.id)  # no pseudo id in the OOF
    for k in (0, 1):
        info = json.loads((tmp_path / "s" / f"fold{k}" / "history.json").read_text())
        assert info["n_pseudo"] == 12 and info["n_valid"] == int((oof.fold == k).sum())
        assert info["n_train"] + info["n_valid"] == 60
        # 30 real + 12 pseudo rows = 6 batches of 8 per epoch, 2 epochs
        assert info["steps"] == 12


@pytest.mark.parametrize("separate", [False, True])
def test_the_truncation_line_counts_the_pseudo_rows_mixed_in_or_apart(teachers, labels, tiny_bert, tmp_path, capsys,
                                                                      separate):
    d = teachers
    extra = ("--max-len", "12", "--max-steps", "1", *(("--pseudo-epochs", "1") if separate else ()))
    assert train_cli.main(student_argv(d, tmp_path / "s", labels, tiny_bert, *extra)) == 0
    tok = load_tokenizer(tiny_bert)
    texts = pd.read_csv(d / "train.csv").excerpt.tolist() + pd.read_csv(labels).excerpt.tolist()
    n_long = sum(len(ids) > 12 for ids in tok(texts)["input_ids"])
    assert 0 < n_long and f"fold 0: {n_long} of 72 texts truncated to max_len 12" in capsys.readouterr().out


def test_pseudo_epochs_come_first_then_the_real_rows(teachers, labels, tiny_bert, tmp_path):
    d = teachers
    assert train_cli.main(student_argv(d, tmp_path / "s", labels, tiny_bert, "--pseudo-epochs", "1")) == 0
    info = json.loads((tmp_path / "s" / "fold0" / "history.json").read_text())
    phases = [h["phase"] for h in info["history"]]
    assert phases[0] == "pseudo" and phases[-1] == "labelled"
    assert phases == sorted(phases, key=lambda p: p != "pseudo")  # never pseudo after labelled
    assert info["steps"] == 2 + 2 * 4  # 12 pseudo rows: 2 batches; then 2 epochs of 4 batches


def test_a_pseudo_file_made_with_other_folds_is_refused(teachers, labels, tiny_bert, tmp_path, capsys):
    d = teachers
    assert train_cli.main(student_argv(d, tmp_path / "s", labels, tiny_bert, "--fold-seed", "1")) == 2
    assert_one_line_error(capsys.readouterr().err, "pseudo.csv was made with other folds",
                          "would leak validation rows")
    assert not list((tmp_path / "s").glob("fold[0-9]*"))  # no fold trained


def test_only_target_works_with_a_warning(teachers, labels, tiny_bert, tmp_path, capsys):
    d = teachers
    shared = pd.read_csv(labels)[["id", "excerpt", "target"]]
    shared.to_csv(tmp_path / "shared.csv", index=False)
    assert train_cli.main(student_argv(d, tmp_path / "s", tmp_path / "shared.csv", tiny_bert, "--max-steps", "1")) == 0
    assert "has only 'target', no target_fold{k}" in capsys.readouterr().out


def test_nan_pseudo_targets_get_one_clear_line(teachers, labels, tiny_bert, tmp_path, capsys):
    d = teachers
    bad = pd.read_csv(labels)
    bad.loc[4, "target_fold1"] = np.nan
    bad.to_csv(tmp_path / "pseudo.csv", index=False)
    (tmp_path / "pseudo.json").write_text(labels.with_suffix(".json").read_text())
    assert train_cli.main(student_argv(d, tmp_path / "s", tmp_path / "pseudo.csv", tiny_bert)) == 2
    assert_one_line_error(capsys.readouterr().err, "pseudo.csv: column 'target_fold1' is empty at row 6 (id ")
    bad["target_fold1"] = bad["target_fold1"].astype(object)
    bad.loc[4, "target_fold1"], bad.loc[2, "target_fold1"] = "inf", "high"
    bad.to_csv(tmp_path / "pseudo.csv", index=False)
    assert train_cli.main(student_argv(d, tmp_path / "s", tmp_path / "pseudo.csv", tiny_bert)) == 2
    assert_one_line_error(capsys.readouterr().err,
                          "pseudo.csv: column 'target_fold1' is not a finite number at row 4, row 6")


def test_the_pseudo_files_content_is_part_of_the_runs_identity(teachers, labels, tmp_path, tiny_bert):
    d = teachers
    own = tmp_path / "pseudo.csv"
    pd.read_csv(labels).to_csv(own, index=False)
    (tmp_path / "pseudo.json").write_text(labels.with_suffix(".json").read_text())
    cfg = cfg_for(d / "train.csv", tmp_path / "s", tiny_bert, pseudo_csv=str(own), only_folds=(0,),
                  max_steps=1)
    run_cv(cfg)
    changed = pd.read_csv(own)
    changed["target_fold1"] += 1.0
    changed.to_csv(own, index=False)
    with pytest.raises(RunError, match="pseudo_sha256"):
        run_cv(cfg)


def test_weighted_loss_counts_each_row_by_its_weight():
    from utils.competition import from_settings
    from utils.config import TrainConfig

    cfg, comp = TrainConfig(train_csv="t", out="o", model="m"), from_settings({})
    preds, y = torch.tensor([[1.0], [3.0]]), torch.tensor([[0.0], [0.0]])
    assert compute_loss(cfg, comp, preds, y, torch.tensor([1.0, 0.0])).item() == pytest.approx(1.0)
    assert compute_loss(cfg, comp, preds, y, torch.tensor([1.0, 1.0])).item() == pytest.approx(5.0)
    assert compute_loss(cfg, comp, preds, y, torch.tensor([3.0, 1.0])).item() == pytest.approx(3.0)


def test_a_file_from_teachers_with_some_folds_trains_only_those(teachers, tiny_bert, tmp_path, capsys):
    d = teachers
    run_cv(cfg_for(d / "train.csv", tmp_path / "half", tiny_bert, only_folds=(0,), max_steps=1))
    argv = ["--runs", str(tmp_path / "half"), "--texts", str(d / "texts.csv"), "--train-csv",
            str(d / "train.csv"), "--out", str(tmp_path / "p.csv"), "--no-progress"]
    assert pseudo_cli.main(argv) == 0
    assert "target_fold1" not in pd.read_csv(tmp_path / "p.csv").columns
    argv = student_argv(d, tmp_path / "s", tmp_path / "p.csv", tiny_bert, "--max-steps", "1")
    assert train_cli.main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, "p.csv has no target_fold1", "--only-folds")
    assert train_cli.main([*argv, "--only-folds", "0"]) == 0
