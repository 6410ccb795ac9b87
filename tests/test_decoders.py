"""Decoder backbones (Llama, Mistral, Qwen2, Qwen3, Gemma 2, Gemma 3) with LoRA: tiny random models of each family,
built offline from their config classes, with tokenizers shaped like the real ones."""

import json

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import DECODERS, tiny_frame
from helpers import assert_fold_reproduces_its_oof, lora_for

from utils import backbone as bb
from utils.batching import Collator, TextDataset
from utils.config import TrainConfig
from utils.model import WEIGHTS, ModelSpec, TextModel, load_tokenizer
from utils.predict import predict_folds, predict_model, predict_run
from utils.train import run_cv

# versions: decoder families' configs, tokenizers and LoRA adapters (transformers, peft)
pytestmark = pytest.mark.versions

FAMILIES = tuple(DECODERS)
TEXTS = ["the cat sat on a mat", "a dog ran home", "we like to play in the sun while birds sing and trees grow",
         "entropy"]


def padded(tok, texts, side):
    ds = TextDataset(texts, tok, 64)
    return Collator(tok.pad_token_id, padding_side=side)([ds[i] for i in range(len(texts))])


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("pooling", ["last", "attention", "mean"])
def test_left_and_right_padding_give_the_unpadded_outputs(tiny_decoders, family, pooling):
    """Whatever side the batch is padded on, each text's output is the one it gets alone: the
    pooling finds the real tokens from the mask and a decoder counts positions from its first
    real token."""
    tok = load_tokenizer(tiny_decoders[family])
    assert tok.pad_token is not None  # Llama's and Mistral's real tokenizers have none
    torch.manual_seed(0)
    model = TextModel.from_backbone(tiny_decoders[family], ModelSpec(pooling=pooling, lora_r=4)).eval()
    assert len(tok) == model.backbone.config.vocab_size  # no token added: the embeddings keep their size
    alone = torch.cat([model(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long))
                       for ids in TextDataset(TEXTS, tok, 64).input_ids])
    for side in ("right", "left"):
        b = padded(tok, TEXTS, side)
        first_real = b["attention_mask"].argmax(-1)
        assert (first_real > 0).any() == (side == "left")  # really padded on that side
        out = model(b["input_ids"], b["attention_mask"])
        assert torch.allclose(out, alone, atol=1e-5), (side, (out - alone).abs().max())


def test_the_tokenizers_own_padding_side_is_the_one_used(tiny_decoders):
    for family, spec in DECODERS.items():
        assert load_tokenizer(tiny_decoders[family]).padding_side == spec["side"]


@pytest.mark.parametrize("family", FAMILIES)
def test_only_adapters_pooling_and_head_train(tiny_decoders, family):
    model = TextModel.from_backbone(tiny_decoders[family], ModelSpec(pooling="attention", lora_r=4, layers=2))
    trained = bb.trainable_names(model)
    assert trained and all("lora_" in n or not n.startswith("backbone.") for n in trained)
    assert {n.split(".")[0] for n in trained} == {"backbone", "layer_mix", "pooling", "head"}
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    assert frozen and all(n.startswith("backbone.") and "lora_" not in n for n in frozen)
    # every targeted projection of every layer got adapters
    adapted = {n.split(".")[-4] for n in trained if ".lora_A." in n}
    assert adapted == set(bb.ATTENTION_AND_MLP)
    assert all(p.dtype == torch.float32 for n, p in model.named_parameters() if p.requires_grad)


def test_cls_pooling_on_a_decoder_is_refused(tiny_decoders):
    with pytest.raises(ValueError, match="first token has seen nothing"):
        TextModel.from_backbone(tiny_decoders["llama"], ModelSpec(pooling="cls"))


