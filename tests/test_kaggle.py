"""The Kaggle bundle: datasets, kernels, fp16 weights, commands; and the offline proof.

The proof (test_submission_kernel_runs_offline) lays a bundle out as a Kaggle input tree in both
layouts and executes the submission kernel's notebook with the network denied, `HF_HUB_OFFLINE=1`,
no pip and no project on any path: `utils` can only come from the attached code dataset.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
from helpers import (
    BASE_HANDLE,
    OWNER,
    base_weights_in,
    cfg_for,
    fake_notebook,
    fake_notebooks,
    input_tree,
    kernel_env,
    patent_data,
    run_offline,
    submission_notebook,
)
from safetensors.torch import load_file

from utils import bundle, kaggle
from utils.bundle import BundleError, BundleSpec, build, inject_parameters
from utils.kaggle import main
from utils.predict import predict
from utils.runs import identity
from utils.train import run_cv

# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def trained_joins(tmp_path_factory, tiny_bert):
    """One tiny 2-fold run of a competition joining a table from another Kaggle dataset."""
    tmp = tmp_path_factory.mktemp("joins")
    data = patent_data(tmp / "data")
    run = tmp / "bert-attn"
    run_cv(cfg_for(data / "train.csv", run, tiny_bert, competition=str(data / "competition.json"), max_steps=2,
                   lr=2e-5, max_len=32))
    return {"runs": [run], "data": data}


@pytest.fixture(scope="module")
def bundles(tmp_path_factory, trained):
    """'blend': both runs + blend.json (fp16); 'single': one run, no blend (fp16)."""
    tmp = tmp_path_factory.mktemp("bundle")
    nbs = fake_notebooks(tmp / "nbs")
    wheels = tmp / "wheels"  # what `make wheels` downloads; file names are all the bundle reads
    wheels.mkdir()
    for name in ("textstat-0.7.8-py3-none-any.whl", "pyphen-0.17.2-py3-none-any.whl"):
        with zipfile.ZipFile(wheels / name, "w") as z:
            z.writestr("placeholder.txt", name)
    blend = build(BundleSpec(trained["runs"], OWNER, tmp / "blend", blend=trained["blend"],
                             notebooks=nbs, wheels=wheels))
    single = build(BundleSpec(trained["runs"][:1], OWNER, tmp / "single", notebooks=nbs, wheels=None))
    return {"blend": blend, "single": single, "nbs": nbs}


# ----------------------------------------------------------------------------- datasets


def test_dataset_metadata_and_slug_validation():
    meta = bundle.dataset_metadata(OWNER, "commonlit-kit-code")
    assert meta == {
        "title": "Commonlit Kit Code",
        "id": f"{OWNER}/commonlit-kit-code",
        "licenses": [{"name": bundle.DEFAULT_LICENSE}],
    }
    with pytest.raises(BundleError, match="6-50"):
        bundle.dataset_metadata(OWNER, "a-b")
    with pytest.raises(BundleError, match="6-50"):
        bundle.dataset_metadata(OWNER, "x" * 51)
    with pytest.raises(BundleError, match="lowercase"):
        bundle.dataset_metadata(OWNER, "CommonLit_Kit")
    with pytest.raises(BundleError, match="user name"):
        bundle.dataset_metadata("me/you", "commonlit-kit-code")


def test_bad_name_fails_before_any_work(trained, tmp_path):
    with pytest.raises(BundleError, match="code dataset slug .* 6-50"):
        build(BundleSpec(trained["runs"], OWNER, tmp_path / "b", name="x" * 46, notebooks=[]))
    assert not (tmp_path / "b").exists()


def test_code_dataset(bundles):
    code = Path(bundles["blend"]["code"]["path"])
    meta = json.loads((code / "dataset-metadata.json").read_text())
    assert meta["id"] == f"{OWNER}/commonlit-kit-code" and len(meta["licenses"]) == 1
    assert 6 <= len(meta["title"]) <= 50
    for module in ("__init__.py", "model.py", "predict.py", "env.py", "bundle.py", "kaggle.py"):
        assert (code / "utils" / module).is_file()
    assert not list(code.rglob("__pycache__")) and not list(code.rglob("*.pyc"))
    # The EDA kernel's offline wheels ride along in wheels/ (utils.wheels.ensure installs them).
    assert bundles["blend"]["code"]["wheels"] == ["pyphen-0.17.2-py3-none-any.whl",
                                                  "textstat-0.7.8-py3-none-any.whl"]
    assert sorted(p.name for p in (code / "wheels").iterdir()) == bundles["blend"]["code"]["wheels"]
    assert bundles["single"]["code"]["wheels"] == []
    assert not (Path(bundles["single"]["code"]["path"]) / "wheels").exists()


def test_code_dataset_without_the_textstat_wheel_is_refused(tmp_path):
    (tmp_path / "wheels").mkdir()
    with pytest.raises(BundleError, match="has no textstat-0.7.8 wheel for the EDA kernel: run `make wheels`"):
        bundle.build_code(tmp_path / "code", OWNER, "commonlit-kit-code", tmp_path / "wheels")
    assert not (tmp_path / "code").exists()


# ----------------------------------------------------------------------------- models


def test_models_dataset_layout(bundles, trained):
    models = Path(bundles["blend"]["models"]["path"])
    meta = json.loads((models / "dataset-metadata.json").read_text())
    assert meta["id"] == f"{OWNER}/commonlit-kit-models"
    for run in trained["runs"]:
        mine = models / run.name
        assert {p.name for p in mine.iterdir()} == {"fold0", "fold1", *bundle.RUN_FILES}
        for fold in ("fold0", "fold1"):
            names = {p.name for p in (mine / fold).iterdir()}
            assert {
                "kit_model.safetensors",
                "kit_config.json",
                "config.json",
                "tokenizer.json",
                "oof.csv",
                "history.json",
            } <= names
            assert json.loads((mine / fold / "kit_config.json").read_text()) == json.loads(
                (run / fold / "kit_config.json").read_text()
            )
    blend = json.loads((models / "blend.json").read_text())
    assert blend["runs"] == [r.name for r in trained["runs"]] and blend["weights"] == [0.7, 0.3]
    # The bundled copies' identities (fp16 weights, no training state): utils.predict takes them.
    assert blend["identities"] == {r.name: identity(models / r.name) for r in trained["runs"]}
    assert all(blend["identities"][r.name] != identity(r) for r in trained["runs"])
    assert not (Path(bundles["single"]["models"]["path"]) / "blend.json").exists()


def test_fp16_weights_are_half_the_size_and_predict_the_same(bundles, trained, tmp_path):
    info = bundles["blend"]["models"]
    assert info["weights_bytes"] < 0.6 * info["source_weights_bytes"]
    assert 0 < info["max_diff"] <= 1e-3  # rounded, yet within the tolerance
    fold = Path(info["path"]) / "bert-attn" / "fold0"
    floats = [
        t for t in load_file(str(fold / "kit_model.safetensors")).values() if t.is_floating_point()
    ]
    assert floats and all(str(t.dtype) == "torch.float16" for t in floats)
    texts = ["the cat sat on a mat", "epistemological frameworks necessitate rigorous scrutiny"]
    bundled = [Path(info["path"]) / r.name for r in trained["runs"]]
    a = predict(trained["runs"], texts, [0.7, 0.3], progress=False)
    b = predict(bundled, texts, [0.7, 0.3], progress=False)
    assert np.abs(a - b).max() <= 1e-3


def test_fp16_check_can_fail_and_fp32_copies_exactly(trained, tmp_path):
    src = trained["runs"][0] / "fold0"
    with pytest.raises(BundleError, match="--fp32"):
        bundle.export_fold(src, tmp_path / "strict", half=True, tol=0.0)
    assert bundle.export_fold(src, tmp_path / "fp32", half=False, tol=0.0) == 0.0
    w = "kit_model.safetensors"
    assert (tmp_path / "fp32" / w).read_bytes() == (src / w).read_bytes()


def test_no_training_state_is_bundled(trained, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained["runs"][0], run)
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin"):
        (run / "fold0" / name).write_bytes(b"0" * 100)
    out = build(BundleSpec([run], OWNER, tmp_path / "b", notebooks=[], wheels=None))
    fold = Path(out["models"]["path"]) / "run" / "fold0"
    assert {p.name for p in fold.iterdir()} == {
        p.name for p in (trained["runs"][0] / "fold0").iterdir()
    }
    assert not [
        p for p in Path(out["models"]["path"]).rglob("*") if bundle.NOT_FOR_INFERENCE.search(p.name)
    ]


def test_a_blend_is_bundled_only_with_exactly_its_runs(trained, tmp_path):
    """Some of a blend's runs, even leaving out a member of weight 0 (the blend was fitted with
    it), or a run other than the one it was fitted on: refused in one line."""
    one = dict(notebooks=[], wheels=None)
    with pytest.raises(BundleError, match=r"its member\(s\) mpnet-mean not given") as e:
        build(BundleSpec(trained["runs"][:1], OWNER, tmp_path / "b", blend=trained["blend"], **one))
    assert "\n" not in str(e.value)
    zero = tmp_path / "zero.json"
    zero.write_text(json.dumps({"runs": ["bert-attn", "mpnet-mean"], "weights": [1.0, 0.0]}))
    with pytest.raises(BundleError, match=r"its member\(s\) mpnet-mean not given"):
        build(BundleSpec(trained["runs"][:1], OWNER, tmp_path / "c", blend=zero, **one))
    other = tmp_path / "other.json"
    ids = {r.name: identity(r) for r in trained["runs"]}
    other.write_text(json.dumps({"runs": list(ids), "weights": [0.5, 0.5],
                                 "identities": {**ids, "mpnet-mean": "0" * 12}}))
    with pytest.raises(BundleError, match="fitted on another run named 'mpnet-mean'"):
        build(BundleSpec(trained["runs"], OWNER, tmp_path / "d", blend=other, **one))


def test_same_run_names_are_refused(trained, tmp_path):
    other = tmp_path / "elsewhere" / "bert-attn"
    shutil.copytree(trained["runs"][0], other)
    with pytest.raises(BundleError, match="must differ"):
        build(BundleSpec([trained["runs"][0], other], OWNER, tmp_path / "b", notebooks=[],
                         wheels=None))


# ----------------------------------------------------------------------------- LoRA runs


def test_a_lora_runs_models_dataset_holds_its_adapters_only(trained_lora, tmp_path):
    """Each fold's fp16 weights are the trained parameters (adapters, pooling, head), never a base
    weight (a fraction of the base's parameters), and predict as the trained fold does."""
    from utils.model import WEIGHTS

    out = build(BundleSpec(trained_lora["runs"], OWNER, tmp_path / "b", notebooks=[], wheels=None,
                           base_model_sources=[BASE_HANDLE]))
    models, base = Path(out["models"]["path"]), trained_lora["base"]
    assert out["models"]["lora_bases"] == {"llama-lora": str(base)}
    assert base_weights_in(models, base) == []
    n_base = sum(t.numel() for t in load_file(str(base / "model.safetensors")).values())
    for fold in ("fold0", "fold1"):
        state = load_file(str(models / "llama-lora" / fold / WEIGHTS))
        assert state and all("lora_" in k or not k.startswith("backbone.") for k in state)
        assert all(str(t.dtype) == "torch.float16" for t in state.values() if t.is_floating_point())
        assert sum(t.numel() for t in state.values()) < n_base / 2
        saved = json.loads((models / "llama-lora" / fold / "kit_config.json").read_text())
        assert saved["base"] == json.loads((trained_lora["runs"][0] / fold / "kit_config.json").read_text())["base"]
    assert 0 < out["models"]["max_diff"] <= bundle.FP16_TOL
    texts = ["the cat sat on a mat", "epistemological frameworks necessitate rigorous scrutiny"]
    a = predict(trained_lora["runs"], texts, progress=False)
    b = predict([models / "llama-lora"], texts, progress=False)
    assert np.abs(a - b).max() <= bundle.FP16_TOL


@pytest.mark.parametrize(
    "source,key", [(BASE_HANDLE, "model_sources"), (f"{OWNER}/tiny-llama-base", "dataset_sources")]
)
def test_a_lora_runs_kernels_attach_its_base_model(trained_lora, tmp_path, source, key):
    """A Kaggle Model goes to model_sources, a dataset to dataset_sources, of the kernels that load
    the runs (submission, pseudo) only; an encoder run's kernels attach none."""
    nbs = fake_notebooks(tmp_path / "nbs")
    out = build(BundleSpec(trained_lora["runs"], OWNER, tmp_path / "b", notebooks=nbs, wheels=None,
                           base_model_sources=[source]))
    assert out["base_model_sources"] == [source]
    code, models = f"{OWNER}/commonlit-kit-code", f"{OWNER}/commonlit-kit-models"
    for k in out["kernels"]:
        meta = json.loads((Path(k["path"]) / "kernel-metadata.json").read_text())
        loads = k["role"] in ("submission", "pseudo")
        attached = {"model_sources": meta["model_sources"], "dataset_sources": meta["dataset_sources"]}
        want = {
            "model_sources": [], "dataset_sources": [code] + ([models] if bundle.ROLES[k["role"]]["models"] else [])
        }
        if loads:
            want[key] = want[key] + [source]
        assert attached == want, k["role"]
        assert k["model_sources"] == meta["model_sources"]


def test_runs_from_a_training_kernel_get_the_base_model_given(tmp_path):
    """Runs read from a kernel's output are not here to tell LoRA from not: the base model given is
    attached, and none is asked for."""
    nbs = fake_notebooks(tmp_path / "nbs")[3:4]
    kw = dict(kernel_sources=f"{OWNER}/kit-train-run", notebooks=nbs, wheels=None)
    out = build(BundleSpec(["runs/llama-lora"], OWNER, tmp_path / "b", base_model_sources=[BASE_HANDLE], **kw))
    assert [k["model_sources"] for k in out["kernels"]] == [[BASE_HANDLE]]
    out = build(BundleSpec(["runs/llama-lora"], OWNER, tmp_path / "c", **kw))
    assert [k["model_sources"] for k in out["kernels"]] == [[]]


def test_a_lora_run_without_its_base_model_source_is_refused_in_one_line(trained_lora, trained, tmp_path):
    one = dict(notebooks=[], wheels=None)
    with pytest.raises(BundleError, match="run llama-lora was trained with LoRA: its folds hold adapters only.*"
                       "give it as --base-model-source OWNER/MODEL/FRAMEWORK/VARIATION/VERSION") as e:
        build(BundleSpec(trained_lora["runs"], OWNER, tmp_path / "b", **one))
    assert "\n" not in str(e.value) and not (tmp_path / "b").exists()  # before any work
    with pytest.raises(BundleError, match="no run was trained with LoRA"):
        build(BundleSpec(trained["runs"], OWNER, tmp_path / "c", base_model_sources=[BASE_HANDLE], **one))
    for bad in ("google/gemma-2/transformers/gemma-2-9b-it", "google/gemma-2/transformers/gemma-2-9b-it/latest",
                "gemma-2", "me/Bad_Slug", "a b/gemma/transformers/x/1"):
        with pytest.raises(BundleError, match=f"--base-model-source '{re.escape(bad)}': expected OWNER/MODEL"):
            build(BundleSpec(trained_lora["runs"], OWNER, tmp_path / "d", base_model_sources=[bad], **one))
    assert bundle.base_source("metaresearch/llama-3.1/transformers/8b/1") == (
        "model", "metaresearch/llama-3.1/transformers/8b/1")
    assert bundle.base_source("me/my-base") == ("dataset", "me/my-base")


def test_the_cli_prints_what_a_lora_bundle_attaches(trained_lora, tmp_path, capsys):
    nbs = fake_notebooks(tmp_path / "nbs")
    argv = ["build", "--runs", str(trained_lora["runs"][0]), "--owner", OWNER, "--out", str(tmp_path / "b"),
            "--no-wheels", "--notebooks", *map(str, nbs)]
    assert main(argv, runner=_no_network) == 2
    assert "give it as --base-model-source" in capsys.readouterr().err
    assert main([*argv, "--base-model-source", BASE_HANDLE], runner=_no_network) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(ln.startswith("models dataset") and "adapters only: llama-lora" in ln for ln in lines)
    assert f"base model      {BASE_HANDLE} (Kaggle Model, attached to the submission and pseudo kernels: " \
        "a LoRA run's folds hold adapters only)" in lines


@pytest.mark.parametrize("mount", [
    "tiny-llama/transformers/default/1",  # a Kaggle Model, old layout
    f"models/{OWNER}/tiny-llama/transformers/default/1",  # a Kaggle Model, new layout
    "tiny-llama-base",  # a dataset, old layout
    f"datasets/{OWNER}/tiny-llama-base",  # a dataset, new layout
    "kit-base/transformers/default/2",  # another name: found by its config's sha256
    f"models/{OWNER}/kit-base/transformers/default/2",
])
def test_a_folds_base_model_is_found_under_every_kaggle_input_layout(tiny_decoders, tmp_path, monkeypatch, mount):
    """The recorded folder gone, the base attached under /kaggle/input is found by name or by content; a
    kit fold folder holding the same backbone config (the models dataset) is never taken for it."""
    from utils import backbone as bb
    from utils.model import ModelSpec, TextModel, load_tokenizer

    base = tmp_path / "hub" / "tiny-llama"
    shutil.copytree(tiny_decoders["llama"], base)
    record = bb.base_record(str(base))
    inp = tmp_path / "input"
    fold = inp / "commonlit-kit-models" / "tiny-llama-lora" / "fold0"  # named like the base
    TextModel.from_backbone(str(base), ModelSpec(pooling="last", lora_r=2)).save(fold, load_tokenizer(str(base)))
    shutil.copy2(base / "config.json", fold / "config.json")  # the same config as the base
    shutil.copytree(tiny_decoders["qwen2"], inp / "qwen2-1")  # another model, a "1" in its name
    shutil.move(base, inp / mount)
    monkeypatch.setenv("KAGGLE_INPUT_ROOT", str(inp))
    monkeypatch.delenv("KIT_BASE_MODEL", raising=False)
    assert bb.kaggle_model_dirs(record) == [inp / mount]
    assert bb.find_base(record) == inp / mount
    # Trained from an attached Kaggle Model: the record is its mount, whose last part is the version.
    kaggle_record = {**record, "model": "/kaggle/input/tiny-llama/transformers/default/1"}
    assert bb.kaggle_model_dirs(kaggle_record) == [inp / mount]


# ----------------------------------------------------------------------------- kernels


def test_injected_parameters_follow_the_parameters_cell():
    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_markdown_cell("# t"),
            nbformat.v4.new_code_cell("a = 1\nruns = ['x']", metadata={"tags": ["parameters"]}),
            nbformat.v4.new_code_cell("print(a)"),
        ]
    )
    nb = json.loads(nbformat.writes(nb))
    once = inject_parameters(nb, {"a": 2, "runs": ["r1", "r2"]})
    twice = inject_parameters(once, {"a": 3, "runs": []})
    for out, want in ((once, {"a": 2, "runs": ["r1", "r2"]}), (twice, {"a": 3, "runs": []})):
        tags = [c["metadata"].get("tags", []) for c in out["cells"]]
        assert tags == [[], ["parameters"], ["injected-parameters"], []]
        ns: dict = {}
        for cell in out["cells"][1:3]:
            exec("".join(cell["source"]), ns)
        assert {k: ns[k] for k in want} == want
    nbformat.validate(nbformat.from_dict(twice))
    assert len(nb["cells"]) == 3  # the input is left alone
    with pytest.raises(BundleError, match="parameters"):
        inject_parameters({"cells": [nb["cells"][0]]}, {"a": 1})


