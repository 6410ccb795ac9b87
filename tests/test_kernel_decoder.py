"""The Kaggle path of a decoder LLM trained with LoRA: its models dataset carries the adapters only,
the submission kernel attaches its base model as a Kaggle Model (kernel-metadata.json's
model_sources) and, with the internet off, finds it where Kaggle mounts it (either input layout)
and writes the submission utils.predict writes here."""

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import (
    BASE_HANDLE,
    OWNER,
    base_weights_in,
    input_tree,
    run_offline,
    submission_notebook,
    train_lora,
)

from utils import predict
from utils.bundle import BundleSpec, build

pytestmark = [pytest.mark.integration, pytest.mark.versions]

# Where Kaggle mounts the Kaggle Model BASE_HANDLE (OWNER/MODEL/FRAMEWORK/VARIATION/VERSION).
MOUNTS = {"old": "tiny-llama/transformers/default/1", "new": f"models/{OWNER}/tiny-llama/transformers/default/1"}


@pytest.mark.parametrize("layout", ["old", "new"])
def test_a_lora_runs_submission_kernel_finds_its_base_model_offline(layout, tiny_decoders, tmp_path):
    base = tmp_path / "hub" / "tiny-llama"  # what the run was trained from; gone before the kernel runs
    shutil.copytree(tiny_decoders["llama"], base)
    t = train_lora(tmp_path / "train", str(base))
    out = build(BundleSpec(t["runs"], OWNER, tmp_path / "bundle", notebooks=[submission_notebook(tmp_path)],
                           wheels=None, base_model_sources=[BASE_HANDLE]))
    models = Path(out["models"]["path"])
    assert base_weights_in(models, base) == []  # the adapters travel, the base does not
    kernel = Path(out["kernels"][0]["path"])
    meta = json.loads((kernel / "kernel-metadata.json").read_text())
    assert meta["model_sources"] == [BASE_HANDLE]
    # What utils.predict writes here, from the trained run (fp32) and from its bundled copy (fp16).
    trained = predict.submit(t["runs"], t["test"], tmp_path / "trained.csv", progress=False)
    bundled = predict.submit([models / r for r in out["models"]["runs"]], t["test"], tmp_path / "bundled.csv",
                             progress=False)
    inp = tmp_path / "input"
    input_tree(inp, layout, out, t["test"], [t["sample"]])
    (inp / MOUNTS[layout]).parent.mkdir(parents=True)
    shutil.move(base, inp / MOUNTS[layout])  # attached as a Kaggle Model, nowhere else
    work = run_offline(kernel / meta["code_file"], inp, tmp_path)
    sub = pd.read_csv(work / "submission.csv", dtype={"id": str})
    for want, tol in ((bundled, 1e-4), (trained, 2e-3)):  # fp16 adapters against the fp32 run
        assert list(sub.columns) == ["id", "target"] and sub["id"].tolist() == want["id"].astype(str).tolist()
        assert np.abs(sub["target"].to_numpy() - want["target"].to_numpy()).max() < tol