@pytest.mark.parametrize("family", ["llama", "qwen2", "gemma2"])
def test_lora_training_lowers_the_loss_saves_adapters_only_and_reloads_to_the_same_predictions(
        tiny_decoders, family, tmp_path):
    csv = tmp_path / "train.csv"
    tiny_frame(160).to_csv(csv, index=False)
    out = tmp_path / "run"
    metrics = run_cv(lora_for(csv, out, tiny_decoders[family], only_folds=(0,), epochs=6, eval_every=4,
                              head_bias_mean=True))
    hist = json.loads((out / "fold0" / "history.json").read_text())["history"]
    losses = [h["train_loss"] for h in hist]
    assert np.mean(losses[-3:]) < np.mean(losses[:3])
    # better than predicting the training rows' mean for every validation row
    folds = pd.read_csv(out / "folds.csv", dtype={"id": str}).set_index("id")
    frame = tiny_frame(160).set_index("id")
    is_valid = (folds.loc[frame.index, "fold"] == 0).to_numpy()
    y_va, y_tr = frame.target[is_valid], frame.target[~is_valid]
    constant = float(np.sqrt(((y_va - y_tr.mean()) ** 2).mean()))
    assert metrics["fold_score"][0] < constant
    # the fold folder holds the trained parameters only, and the base model's record
    saved = json.loads((out / "fold0" / "kit_config.json").read_text())
    assert saved["base"]["model"] == tiny_decoders[family]
    assert set(saved["base"]["files"]) >= {"config.json", "model.safetensors"}
    from safetensors.torch import load_file

    state = load_file(str(out / "fold0" / WEIGHTS))
    assert state and all("lora_" in k or not k.startswith("backbone.") for k in state)
    base_bytes = sum(p.numel() * 4 for n, p in TextModel.from_backbone(
        tiny_decoders[family], ModelSpec(pooling="last")).backbone.named_parameters())
    assert (out / "fold0" / WEIGHTS).stat().st_size < base_bytes / 2
    assert_fold_reproduces_its_oof(out, 0, csv)  # reloaded from the folder + the base
    assert predict_run(out, ["a b"], progress=False).shape == (1,)


def test_a_different_base_model_is_refused_in_one_line(tiny_decoders, tmp_path):
    torch.manual_seed(0)
    model = TextModel.from_backbone(tiny_decoders["llama"], ModelSpec(pooling="last", lora_r=2))
    tok = load_tokenizer(tiny_decoders["llama"])
    model.save(tmp_path / "fold0", tok)
    with pytest.raises(ValueError, match="not the one this fold was trained on") as e:
        TextModel.load(tmp_path / "fold0", base=tiny_decoders["mistral"])
    assert "\n" not in str(e.value)
    # the same architecture retrained: same file names, other content
    other = tmp_path / "other"
    import shutil

    shutil.copytree(tiny_decoders["llama"], other)
    from safetensors.torch import load_file, save_file

    w = load_file(str(other / "model.safetensors"))
    first = sorted(w)[0]
    w[first] = w[first] + 1
    save_file(w, str(other / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ValueError, match="model.safetensors has other content"):
        TextModel.load(tmp_path / "fold0", base=str(other))
    # the recorded base is found by itself
    again, _ = TextModel.load(tmp_path / "fold0")
    ids = torch.tensor([[1, 5, 7, 9]])
    assert torch.allclose(again(ids, torch.ones_like(ids)), model.eval()(ids, torch.ones_like(ids)), atol=1e-6)


def test_four_bit_is_refused_in_one_line_without_cuda(tiny_decoders):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="needs a CUDA GPU") as e:
        TextModel.from_backbone(tiny_decoders["llama"], ModelSpec(pooling="last", lora_r=4, load_in_4bit=True))
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="needs --lora-r"):
        TrainConfig(train_csv="t.csv", out="o", model="m", load_in_4bit=True)