def test_kernels_metadata_and_parameters(bundles):
    slugify = pytest.importorskip("slugify").slugify
    kernels = {k["role"]: k for k in bundles["blend"]["kernels"]}
    assert list(kernels) == ["eda", "train", "ensemble", "submission", "pseudo"]
    code_ref, models_ref = f"{OWNER}/commonlit-kit-code", f"{OWNER}/commonlit-kit-models"
    for role, k in kernels.items():
        folder = Path(k["path"])
        assert folder.name == f"commonlit-kit-{role}"
        meta = json.loads((folder / "kernel-metadata.json").read_text())
        assert meta["id"] == f"{OWNER}/commonlit-kit-{role}"
        assert slugify(meta["title"]) == folder.name  # else `kernels push` refuses the title
        assert (folder / meta["code_file"]).is_file() and meta["code_file"].endswith(".ipynb")
        assert (meta["language"], meta["kernel_type"]) == ("python", "notebook")
        # A GPU only where it is used: training (both T4s), inference and pretraining +
        # pseudo-labelling; "GPU T4 x2" is Kaggle's NvidiaTeslaT4. EDA and blending run on CPU,
        # with no machine_shape.
        gpu = role in ("train", "submission", "pseudo")
        assert meta["enable_gpu"] is gpu and k["gpu"] is gpu
        assert meta.get("machine_shape") == ("NvidiaTeslaT4" if gpu else None)
        assert meta["is_private"] is True and meta["enable_tpu"] is False
        assert meta["competition_sources"] == ["commonlitreadabilityprize"]
        assert meta["enable_internet"] is (role in ("train", "pseudo"))  # hub backbones
        teachers = role in ("ensemble", "submission", "pseudo")
        want = [code_ref, models_ref] if teachers else [code_ref]
        assert meta["dataset_sources"] == want and meta["kernel_sources"] == []
        nb = json.loads((folder / meta["code_file"]).read_text())
        injected = [
            c for c in nb["cells"] if "injected-parameters" in c["metadata"].get("tags", [])
        ]
        assert len(injected) == 1
        ns: dict = {}
        exec("".join(injected[0]["source"]), ns)
        ns.pop("__builtins__")
        assert ns == k["parameters"]
    assert kernels["submission"]["parameters"] == {
        "kit_dataset": "commonlit-kit-code",
        "models_dataset": "commonlit-kit-models",
        "runs": ["bert-attn", "mpnet-mean"],
        "blend_json": "blend.json",
        "data_dir": "",
        "out_dir": "",
        "reranker": "",  # none: the runs' predictions are the submission
    }
    assert kernels["ensemble"]["parameters"] == {
        "kit_dataset": "commonlit-kit-code",
        "runs": ["bert-attn", "mpnet-mean"],
    }
    assert kernels["pseudo"]["parameters"] == {
        "kit_dataset": "commonlit-kit-code",
        "models_dataset": "commonlit-kit-models",
        "teachers": ["bert-attn", "mpnet-mean"],
        "blend_json": "blend.json",
    }
    assert kernels["eda"]["parameters"] == {"kit_dataset": "commonlit-kit-code"}
    assert kernels["train"]["parameters"] == {
        "kit_dataset": "commonlit-kit-code",
        "num_processes": 2,
    }
    single = {k["role"]: k for k in bundles["single"]["kernels"]}["submission"]["parameters"]
    assert single["runs"] == ["bert-attn"] and single["blend_json"] == ""


