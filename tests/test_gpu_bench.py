"""bench/gpu.py: the prepared GPU check runs end to end on CPU (--smoke), LoRA arms included, and
--prepare's carry; bench/llm_memory.py: the architectures its figures are computed on."""

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
LORA_ARMS = ("LoRA", "LoRA + checkpointing", "QLoRA 4-bit", "QLoRA 4-bit + checkpointing")


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def test_smoke_run_reports_every_arm(tmp_path, tiny_mpnet):
    out = tmp_path / "gpu.json"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # the CPU path, also on a machine with a GPU
    # --shape-of: the training arms again on a random model of a tiny MPNet's config
    proc = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--out", str(out), "--shape-of", tiny_mpnet],
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
        # One figure per pass over the arms; the reported speed is their median.
        assert len(x["samples_per_s_runs"]) == result["settings"]["train_repeats"] == 2, x
        assert x["samples_per_s"] == pytest.approx(sum(x["samples_per_s_runs"]) / 2), x
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

    lora = result["lora"]
    assert [x["arm"] for x in lora] == list(LORA_ARMS)
    by_lora = {x["arm"]: x for x in lora}
    for name in LORA_ARMS[:2]:  # LoRA on the frozen base: runs on CPU
        x = by_lora[name]
        assert x["status"] == "ok", x
        assert finite(x["samples_per_s"]) and x["samples_per_s"] > 0, x
        assert finite(x["valid_rmse"]), x
        assert x["steps"] == result["settings"]["steps"]
        assert x["precision"] == "fp32"  # what "auto" is for this family off CUDA
        assert x["trained_dtype"] == ["float32"]  # adapters, pooling and head train in fp32
        assert x["trained_params"] > 0, x
        # The estimate counts the adapters peft built, to the parameter.
        assert x["trained_params"] == x["estimate_trained_params"], x
        parts = x["estimate_mib"]
        assert parts["total"] > 0
        assert parts["total"] == pytest.approx(parts["weights"] + parts["trainable"] + parts["activations"], abs=0.2)
        assert x["peak_mem_mib"] is None and x["peak_over_estimate"] is None  # CPU: no GPU peak
    # Checkpointing recomputes the same forward, LoRA's dropout masks included.
    assert by_lora["LoRA + checkpointing"]["valid_rmse"] == pytest.approx(by_lora["LoRA"]["valid_rmse"], abs=1e-5)
    assert (by_lora["LoRA + checkpointing"]["estimate_mib"]["activations"]
            < by_lora["LoRA"]["estimate_mib"]["activations"])
    for name in LORA_ARMS[2:]:  # 4-bit needs CUDA and bitsandbytes: reported, not a crash
        assert by_lora[name]["status"] == "skipped", by_lora[name]
        assert "CUDA" in by_lora[name]["reason"]
    assert "random" in result["decoder"]["weights"] and result["decoder"]["family"] == "qwen2"
    assert "random weights" in proc.stdout

    env_info = result["environment"]
    assert {"torch", "transformers", "accelerate", "device"} <= set(env_info)
    text = out.read_text()
    assert str(ROOT) not in text and str(tmp_path) not in text  # no machine paths stored

    for row in TRAIN_ARMS + INFER_ARMS + LORA_ARMS:
        assert f"| {row}" in proc.stdout, row
    assert "Total " in proc.stdout

    shaped = result["backbone_shape"]
    assert shaped["shape"]["model_type"] == "mpnet" and shaped["shape"]["params"] > 0
    assert [x["arm"].split(" (")[0] for x in shaped["training"]] == list(TRAIN_ARMS)
    for x in shaped["training"]:
        if x["arm"] == "fp16 AMP":
            assert x["status"] == "skipped" and "CUDA" in x["reason"], x  # needs a GPU
            continue
        if x["arm"].startswith("checkpointing on"):  # MPNet's model cannot recompute its layers: the kit says so
            assert x["status"] == "skipped" and "cannot recompute its layers" in x["reason"], x
            continue
        assert x["status"] == "ok" and finite(x["samples_per_s"]) and finite(x["valid_rmse"]), x
    assert "Backbone shape (mpnet, random weights)" in proc.stdout


def test_the_lora_arms_decoder_has_qwen2_05bs_size():
    """The GPU run's random decoder is the size its output says: Qwen2-0.5B without its LM head."""
    from transformers import Qwen2Config

    from utils import backbone as bb

    gpu = load_script("gpu")
    total, _ = bb.count_parameters(Qwen2Config(**gpu.DECODERS["qwen2-0.5b"]))
    assert total == pytest.approx(494e6, rel=0.01), total


def test_llm_memory_builds_the_published_architectures():
    """bench/llm_memory.py's figures rest on these: each config's parameter count is the published
    size less its LM head (AutoModel has none), and the T4 precision is the family's rule."""
    from utils import backbone as bb

    llm = load_script("llm_memory")
    published = {"Gemma-2-9B": (9.24e9, 0), "Llama-3.1-8B": (8.03e9, 128256 * 4096),
                 "Qwen2.5-7B": (7.62e9, 152064 * 3584)}  # (parameters, untied LM head)
    for name, (size, lm_head) in published.items():
        config = llm.config_of(name)
        total, _ = bb.count_parameters(config)
        assert total == pytest.approx(size - lm_head, rel=0.005), (name, total)
    t4 = {name: llm.t4_precision(bb.family_of(llm.config_of(name))) for name in published}
    assert t4 == {"Gemma-2-9B": "fp32", "Llama-3.1-8B": "fp16", "Qwen2.5-7B": "fp16"}


def test_llm_memory_hours_are_the_stated_arithmetic(tmp_path):
    """The hours follow from the printed inputs: half the utilisation doubles them, and
    checkpointing costs 6 x N per token against 4 x N."""
    llm = load_script("llm_memory")
    out = tmp_path / "llm.json"
    assert llm.main(["--out", str(out), "--tokens", "200"]) == 0
    result = json.loads(out.read_text())
    assert result["estimate"] is True
    for h in result["hours"]:
        assert h["hours_pessimistic"] == pytest.approx(2 * h["hours"])
        assert h["train_tokens"] == pytest.approx(5 * 2 * 2834 * 4 / 5 * 200)
    mem = {(m["model"], m["setting"]): m for m in result["memory"]}
    for h in result["hours"]:
        n = mem[(h["model"], h["setting"])]["linear_params"]
        assert h["train_flops_per_token"] == (6 if h["setting"] == "recipe" else 4) * n


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
    from safetensors.torch import load_file

    # The file itself (transformers 4.x would load it in fp32 whatever it holds).
    stored = {t.dtype for f in folder.glob("*.safetensors") for t in load_file(str(f)).values()}
    assert stored == {torch.float16}, stored
    gpu = load_script("gpu")
    assert gpu.stored_dtype(str(folder)) == "float16"
    from utils.model import ModelSpec, TextModel

    model = TextModel.from_backbone(str(folder), ModelSpec())  # the kit trains fp32 master weights
    assert {p.dtype for p in model.parameters()} == {torch.float32}