def test_gemma2_runs_in_fp16_only_when_asked_and_is_warned():
    gemma2, llama = bb.FAMILIES["gemma2"], bb.FAMILIES["llama"]
    import unittest.mock as mock

    with mock.patch.object(torch.cuda, "is_available", lambda: True), \
            mock.patch.object(torch.cuda, "get_device_capability", lambda device=None: (7, 5)):
        assert bb.precision_for("fp16", gemma2, "cuda").name == "fp16"
        assert bb.precision_for("fp16", gemma2, "cuda").note.startswith("warning: gemma2 in fp16 as asked")
        assert bb.precision_for("fp16", llama, "cuda").note == ""
        assert bb.precision_for("auto", gemma2, "cuda").name == "fp32"  # a T4
    assert bb.precision_for("auto", gemma2, "cpu").name == "fp32"
    assert bb.precision_for("auto", llama, "cpu").name == "fp32"
    assert gemma2.attention == "eager"


def test_replicas_on_two_devices_predict_what_one_does(tiny_decoders, tmp_path):
    """Kaggle's T4 x2 at inference: a replica of the fold on each device, the texts dealt between
    them; here two CPU replicas stand for the two GPUs."""
    torch.manual_seed(0)
    model = TextModel.from_backbone(tiny_decoders["qwen2"], ModelSpec(pooling="attention", lora_r=2))
    with torch.no_grad():
        model.head.weight.normal_()
    model.save(tmp_path / "run" / "fold0", load_tokenizer(tiny_decoders["qwen2"]),
               extra={"train": {"max_len": 64}, "target_mean": [0.0]})
    texts = TEXTS * 5 + [""]
    one = predict_folds(tmp_path / "run", texts, device="cpu", progress=False)[0]
    two = predict_folds(tmp_path / "run", texts, devices=["cpu", "cpu"], progress=False)[0]
    assert np.allclose(one, two, atol=1e-6) and np.ptp(one[:-1]) > 0
    assert bb.count_parameters(model.backbone.config)[0] == sum(
        p.numel() for n, p in model.backbone.named_parameters() if "lora_" not in n)


def test_a_model_too_large_for_one_gpu_is_split_across_them(tiny_decoders, tmp_path, monkeypatch):
    from transformers import AutoConfig

    from utils.fold import read_fold
    from utils.model import model_bytes, placement

    torch.manual_seed(0)
    model = TextModel.from_backbone(tiny_decoders["llama"], ModelSpec(pooling="last", lora_r=2))
    model.save(tmp_path / "fold0", load_tokenizer(tiny_decoders["llama"]))
    record, config = read_fold(tmp_path / "fold0"), AutoConfig.from_pretrained(tmp_path / "fold0")
    size = model_bytes(record, config)
    assert size == 2.0 * bb.count_parameters(model.backbone.config)[0]  # a LoRA base in half precision

    class Props:
        def __init__(self, total):
            self.total_memory = total

    for memory, replicas in ((size * 10, 2), (size * 1.2, 1)):
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda g, m=memory: Props(m))
        places, split = placement(record, config)
        assert len(places) == replicas and (split is None) == (replicas == 2)
        if split:
            assert set(split) == {0, 1}


def test_a_split_load_predicts_what_a_whole_one_does(tiny_decoders, tmp_path):
    """The split path (accelerate's device_map "auto" under a memory cap per device) loads the
    same model; on this machine the only device is the CPU."""
    from transformers.utils import is_accelerate_available

    if not is_accelerate_available():  # transformers 4.57 wants accelerate >= 0.26 for a device_map
        with pytest.raises(ValueError, match="needs a newer accelerate"):
            TextModel.from_backbone(tiny_decoders["gemma2"], ModelSpec(pooling="mean", lora_r=2), device_map="auto")
        return
    torch.manual_seed(0)
    model = TextModel.from_backbone(tiny_decoders["gemma2"], ModelSpec(pooling="mean", lora_r=2))
    with torch.no_grad():
        model.head.weight.normal_()
    model.save(tmp_path / "fold0", load_tokenizer(tiny_decoders["gemma2"]))
    whole, tok = TextModel.load(tmp_path / "fold0")
    split, _ = TextModel.load(tmp_path / "fold0", split={"cpu": 10 * 2**30})
    a = predict_model(whole, tok, TEXTS, 64)
    b = predict_model(split, tok, TEXTS, 64)
    assert np.allclose(a, b, atol=1e-6) and np.ptp(a) > 0


