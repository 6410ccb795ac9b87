"""Integration: the train and predict CLIs on real competition rows with the pretrained
all-MiniLM-L6-v2 (offline), as a user would run them."""

import json
import subprocess
import sys

import pandas as pd
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.versions]


def test_train_then_predict_cli_on_real_data(real_data, minilm_path, tmp_path):
    rows = pd.read_csv(real_data / "train.csv").sample(200, random_state=0)
    rows.to_csv(tmp_path / "train.csv", index=False)
    out = tmp_path / "run"
    train = [sys.executable, "-m", "utils.train", "--train-csv", str(tmp_path / "train.csv"),
             "--model", minilm_path, "--out", str(out), "--folds", "2", "--only-folds", "0",
             "--max-steps", "6", "--batch-size", "8", "--max-len", "128", "--eval-every", "3",
             "--lr", "5e-5", "--no-progress"]
    res = subprocess.run(train, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "fold 0 step 6/6" in res.stdout
    assert "texts truncated to max_len 128" in res.stdout  # real excerpts are ~217 tokens
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["folds_done"] == [0] and metrics["n_oof"] == 100
    assert 0.3 < metrics["cv"] < 3.0

    sub_path = tmp_path / "submission.csv"
    predict = [sys.executable, "-m", "utils.predict", "--test-csv", str(real_data / "test.csv"),
               "--runs", str(out), "--out", str(sub_path)]
    res = subprocess.run(predict, capture_output=True, text=True, timeout=600,
                         env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr[-2000:]
    sub = pd.read_csv(sub_path, dtype={"id": str})
    test = pd.read_csv(real_data / "test.csv", dtype={"id": str})
    assert sub["id"].tolist() == test["id"].tolist()
    assert sub["target"].between(-5, 3).all() and sub["target"].std() > 0
