import pytest
import torch

from utils.model import ModelSpec, TextModel, encoder_layers, load_tokenizer
from utils.predict import predict_model

# versions: model and tokenizer saving and loading (transformers)
pytestmark = pytest.mark.versions

TEXTS = ["The cat sat on a mat.", "Notwithstanding the aforementioned considerations entropy grows."]


@pytest.mark.parametrize("kind", ["tiny_bert", "tiny_roberta"])
@pytest.mark.parametrize("pooling,layers", [("attention", 1), ("attention+mean", 2), ("max", 1)])
def test_save_load_gives_identical_predictions(kind, pooling, layers, request, tmp_path):
    path = request.getfixturevalue(kind)
    torch.manual_seed(0)
    model = TextModel.from_backbone(path, ModelSpec(pooling=pooling, layers=layers)).eval()
    tok = load_tokenizer(path)
    before = predict_model(model, tok, TEXTS, max_len=32)
    model.save(tmp_path / "m", tok, extra={"train": {"max_len": 32}})
    loaded, tok2 = TextModel.load(tmp_path / "m")
    after = predict_model(loaded, tok2, TEXTS, max_len=32)
    assert before.shape == (2, 1)
    assert (before == after).all()
    assert loaded.spec == model.spec
    assert not (tmp_path / "m" / "model.safetensors").exists()  # not mistaken for a bare backbone


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_head_runs_in_fp32_under_autocast(tiny_bert, dtype):
    """AMP speeds the encoder; the regression output itself is not rounded to 16 bits."""
    torch.manual_seed(0)
    model = TextModel.from_backbone(tiny_bert, ModelSpec()).eval()
    with torch.no_grad():
        model.head.bias.fill_(1.2345678)  # a value bf16 cannot hold (nearest: 1.234375)
    tok = load_tokenizer(tiny_bert)
    enc = tok(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad(), torch.autocast("cpu", dtype=dtype):
        preds, _ = model(enc["input_ids"], enc["attention_mask"], return_weights=True)
        states = model.backbone(**enc).last_hidden_state
        pooled = model.pooling(states, enc["attention_mask"])
    assert preds.dtype == torch.float32
    expected = pooled.float() @ model.head.weight.T + model.head.bias
    torch.testing.assert_close(preds, expected, rtol=1e-6, atol=1e-6)


def test_load_needs_no_hub_name(tiny_bert, tmp_path):
    model = TextModel.from_backbone(tiny_bert, ModelSpec())
    model.save(tmp_path / "m", load_tokenizer(tiny_bert))
    text = (tmp_path / "m" / "kit_config.json").read_text() + (tmp_path / "m" / "config.json").read_text()
    assert tiny_bert not in text  # nothing points back at where the backbone came from


def test_half_save_is_half_the_size_and_close(tiny_bert, tmp_path):
    torch.manual_seed(0)  # the head's random weights: the same in every session
    model = TextModel.from_backbone(tiny_bert, ModelSpec()).eval()
    tok = load_tokenizer(tiny_bert)
    model.save(tmp_path / "full", tok)
    model.save(tmp_path / "half", tok, half=True)
    full = (tmp_path / "full" / "kit_model.safetensors").stat().st_size
    half = (tmp_path / "half" / "kit_model.safetensors").stat().st_size
    assert half < 0.6 * full
    loaded, _ = TextModel.load(tmp_path / "half")
    a, b = predict_model(model, tok, TEXTS, 32), predict_model(loaded, tok, TEXTS, 32)
    assert abs(a - b).max() < 1e-3


def test_options_dropout_reinit_checkpointing(tiny_bert):
    torch.manual_seed(0)
    plain = TextModel.from_backbone(tiny_bert, ModelSpec())
    assert plain.backbone.config.hidden_dropout_prob == 0.0
    assert plain.backbone.pooler is None  # unused: would break DDP
    with_dropout = TextModel.from_backbone(tiny_bert, ModelSpec(), backbone_dropout=True)
    assert with_dropout.backbone.config.hidden_dropout_prob > 0
    torch.manual_seed(1)
    reinit = TextModel.from_backbone(tiny_bert, ModelSpec(), reinit_layers=1)
    top = lambda m: encoder_layers(m.backbone)[-1].output.dense.weight  # noqa: E731
    bottom = lambda m: encoder_layers(m.backbone)[0].output.dense.weight  # noqa: E731
    assert not torch.equal(top(plain), top(reinit))
    assert torch.equal(bottom(plain), bottom(reinit))


def _saved_for_backward(model, ids) -> tuple[int, dict]:
    """Bytes of tensors autograd keeps for backward in one training forward, and the gradients."""
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    model.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(ids, torch.ones_like(ids)).sum()
    loss.backward()
    return sum(saved), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_gradient_checkpointing_keeps_less_for_backward_and_the_same_gradients(tiny_bert):
    # What checkpointing is for: the encoder layers' activations are not kept for backward (they
    # are recomputed), while the gradients stay the same.
    ids = torch.randint(5, 40, (4, 64), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    plain = TextModel.from_backbone(tiny_bert, ModelSpec())
    torch.manual_seed(0)
    ckpt = TextModel.from_backbone(tiny_bert, ModelSpec(), gradient_checkpointing=True)
    assert ckpt.backbone.is_gradient_checkpointing and not plain.backbone.is_gradient_checkpointing
    kept_plain, grads_plain = _saved_for_backward(plain, ids)
    kept_ckpt, grads_ckpt = _saved_for_backward(ckpt, ids)
    assert kept_ckpt < 0.5 * kept_plain, (kept_ckpt, kept_plain)
    assert grads_plain.keys() == grads_ckpt.keys()
    for name in grads_plain:
        assert torch.allclose(grads_plain[name], grads_ckpt[name], atol=1e-5), name


def test_layer_mix_is_a_trained_parameter(tiny_bert):
    model = TextModel.from_backbone(tiny_bert, ModelSpec(layers=2))
    assert "layer_mix.logits" in model.state_dict()
    ids = torch.tensor([[2, 5, 6, 3]])
    model(ids, torch.ones_like(ids)).sum().backward()
    assert model.layer_mix.logits.grad is not None


def test_token_weights_for_visualisation(tiny_bert):
    model = TextModel.from_backbone(tiny_bert, ModelSpec()).eval()
    ids = torch.tensor([[2, 5, 6, 3, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]])
    preds, w = model(ids, mask, return_weights=True)
    assert preds.shape == (1, 1) and w.shape == (1, 6)
    assert torch.allclose(w.sum(), torch.tensor(1.0)) and (w[0, 4:] == 0).all()
    mean = TextModel.from_backbone(tiny_bert, ModelSpec(pooling="mean"))
    with pytest.raises(ValueError, match="no token weights"):
        mean(ids, mask, return_weights=True)


def test_missing_or_incomplete_folder_is_a_clear_error(tiny_bert, tmp_path):
    with pytest.raises(FileNotFoundError, match="model folder not found"):
        TextModel.load(tmp_path / "nope")
    model = TextModel.from_backbone(tiny_bert, ModelSpec())
    model.save(tmp_path / "m", load_tokenizer(tiny_bert))
    (tmp_path / "m" / "kit_model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="missing kit_model.safetensors"):
        TextModel.load(tmp_path / "m")


def test_a_backbone_saved_in_fp16_trains_fp32_master_weights(tiny_bert, tmp_path):
    # transformers 5 loads a checkpoint in its saved dtype; fp16 weights would not train under
    # fp16 AMP (GradScaler refuses fp16 gradients) and would round every update.
    from transformers import AutoModel, AutoTokenizer

    AutoModel.from_pretrained(tiny_bert).half().save_pretrained(tmp_path / "half")
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(tmp_path / "half")
    model = TextModel.from_backbone(str(tmp_path / "half"), ModelSpec())
    assert {p.dtype for p in model.parameters()} == {torch.float32}



def test_loading_a_fold_is_one_walk_down(tiny_bert, tmp_path):
    """load_fold asks each lower module once, in order (the record, then the backbone's family,
    precision and base), never goes back to one it left or up the import graph, and reads the
    record and the family once."""
    from helpers import import_floors, utils_calls

    from utils.model import load_fold

    tok = load_tokenizer(tiny_bert)
    TextModel.from_backbone(tiny_bert, ModelSpec()).save(tmp_path / "fold0", tok, extra={"train": {"max_len": 32}})
    fold, calls = utils_calls(lambda: load_fold(tmp_path / "fold0", "cpu"))
    asked = [c.callee for c in calls if c.caller_function == "load_fold" and c.callee != "model"]
    turns = [m for i, m in enumerate(asked) if i == 0 or asked[i - 1] != m]
    floors = import_floors()
    assert turns == ["fold", "backbone"], asked
    assert [floors[m] for m in turns] == sorted((floors[m] for m in turns), reverse=True)  # downwards
    assert not [c for c in calls if floors[c.callee] > floors[c.caller]], calls  # nothing asked back up
    names = [c.function for c in calls]
    assert names.count("read_fold") == 1 and names.count("family_of") == 1, names
    assert fold.record.max_len == 32 and fold.devices == (torch.device("cpu"),) and fold.precision.name == "fp32"
    assert not fold.model.training