def test_kernel_sources_replace_the_models_dataset(trained, tmp_path):
    nbs = fake_notebooks(tmp_path / "nbs")
    spec = BundleSpec(["runs/bert-attn"], OWNER, tmp_path / "b",
                      kernel_sources=f"{OWNER}/kit-train-run", notebooks=nbs, wheels=None)
    out = build(spec)
    assert out["models"] is None and not (tmp_path / "b" / "commonlit-kit-models").exists()
    sub = {k["role"]: k for k in out["kernels"]}["submission"]
    meta = json.loads((Path(sub["path"]) / "kernel-metadata.json").read_text())
    assert meta["kernel_sources"] == [f"{OWNER}/kit-train-run"]
    assert meta["dataset_sources"] == [f"{OWNER}/commonlit-kit-code"]
    assert sub["parameters"]["models_dataset"] == "kit-train-run"
    assert sub["parameters"]["runs"] == ["runs/bert-attn"]  # where the train kernel wrote it
    pseudo = {k["role"]: k for k in out["kernels"]}["pseudo"]
    meta = json.loads((Path(pseudo["path"]) / "kernel-metadata.json").read_text())
    assert meta["kernel_sources"] == [f"{OWNER}/kit-train-run"]
    assert pseudo["parameters"]["teachers"] == ["runs/bert-attn"]
    for bad in ("../bert-attn", "/kaggle/working/runs/bert-attn"):
        with pytest.raises(BundleError, match="inside the source kernel's output"):
            build(BundleSpec([bad], OWNER, tmp_path / "c",
                             kernel_sources=f"{OWNER}/kit-train-run"))
    with pytest.raises(BundleError, match="OWNER/KERNEL"):
        build(BundleSpec(["r"], OWNER, tmp_path / "c", kernel_sources="nokernel", notebooks=nbs))


