import pytest
import torch

from utils.pooling import POOLING_MODES, AttentionPooling, build_pooling

H = 16


def batch(dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(3, 7, H, generator=g).to(dtype)
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [1] * 2 + [0] * 5])
    return h, mask


@pytest.mark.parametrize("mode", POOLING_MODES)
def test_padding_values_never_change_the_output(mode):
    torch.manual_seed(0)
    pool = build_pooling(mode, H)
    h, mask = batch()
    h2 = h.clone()
    h2[mask == 0] = 1e4 * torch.randn(int((mask == 0).sum()), H)  # wild padding
    assert torch.equal(pool(h, mask), pool(h2, mask))
    # and the output is not trivially constant: real tokens do matter
    h3 = h.clone()
    h3[1, :4] += 1.0  # every real token of row 1
    assert not torch.equal(pool(h, mask)[1], pool(h3, mask)[1])


def test_max_pooling_ignores_padding_when_all_real_activations_are_negative():
    pool = build_pooling("max", H)
    h, mask = batch()
    h = -h.abs() - 1.0  # every real activation < 0; zero padding would win a naive max
    out = pool(h, mask)
    assert (out < 0).all()
    assert torch.equal(out[2], h[2, :2].max(dim=0).values)


@pytest.mark.parametrize("mode", POOLING_MODES)
def test_mean_and_attention_match_hand_computation(mode):
    pool = build_pooling(mode, H)
    h, mask = batch()
    out = pool(h, mask)
    if mode == "mean":
        assert torch.allclose(out[1], h[1, :4].mean(0), atol=1e-6)
    if mode == "cls":
        assert torch.equal(out, h[:, 0])
    if mode == "last":
        assert torch.equal(out, torch.stack([h[0, 6], h[1, 3], h[2, 1]]))
    if mode == "attention":
        _, w = pool(h, mask, return_weights=True)
        assert torch.allclose(w.sum(-1), torch.ones(3), atol=1e-6)
        assert (w[mask == 0] == 0).all()
        assert torch.allclose(out, torch.einsum("bs,bsh->bh", w, h), atol=1e-5)
    assert out.shape == (3, pool.output_dim)


@pytest.mark.parametrize("mode", POOLING_MODES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_dtypes_half_modules_and_no_nan(mode, dtype):
    pool = build_pooling(mode, H).to(dtype)  # .half() / .bfloat16() module
    h, mask = batch(dtype)
    mask[2] = 0  # a row with no real token at all
    out = pool(h, mask)
    assert out.dtype == dtype
    assert torch.isfinite(out).all()
    assert (out[2] == 0).all()


@pytest.mark.parametrize("mode", POOLING_MODES)
def test_autocast_bf16_and_fp32_module_with_half_input(mode):
    pool = build_pooling(mode, H)
    h, mask = batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = pool(h, mask)
    assert torch.isfinite(out).all()
    ref = pool(h, mask)
    assert torch.allclose(out.float(), ref, atol=0.1)
    # fp16 states into an fp32 module (a common mix at inference)
    assert torch.isfinite(pool(h.half(), mask)).all()


def test_design_snippet_overflows_in_fp16_but_ours_does_not():
    scores = torch.zeros(2, 4, dtype=torch.float16)
    with pytest.raises(RuntimeError):
        scores.masked_fill(torch.ones(2, 4, dtype=torch.bool), -1e9)
    pool = AttentionPooling(H).half()
    h, mask = batch(torch.float16)
    assert torch.isfinite(pool(h, mask)).all()


@pytest.mark.parametrize("mode", POOLING_MODES)
def test_inputs_not_modified(mode):
    pool = build_pooling(mode, H)
    h, mask = batch()
    h0, m0 = h.clone(), mask.clone()
    pool(h, mask)
    assert torch.equal(h, h0) and torch.equal(mask, m0)


def test_attention_parameters_are_in_state_dict_and_trained():
    pool = build_pooling("attention+mean", H)
    keys = set(pool.state_dict())
    assert {"attention.score.0.weight", "attention.score.2.weight", "attention.score.2.bias"} <= keys
    linear = build_pooling("attention", H, scorer="linear")
    assert set(linear.state_dict()) == {"score.weight", "score.bias"}
    h, mask = batch()
    pool(h, mask).sum().backward()
    assert pool.attention.score[0].weight.grad is not None
    assert pool.attention.score[0].weight.grad.abs().sum() > 0


def test_no_mask_means_all_tokens():
    pool = build_pooling("mean", H)
    h, _ = batch()
    assert torch.allclose(pool(h), h.mean(1), atol=1e-6)


def test_unknown_mode_lists_valid_ones():
    with pytest.raises(ValueError, match="attention, mean, max, cls, last, attention\\+mean"):
        build_pooling("median", H)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_last_token_is_the_same_token_under_left_and_right_padding(dtype):
    """The same three texts padded on the right and on the left (a decoder tokenizer's
    padding_side="left"): "last" pools the same states; an all-padding row gives zeros."""
    pool = build_pooling("last", H)
    g = torch.Generator().manual_seed(1)
    lengths = [7, 4, 2, 0]
    texts = [torch.randn(n, H, generator=g).to(dtype) for n in lengths]
    right = torch.zeros(4, 7, H, dtype=dtype)
    left = torch.full((4, 7, H), 5.0, dtype=dtype)  # padding states that must not be picked
    mask_r, mask_l = torch.zeros(4, 7, dtype=torch.long), torch.zeros(4, 7, dtype=torch.long)
    for i, t in enumerate(texts):
        n = len(t)
        right[i, :n], mask_r[i, :n] = t, 1
        if n:
            left[i, 7 - n :], mask_l[i, 7 - n :] = t, 1
    out_r, out_l = pool(right, mask_r), pool(left, mask_l)
    assert torch.equal(out_r, out_l)
    for i, t in enumerate(texts[:3]):
        assert torch.equal(out_r[i], t[-1])
    assert (out_r[3] == 0).all()
