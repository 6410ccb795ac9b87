"""bench/gpu.py: the prepared GPU check runs end to end on CPU (--smoke), and --prepare's carry."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys

import pytest
from conftest import ROOT

SCRIPT = ROOT / "bench" / "gpu.py"
TRAIN_ARMS = ("fp32", "fp16 AMP", "bf16 AMP", "checkpointing off", "checkpointing on")
INFER_ARMS = ("dynamic @256", "fixed @256", "dynamic @512", "fixed @512")


def finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def test_smoke_run_reports_every_arm(tmp_path):
    out = tmp_path / "gpu.json"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # the CPU path, also on a machine with a GPU
    proc = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--out", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())

    train = result["training"]
    assert [x["arm"].split(" (")[0] for x in train] == list(TRAIN_ARMS)
    for x in train:
        if x["status"] == "skipped":
            assert x["reason"], x
            continue
        assert x["status"] == "ok", x
        assert finite(x["samples_per_s"]) and x["samples_per_s"] > 0, x
        assert finite(x["valid_rmse"]), x
        assert x["steps"] == result["settings"]["steps"]
        assert x["master_weights_dtype"] == "float32"  # AMP keeps fp32 master weights
        assert x["peak_mem_mib"] is None  # CPU: not available, said so in "memory"
    by_arm = {x["arm"].split(" (")[0]: x for x in train}
    assert by_arm["fp16 AMP"]["status"] == "skipped" and "CUDA" in by_arm["fp16 AMP"]["reason"]
    assert by_arm["bf16 AMP"]["status"] == "ok"  # bf16 AMP runs on CPU
    assert by_arm["checkpointing on"]["gradient_checkpointing"] is True
    # Same seed, same rows, same batches: checkpointing recomputes, it does not change the result.
    assert by_arm["checkpointing on"]["valid_rmse"] == pytest.approx(
        by_arm["checkpointing off"]["valid_rmse"], abs=1e-5)
    assert "not available on CPU" in result["memory"]

    infer = result["inference"]
    assert [x["arm"] for x in infer] == list(INFER_ARMS)
    for x in infer:
        assert x["status"] == "ok", x
        assert finite(x["rows_per_s"]) and x["rows_per_s"] > 0
        assert finite(x["rmse_vs_dynamic"]) and x["rmse_vs_dynamic"] < 1e-3, x

    env_info = result["environment"]
    assert {"torch", "transformers", "accelerate", "device"} <= set(env_info)
    text = out.read_text()
    assert str(ROOT) not in text and str(tmp_path) not in text  # no machine paths stored

    for row in TRAIN_ARMS + INFER_ARMS:
        assert f"| {row}" in proc.stdout, row
    assert "Total " in proc.stdout


@pytest.mark.integration
def test_prepare_writes_an_fp16_copy_that_trains_in_fp32(tmp_path, minilm_path, tiny_csv):
    dest = tmp_path / "gpu_carry"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--prepare", str(dest), "--model",
                           minilm_path, "--data", str(tiny_csv)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = dest / "minilm-fp16"
    size = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    assert 40e6 < size < 50e6, size
    assert (dest / "train.csv").read_bytes() == tiny_csv.read_bytes()

    import torch
    from transformers import AutoModel

    assert next(AutoModel.from_pretrained(folder).parameters()).dtype == torch.float16
    spec = importlib.util.spec_from_file_location("gpu_bench", SCRIPT)
    gpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu)
    assert gpu.stored_dtype(str(folder)) == "float16"
    from utils.model import ModelSpec, TextModel

    model = TextModel.from_backbone(str(folder), ModelSpec())  # the kit trains fp32 master weights
    assert {p.dtype for p in model.parameters()} == {torch.float32}