def test_every_kernel_attaches_the_datasets_whose_tables_the_competition_joins(tmp_path, capsys):
    """A join's OWNER/DATASET/FILE: the dataset is attached to every kernel (each reads the
    competition's data), after the kit's own datasets; the build says so."""
    desc = patent_data(tmp_path / "data") / "competition.json"
    nbs = fake_notebooks(tmp_path / "nbs")
    argv = ["build", "--runs", "runs/bert-attn", "--owner", OWNER, "--out", str(tmp_path / "b"), "--no-wheels",
            "--kernel-sources", f"{OWNER}/kit-train-run", "--competition", str(desc), "--notebooks", *map(str, nbs)]
    assert main(argv) == 0
    assert "joined dataset  xhlulu/cpc-codes (attached to every kernel" in capsys.readouterr().out
    metas = [json.loads(p.read_text()) for p in sorted((tmp_path / "b" / "kernels").glob("*/kernel-metadata.json"))]
    assert len(metas) == 5
    code = f"{OWNER}/us-patent-phrase-to-kit-code"
    assert all(m["dataset_sources"] == [code, "xhlulu/cpc-codes"] for m in metas), metas


def test_missing_notebook_or_parameter_is_a_clear_error(trained, tmp_path, capsys):
    nbs = fake_notebooks(tmp_path / "nbs")
    nbs[0].unlink()
    fake_notebook(nbs[3], ("kit_dataset", "runs"))  # lacks models_dataset, blend_json, ...
    argv = [
        "build",
        "--runs",
        str(trained["runs"][0]),
        "--owner",
        OWNER,
        "--out",
        str(tmp_path / "b"),
        "--no-wheels",
        "--push",
        "--notebooks",
        *map(str, nbs),
    ]
    assert main(argv, runner=_no_network) == 2
    err = capsys.readouterr().err
    assert f"notebook {nbs[0]} not found: kernel commonlit-kit-eda skipped" in err
    assert "does not declare models_dataset, blend_json, data_dir, out_dir" in err
    assert "not pushing" in err
    built = sorted(p.name for p in (tmp_path / "b" / "kernels").iterdir())
    assert built == ["commonlit-kit-ensemble", "commonlit-kit-pseudo", "commonlit-kit-train"]


