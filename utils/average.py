"""The weights that train, copied (a fold's best checkpoint, its saved state) and averaged
(--ema): only what trains is kept, by the kit's one rule for it (utils.backbone.trainable_names),
so a LoRA fold never copies its frozen base."""

from __future__ import annotations

import contextlib
import time

import torch

from . import backbone as bb


class WeightAverage:
    """An exponential moving average of the weights that train (--ema), kept in fp32 beside them
    (on their device: one more copy of what trains) and updated after each optimizer step. The
    decay is min(decay, (1 + step) / (10 + step)): the first steps' weights fade quickly, and 0.999
    is reached after about 9,000 steps, so a shorter run averages roughly its last step / 9 steps.
    `validated()` puts the average into the model for a validation (and so into the checkpoint
    kept from it), then the weights that train back, bit for bit, from a copy held on the CPU.
    With decay 0 (--ema off) it keeps nothing and does nothing."""

    def __init__(self, model, decay: float):
        self.decay = decay
        keep = bb.trainable_names(model) if decay else set()  # the kit's one rule for what trains
        self.params = {n: p for n, p in model.named_parameters() if n in keep}
        self.shadow = {n: p.detach().float().clone() for n, p in self.params.items()}

    @torch.no_grad()
    def update(self, step: int) -> None:
        d = min(self.decay, (1 + step) / (10 + step))
        for n, p in self.params.items():
            self.shadow[n].lerp_(p.detach().float(), 1 - d)

    @contextlib.contextmanager
    def validated(self):
        with torch.no_grad():
            held = {n: p.detach().to("cpu", copy=True) for n, p in self.params.items()}
            for n, p in self.params.items():
                p.copy_(self.shadow[n])
        try:
            yield time.perf_counter()  # when the validation started: training records how long it took
        finally:
            with torch.no_grad():
                for n, p in self.params.items():
                    p.copy_(held[n])


def trained_state(model, lora: bool) -> dict:
    """A CPU copy of the weights that train: all of them, or with LoRA only the adapters, layer
    mix, pooling and head (the frozen base, gigabytes and perhaps 4-bit, is never copied)."""
    keep = bb.trainable_names(model) if lora else None
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()
            if keep is None or k in keep}