@pytest.mark.parametrize("family", [f.name for f in bb.FAMILIES.values() if f.decoder])
def test_each_familys_default_lora_targets_are_its_real_module_names(family):
    """Every decoder family of the table, built tiny from its own config class: the default
    targets all exist (peft would refuse a name that matches nothing, and miss a renamed one)."""
    import transformers
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.for_model(family, vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, head_dim=8, pad_token_id=0,
                                  bos_token_id=1, eos_token_id=2)
    assert isinstance(config, transformers.PretrainedConfig) and bb.family_of(config).name == family
    torch.manual_seed(0)
    backbone = bb.add_lora(AutoModel.from_config(config), 2, 4, 0.0, bb.lora_targets((), bb.family_of(config)))
    adapted = {n.split(".")[-4] for n, _ in backbone.named_parameters() if ".lora_A." in n}
    assert adapted == set(bb.FAMILIES[family].lora_targets)


def test_gradient_checkpointing_with_adapters_gives_the_same_gradients(tiny_decoders):
    ids = torch.tensor([[1, 5, 7, 9, 11, 4], [1, 8, 3, 0, 0, 0]])
    mask = (torch.arange(6) < torch.tensor([[6], [3]])).long()
    grads = []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        model = TextModel.from_backbone(tiny_decoders["llama"], ModelSpec(pooling="attention", lora_r=2),
                                        gradient_checkpointing=checkpointing)
        with torch.no_grad():  # LoRA's B starts at zero: give it values so its A gets gradients
            for n, p in model.named_parameters():
                if "lora_B" in n:
                    p.normal_(0, 0.1)
        model.train()
        model(ids, mask).pow(2).sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad})
    assert grads[0].keys() == grads[1].keys() and any("lora_A" in n for n in grads[0])
    for n in grads[0]:
        assert torch.allclose(grads[0][n], grads[1][n], atol=1e-6), n
    assert any(grads[1][n].abs().sum() > 0 for n in grads[1] if "lora_A" in n)


def test_the_memory_estimate_orders_its_options_as_expected(tiny_decoders):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(tiny_decoders["llama"])
    full = bb.estimate_memory(config, "fp16", 8, 256)
    lora = bb.estimate_memory(config, "fp16", 8, 256, lora_r=8)
    qlora = bb.estimate_memory(config, "fp16", 8, 256, lora_r=8, load_in_4bit=True)
    ckpt = bb.estimate_memory(config, "fp16", 8, 256, lora_r=8, gradient_checkpointing=True)
    n = sum(p.numel() for p in TextModel.from_backbone(tiny_decoders["llama"], ModelSpec()).backbone.parameters())
    assert full.params == n and full.trained == n and lora.trained < n / 2
    assert qlora.weights < lora.weights < full.trainable
    assert ckpt.activations < lora.activations
    assert bb.estimate_memory(config, "fp16", 16, 256, lora_r=8).activations == pytest.approx(2 * lora.activations)
    line = bb.memory_line(lora, 15 * 2**30, "Tesla T4")
    assert "GiB peak per GPU" in line and "fits" in line and "\n" not in line
    assert "may NOT fit" in bb.memory_line(lora, lora.total, "tiny GPU")