# ----------------------------------------------------------------------------- commands


def _no_network(*a, **k):
    raise AssertionError(f"network call without --push: {a}")


def test_commands_printed_in_order_and_nothing_runs_without_push(trained, tmp_path, capsys):
    nbs = fake_notebooks(tmp_path / "nbs")
    out = tmp_path / "b"
    argv = [
        "build",
        "--runs",
        *map(str, trained["runs"]),
        "--blend",
        str(trained["blend"]),
        "--owner",
        OWNER,
        "--out",
        str(out),
        "--no-wheels",
        "--notebooks",
        *map(str, nbs),
    ]
    assert main(argv, runner=_no_network) == 0
    text = capsys.readouterr().out
    lines = [ln.strip() for ln in text.splitlines()]
    steps = [m.group(1) for m in map(re.compile(r"^\d+\. (.*)").match, lines) if m]
    assert steps == [
        f"kaggle datasets create -p {out}/commonlit-kit-code --dir-mode zip",
        f"kaggle datasets create -p {out}/commonlit-kit-models --dir-mode zip",
        f"kaggle kernels push -p {out}/kernels/commonlit-kit-submission",
        "kaggle competitions submit commonlitreadabilityprize -f submission.csv "
        "-k kituser/commonlit-kit-submission -v N -m 'kaggle-text-kit 0.1.0'",
    ]
    version = f"kaggle datasets version -p {out}/commonlit-kit-code -m 'kaggle-text-kit 0.1.0' --dir-mode zip"
    assert any(ln.endswith(f"exists, instead: {version}") for ln in lines)
    # The other kernels: listed after the steps, each with what it runs on, pushed on request.
    optional = text[text.index("Optional:") :].splitlines()
    assert "--kernels eda train ensemble pseudo" in optional[0]
    assert [ln.strip() for ln in optional[1:] if ln.strip()] == [
        f"kaggle kernels push -p {out}/kernels/commonlit-kit-eda  # CPU",
        f"kaggle kernels push -p {out}/kernels/commonlit-kit-train  # GPU T4 x2, num_processes=2",
        f"kaggle kernels push -p {out}/kernels/commonlit-kit-ensemble  # CPU",
        f"kaggle kernels push -p {out}/kernels/commonlit-kit-pseudo  # GPU T4 x2",
    ]
    assert any("fp16" in ln and "models dataset" in ln for ln in lines)
    with pytest.raises(SystemExit, match="2"):  # --kernels names what --push pushes
        main([*argv, "--kernels", "train"], runner=_no_network)
    assert "add --push" in capsys.readouterr().err


