"""Pooling layers: turn token states (B, S, H) and a padding mask (B, S) into one vector per text.

Every layer has the same `forward(hidden_states, attention_mask=None) -> (B, D)` and an `output_dim`.
Padding never changes the output, a row with no real token gives zeros (never NaN), the caller's
tensors are never modified, and fp32 / fp16 / bf16 inputs all work (sums are done in fp32).
"""

from __future__ import annotations

import torch
from torch import nn

# "last": the last real token, what a decoder (causal LM) has read the whole text by; "cls", the
# first token, is an encoder's summary and, in a decoder, a token that has seen nothing.
POOLING_MODES = ("attention", "mean", "max", "cls", "last", "attention+mean")
# No pooling: every token's state goes to the head (span tasks: an output per token, TokenStates).
NO_POOLING = "tokens"


def _mask(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Boolean (B, S) mask of real tokens; all True when no mask is given."""
    if attention_mask is None:
        return torch.ones(hidden_states.shape[:2], dtype=torch.bool, device=hidden_states.device)
    return attention_mask.to(device=hidden_states.device) != 0


def _zero_padding(hidden_states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # A copy with padded positions set to 0, so even inf/NaN padding cannot leak into a sum.
    return hidden_states.masked_fill(~mask.unsqueeze(-1), 0.0)


class AttentionPooling(nn.Module):
    """Learned attention over tokens: score each token, softmax over real tokens, weighted sum.

    scorer="mlp" is the design's Linear(H, A) -> Tanh -> Linear(A, 1) (A = H by default);
    scorer="linear" is a single Linear(H, 1).
    """

    def __init__(self, hidden_size: int, scorer: str = "mlp", attention_dim: int | None = None):
        super().__init__()
        if scorer == "mlp":
            a = attention_dim or hidden_size
            self.score = nn.Sequential(nn.Linear(hidden_size, a), nn.Tanh(), nn.Linear(a, 1))
        elif scorer == "linear":
            self.score = nn.Linear(hidden_size, 1)
        else:
            raise ValueError(f"unknown attention scorer {scorer!r}; valid: 'mlp', 'linear'")
        self.output_dim = hidden_size

    def forward(self, hidden_states, attention_mask=None, return_weights: bool = False):
        """(B, S, H), (B, S) -> (B, H); with return_weights also the (B, S) token weights."""
        mask = _mask(hidden_states, attention_mask)
        # Score in the scorer's own dtype, so fp16/bf16 states work with an fp32 head (and vice versa).
        weight_dtype = next(self.score.parameters()).dtype
        scores = self.score(hidden_states.to(weight_dtype)).squeeze(-1)  # (B, S)
        # finfo.min, not -1e9: -1e9 overflows fp16. Mask before the softmax, done in fp32.
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores.float(), dim=-1) * mask  # an all-padding row gets 0 weights
        pooled = torch.einsum("bs,bsh->bh", weights, _zero_padding(hidden_states, mask).float())
        pooled = pooled.to(hidden_states.dtype)
        return (pooled, weights) if return_weights else pooled


class MeanPooling(nn.Module):
    """Average of the real tokens' states."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.output_dim = hidden_size

    def forward(self, hidden_states, attention_mask=None):
        """(B, S, H), (B, S) -> (B, H)."""
        mask = _mask(hidden_states, attention_mask)
        total = _zero_padding(hidden_states, mask).float().sum(dim=1)  # (B, H)
        count = mask.sum(dim=1, keepdim=True).clamp(min=1).float()  # clamp: all-padding row -> 0
        return (total / count).to(hidden_states.dtype)


class MaxPooling(nn.Module):
    """Element-wise maximum over the real tokens' states."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.output_dim = hidden_size

    def forward(self, hidden_states, attention_mask=None):
        """(B, S, H), (B, S) -> (B, H)."""
        mask = _mask(hidden_states, attention_mask)
        lowest = torch.finfo(hidden_states.dtype).min
        filled = hidden_states.masked_fill(~mask.unsqueeze(-1), lowest)
        pooled = filled.max(dim=1).values
        return pooled.masked_fill(~mask.any(dim=1, keepdim=True), 0.0)


class CLSPooling(nn.Module):
    """The first token's state (CLS / <s>)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.output_dim = hidden_size

    def forward(self, hidden_states, attention_mask=None):
        """(B, S, H), (B, S) -> (B, H)."""
        mask = _mask(hidden_states, attention_mask)
        return hidden_states[:, 0].masked_fill(~mask[:, :1], 0.0)


class LastTokenPooling(nn.Module):
    """The last real token's state: a decoder's summary of the whole text. Found from the mask,
    so it is the same token whichever side the batch was padded on (left or right)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.output_dim = hidden_size

    def forward(self, hidden_states, attention_mask=None):
        """(B, S, H), (B, S) -> (B, H)."""
        mask = _mask(hidden_states, attention_mask)
        seq = mask.shape[1]
        # Index of the last True per row: S - 1 - (position of the first True from the end).
        last = seq - 1 - mask.flip(-1).int().argmax(dim=-1)  # (B,)
        pooled = hidden_states[torch.arange(mask.shape[0], device=mask.device), last]
        return pooled.masked_fill(~mask.any(dim=1, keepdim=True), 0.0)


class AttentionMeanPooling(nn.Module):
    """Attention pooling and mean pooling side by side: (B, 2H)."""

    def __init__(self, hidden_size: int, **attention_kw):
        super().__init__()
        self.attention = AttentionPooling(hidden_size, **attention_kw)
        self.mean = MeanPooling(hidden_size)
        self.output_dim = 2 * hidden_size

    def forward(self, hidden_states, attention_mask=None, return_weights: bool = False):
        """(B, S, H), (B, S) -> (B, 2H); with return_weights also the (B, S) attention weights."""
        att, weights = self.attention(hidden_states, attention_mask, return_weights=True)
        pooled = torch.cat([att, self.mean(hidden_states, attention_mask)], dim=-1)
        return (pooled, weights) if return_weights else pooled


class TokenStates(nn.Module):
    """No pooling: the token states themselves, (B, S, H) -> (B, S, H), for a head applied to every
    token (span tasks: utils.shapes.SpanRows); padding is the caller's to ignore."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.output_dim = hidden_size

    def forward(self, hidden_states, attention_mask=None):
        return hidden_states


def build_pooling(mode: str, hidden_size: int, **kw) -> nn.Module:
    """Pooling layer by name; `kw` (scorer, attention_dim) go to the attention modes only."""
    if mode == "attention":
        return AttentionPooling(hidden_size, **kw)
    if mode == "attention+mean":
        return AttentionMeanPooling(hidden_size, **kw)
    simple = {"mean": MeanPooling, "max": MaxPooling, "cls": CLSPooling, "last": LastTokenPooling,
              NO_POOLING: TokenStates}
    if mode not in simple:
        raise ValueError(f"unknown pooling mode {mode!r}; valid modes: {', '.join(POOLING_MODES)}, {NO_POOLING}")
    return simple[mode](hidden_size)