@pytest.mark.parametrize("flags,message", [
    (["--lora-r", "4", "--load-in-4bit"], "needs a CUDA GPU"),
    (["--pooling", "cls"], "first token has seen nothing"),
    (["--load-in-4bit"], "needs --lora-r"),
])
def test_the_train_cli_refuses_what_a_decoder_cannot_do_in_one_line(tiny_decoders, tiny_csv, tmp_path, capsys,
                                                                     flags, message):
    from utils.train import main

    if torch.cuda.is_available() and "--lora-r" in flags:
        pytest.skip("this machine has CUDA")
    code = main(["--train-csv", str(tiny_csv), "--out", str(tmp_path / "run"), "--model", tiny_decoders["llama"],
                 *flags])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_a_run_says_why_gemma2_trains_in_fp32_on_a_t4(tiny_decoders, monkeypatch):
    from utils.train import check_backbone

    cfg = TrainConfig(train_csv="t", out="o", model=tiny_decoders["gemma2"], pooling="last")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    assert check_backbone(cfg).note.startswith("gemma2 runs in fp32, not fp16: Gemma 2's activations exceed")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))
    assert check_backbone(cfg).note == ""  # bf16, as for any backbone there
    llama = TrainConfig(train_csv="t", out="o", model=tiny_decoders["llama"], pooling="last")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    assert check_backbone(llama).note == ""


def saved_activation_bytes(model, ids, mask) -> int:
    """Bytes of the tensors autograd keeps for the backward of one forward (weights left out)."""
    weights = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    seen = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in weights:
            seen[ptr] = max(seen.get(ptr, 0), t.untyped_storage().nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(ids, mask)
    return sum(seen.values())


@pytest.mark.parametrize("family", ["llama", "qwen2", "gemma2"])
@pytest.mark.parametrize("dropout", [0.0, 0.05])
def test_the_activation_estimate_matches_what_autograd_saves(family, dropout):
    """The memory estimate's activation term against a measurement: the tensors autograd keeps
    for the backward, on a 4-layer decoder of each family (fp32, sdpa or Gemma 2's eager)."""
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.for_model(family, vocab_size=500, hidden_size=128, intermediate_size=352,
                                  num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                                  head_dim=32, pad_token_id=0)
    fam = bb.family_of(config)
    torch.manual_seed(0)
    kw = {"attn_implementation": fam.attention or "sdpa"}
    backbone = bb.add_lora(AutoModel.from_config(config, **kw), 4, 8, dropout, bb.lora_targets((), fam))
    model = TextModel(backbone, ModelSpec(pooling="mean", lora_r=4)).train()
    ids, mask = torch.randint(1, 500, (4, 96)), torch.ones(4, 96, dtype=torch.long)
    measured = saved_activation_bytes(model, ids, mask)
    est = bb.estimate_memory(config, "fp32", 4, 96, lora_r=4, lora_dropout=dropout)
    assert 0.85 < est.activations / measured < 1.15, (est.activations, measured)


def test_an_encoder_takes_lora_too(tiny_bert, tiny_csv, tmp_path):
    out = tmp_path / "run"
    run_cv(TrainConfig(train_csv=str(tiny_csv), out=str(out), model=tiny_bert, folds=2, epochs=2, batch_size=8,
                       eval_every=2, lr=5e-3, lora_r=4, only_folds=(0,), progress=False))
    from safetensors.torch import load_file

    state = load_file(str(out / "fold0" / WEIGHTS))
    adapted = {k.split(".")[-4] for k in state if ".lora_A." in k}
    assert adapted == {"query", "key", "value", "dense"}  # BERT's names, the family's defaults
    assert not [k for k in state if k.startswith("backbone.") and "lora_" not in k]
    assert_fold_reproduces_its_oof(out, 0, tiny_csv)


def test_the_best_checkpoint_of_a_lora_fold_copies_the_trained_weights_only(tiny_decoders):
    from utils.train import trained_state

    model = TextModel.from_backbone(tiny_decoders["mistral"], ModelSpec(pooling="last", lora_r=2))
    state = trained_state(model, lora=True)
    assert set(state) == bb.trainable_names(model) and all(v.device.type == "cpu" for v in state.values())
    before = {k: v.clone() for k, v in state.items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    model.load_state_dict(before, strict=False)  # what fold_best does with the best checkpoint
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())
    assert len(trained_state(model, lora=False)) == len(model.state_dict())