class Done:
    def __init__(self, rc, out=""):
        self.returncode, self.stdout, self.stderr = rc, out, ""


def test_push_creates_or_versions_then_pushes(trained, tmp_path, capsys):
    calls = []
    cli = kaggle._kaggle()

    def runner(argv, **kw):
        assert argv[: len(cli)] == cli
        args = argv[len(cli) :]
        calls.append(args[:2] + [args[args.index("-p") + 1] if "-p" in args else args[2]])
        if args[:2] == ["datasets", "status"]:
            exists = "commonlit-kit-code" in args[2]  # the code dataset exists, models not yet
            seen = sum(c[:2] == ["datasets", "status"] and c[2] == args[2] for c in calls)
            return Done(0, "ready") if exists or seen > 1 else Done(1, "404 Not Found")
        if args[:2] == ["kernels", "push"]:
            return Done(0, "Kernel version 12 successfully pushed.  Please check progress at x")
        return Done(0, "ok")

    nbs = fake_notebooks(tmp_path / "nbs")
    b = tmp_path / "b"
    argv = ["build", "--runs", str(trained["runs"][0]), "--owner", OWNER, "--out", str(b)]
    argv += ["--no-wheels", "--push", "--notebooks", *map(str, nbs)]
    assert main(argv, runner=runner) == 0
    code, models = f"{OWNER}/commonlit-kit-code", f"{OWNER}/commonlit-kit-models"
    assert calls == [
        ["datasets", "status", code],
        ["datasets", "version", str(b / "commonlit-kit-code")],
        ["datasets", "status", code],
        ["datasets", "status", models],
        ["datasets", "create", str(b / "commonlit-kit-models")],
        ["datasets", "status", models],
        ["kernels", "push", str(b / "kernels" / "commonlit-kit-submission")],  # only this one
    ]
    submit = (
        "kaggle competitions submit commonlitreadabilityprize -f submission.csv "
        f"-k {OWNER}/commonlit-kit-submission -v 12 -m 'kaggle-text-kit 0.1.0'"
    )
    assert submit in [ln.strip() for ln in capsys.readouterr().out.splitlines()]

    calls.clear()
    assert main([*argv, "--kernels", "ensemble", "eda"], runner=runner) == 0
    pushed = [Path(c[2]).name for c in calls if c[:2] == ["kernels", "push"]]
    assert pushed == ["commonlit-kit-eda", "commonlit-kit-ensemble", "commonlit-kit-submission"]


def test_submission_waits_for_its_source_kernel(tmp_path, capsys):
    """Training on Kaggle: the submission kernel reads the train kernel's output, so pushing
    both at once would run it on nothing; the train kernel goes alone, the rest is printed."""
    calls = []

    def runner(argv, **kw):
        calls.append(argv[len(kaggle._kaggle()) :])
        return Done(0, "ready" if "status" in argv else "Kernel version 1 successfully pushed.")

    nbs = fake_notebooks(tmp_path / "nbs")
    train = f"{OWNER}/commonlit-kit-train"
    argv = ["build", "--runs", "runs/roberta-base-attention", "--kernel-sources", train]
    argv += ["--owner", OWNER, "--out", str(tmp_path / "b"), "--no-wheels", "--push"]
    assert main([*argv, "--kernels", "train", "--notebooks", *map(str, nbs)], runner) == 0
    pushes = [Path(c[3]).name for c in calls if c[:2] == ["kernels", "push"]]
    assert pushes == ["commonlit-kit-train"]
    out = capsys.readouterr().out
    after = out[out.index(f"When {train} has finished") :]
    assert f"kaggle kernels push -p {tmp_path}/b/kernels/commonlit-kit-submission" in after


def test_push_stops_when_kaggle_refuses(trained, tmp_path, capsys):
    """The kaggle CLI exits 0 on a refused dataset or kernel; its message is what tells."""

    def runner(argv, **kw):
        if "status" in argv:
            return Done(1, "404")
        return Done(0, "Dataset creation error: The requested title is already in use")

    nbs = fake_notebooks(tmp_path / "nbs")[3:]
    argv = ["build", "--runs", str(trained["runs"][0]), "--owner", OWNER]
    argv += ["--out", str(tmp_path / "b"), "--no-wheels", "--push", "--notebooks", *map(str, nbs)]
    assert main(argv, runner=runner) == 2
    assert "`kaggle datasets create` failed (exit 0)" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the proof


PROBE = """\
import importlib.util, socket
print("utils:", importlib.util.find_spec("utils"), "| pip:", importlib.util.find_spec("pip"))
try:
    socket.create_connection(("1.1.1.1", 443), timeout=3)
    print("network: open")
except OSError as e:
    print("network: denied", e)
"""


@pytest.mark.parametrize("layout,which", [("old", "blend"), ("new", "single")])
def test_submission_kernel_runs_offline(layout, which, trained, tmp_path):
    sub_nb = submission_notebook(tmp_path)
    spec = BundleSpec(
        trained["runs"] if which == "blend" else trained["runs"][:1],
        OWNER,
        tmp_path / "bundle",
        blend=trained["blend"] if which == "blend" else None,
        notebooks=[sub_nb],
        wheels=None,
    )
    out = build(spec)
    kernel = Path(out["kernels"][0]["path"])
    notebook = kernel / json.loads((kernel / "kernel-metadata.json").read_text())["code_file"]
    inp, work, cwd = tmp_path / "input", tmp_path / "working", tmp_path / "cwd"
    input_tree(inp, layout, out, trained["test"], [trained["sample"]])
    work.mkdir()
    cwd.mkdir()
    py, env, prefix = kernel_env(tmp_path / "k")
    env.update(KAGGLE_INPUT_ROOT=str(inp), KAGGLE_WORKING_ROOT=str(work))

    probe = subprocess.run(
        [*prefix, str(py), "-c", PROBE],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "utils: None | pip: None" in probe.stdout, probe.stdout + probe.stderr
    assert "network: denied" in probe.stdout, probe.stdout + probe.stderr

    executed = tmp_path / "executed.ipynb"
    cmd = [
        *prefix,
        sys.executable,
        "-m",
        "papermill",
        str(notebook),
        str(executed),
        "-k",
        "kit-offline",
        "--cwd",
        str(cwd),
        "--no-progress-bar",
    ]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]

    nb = json.loads(executed.read_text())
    printed = "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []))
    code_dir = (
        inp / "commonlit-kit-code"
        if layout == "old"
        else inp / "datasets" / OWNER / "commonlit-kit-code"
    )
    assert f"from {code_dir / 'utils'}" in printed  # the kit came from the attached dataset
    sub = pd.read_csv(work / "submission.csv", dtype={"id": str})
    test = pd.read_csv(trained["test"], dtype={"id": str})
    assert list(sub.columns) == ["id", "target"] and sub.id.tolist() == test.id.tolist()
    assert np.isfinite(sub.target).all()
    runs = [Path(out["models"]["path"]) / r for r in out["models"]["runs"]]
    weights = [0.7, 0.3] if which == "blend" else None
    want = predict(runs, test.excerpt.tolist(), weights, progress=False)
    assert np.abs(sub.target.to_numpy() - want).max() < 1e-4


@pytest.mark.parametrize("which", ["trained_ell", "trained_tweets"])
def test_the_submission_kernel_of_other_competitions_runs_offline(which, request, tmp_path):
    """Six scores (values clipped to 1-5) and a binary label (the blend's F1 threshold), each in its
    sample submission's columns and row order, by the real submission notebook with the internet off."""
    from utils.predict import submit

    t = request.getfixturevalue(which)
    comp = t["comp"]
    out = build(BundleSpec(t["runs"], OWNER, tmp_path / "bundle", blend=t["blend"],
                           notebooks=[submission_notebook(tmp_path)], wheels=None))
    assert out["competition"] == comp.slug and out["code"]["id"] == f"{OWNER}/{comp.kit_name}-code"
    kernel = Path(out["kernels"][0]["path"])
    meta = json.loads((kernel / "kernel-metadata.json").read_text())
    assert meta["competition_sources"] == [comp.slug]
    inp = tmp_path / "input"
    input_tree(inp, "new", out, t["test"], [t["data"] / comp.sample_submission])
    work = run_offline(kernel / meta["code_file"], inp, tmp_path)
    sub = pd.read_csv(work / "submission.csv", dtype={comp.id_col: str})
    sample = pd.read_csv(t["data"] / comp.sample_submission, dtype={comp.id_col: str})
    assert list(sub.columns) == list(sample.columns) and sub[comp.id_col].tolist() == sample[comp.id_col].tolist()
    runs = [Path(out["models"]["path"]) / r for r in out["models"]["runs"]]
    want = submit(runs, t["test"], tmp_path / "want.csv", blend_json=Path(out["models"]["path"]) / "blend.json",
                  progress=False)
    if comp.submission_kind == "labels":
        assert sub.equals(want)
    else:
        assert np.abs(sub.drop(columns=comp.id_col).to_numpy() - want.drop(columns=comp.id_col).to_numpy()).max() < 1e-4
        assert sub.drop(columns=comp.id_col).stack().between(1.0, 5.0).all()


@pytest.mark.parametrize("layout", ["old", "new"])
def test_the_submission_kernel_finds_a_table_of_another_dataset_offline(layout, trained_joins, tmp_path):
    """test_joins names xhlulu/cpc-codes/titles.csv: the kernel attaches that dataset and, with the
    internet off, joins the table from where Kaggle mounts it (not beside the competition's files)."""
    from utils.predict import submit

    t = trained_joins
    out = build(BundleSpec(t["runs"], OWNER, tmp_path / "bundle", notebooks=[submission_notebook(tmp_path)],
                           wheels=None))
    kernel = Path(out["kernels"][0]["path"])
    meta = json.loads((kernel / "kernel-metadata.json").read_text())
    assert "xhlulu/cpc-codes" in meta["dataset_sources"]
    inp = tmp_path / "input"
    input_tree(inp, layout, out, t["data"] / "test.csv", [t["data"] / "sample_submission.csv"],
                {"xhlulu/cpc-codes": [t["data"] / "titles.csv"]})
    comp_dir = inp / out["competition"] if layout == "old" else inp / "competitions" / out["competition"]
    assert (comp_dir / "test.csv").is_file() and not (comp_dir / "titles.csv").exists()
    work = run_offline(kernel / meta["code_file"], inp, tmp_path)
    sub = pd.read_csv(work / "submission.csv", dtype={"id": str})
    runs = [Path(out["models"]["path"]) / r for r in out["models"]["runs"]]
    want = submit(runs, t["data"] / "test.csv", tmp_path / "want.csv", progress=False)  # titles.csv beside
    assert list(sub.columns) == ["id", "score"] and sub["id"].tolist() == want["id"].tolist()
    assert np.abs(sub["score"].to_numpy() - want["score"].to_numpy()).max() < 1e-4
