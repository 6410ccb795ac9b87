"""A fold folder's record, `kit_config.json`, written and read here and nowhere else.

A fold folder (utils.model writes it) is self-contained: its weights, the backbone's config, the
tokenizer, and this record: the model spec that rebuilds the model around the backbone, the run's
training settings, the competition it was trained for, a LoRA fold's base model, the training
rows' mean output (what a blank text is predicted as), what new rows are checked against (`seen`:
a span task's conditions, utils.shapes), its fold number and best score. Every
module that needs one of those asks `read_fold`.

Light (no torch): the record is read before any model loads, so checks on it come first.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .competition import Competition, from_settings
from .files import KIT_CONFIG, fold_dirs, write_json
from .objective import REGRESSION


@dataclass(frozen=True)
class ModelSpec:
    """What rebuilds a TextModel around a backbone config (kit_config.json's "model")."""

    pooling: str = "attention"  # one of pooling.POOLING_MODES
    attention_scorer: str = "mlp"  # "mlp" (Linear-Tanh-Linear) or "linear"
    layers: int = 1  # pool a learned softmax-weighted mix of the last N hidden layers
    num_outputs: int = 1  # regression targets, or classes for classification
    task: str = REGRESSION.name  # what the head is trained as (utils.objective: regression, classification)
    head_dropout: float = 0.0
    target_names: tuple = ("target",)  # regression targets, or class labels
    lora_r: int = 0  # LoRA rank (0: the whole backbone trains)
    lora_alpha: float = 0.0  # LoRA's scale numerator (0: 2 x rank)
    lora_dropout: float = 0.0
    lora_targets: tuple = ()  # modules LoRA adapts (empty: the family's, utils.backbone.FAMILIES)
    load_in_4bit: bool = False  # the frozen base in 4-bit NF4 (QLoRA; CUDA and bitsandbytes)

    @classmethod
    def from_dict(cls, d: dict) -> ModelSpec:
        return cls(**{**d, "target_names": tuple(d["target_names"]),
                      "lora_targets": tuple(d.get("lora_targets", ()))})


@dataclass(frozen=True)
class FoldRecord:
    """A fold folder's kit_config.json, typed."""

    folder: Path
    spec: ModelSpec
    train: dict = field(default_factory=dict)  # the run's training settings (its identity), as recorded
    competition: Competition | None = None  # None only for a bare model folder (no run around it)
    base: dict | None = None  # a LoRA fold's base model: hub id or folder, its files' sha256
    target_mean: list | None = None  # the training rows' mean output; None in folds saved before it
    fold: int | None = None
    score: float | None = None  # the best validation score (the metric as a loss)
    saved: dict = field(default_factory=dict, repr=False)  # the record as kit_config.json holds it

    @property
    def max_len(self) -> int:
        """Tokens per text the fold was trained with (256 in a record without it)."""
        return int(self.train.get("max_len", 256))

    @property
    def fit(self) -> str:
        """How a longer text was fitted to max_len ("head" before runs recorded it)."""
        return self.train.get("fit") or "head"

    @property
    def lora(self) -> bool:
        return self.spec.lora_r > 0

    def run_record(self) -> dict:
        """Everything the record holds besides the model spec, in its order: what a copy of the
        fold (utils.bundle's fp16 export) writes again beside the spec."""
        return {k: v for k, v in self.saved.items() if k != "model"}


def write_record(folder, spec: ModelSpec, extra: dict | None = None) -> None:
    """Write a fold folder's kit_config.json: the spec and what the run adds (`extra`: train,
    competition, base, target_mean, fold, score)."""
    write_json(Path(folder) / KIT_CONFIG, {"model": asdict(spec), **dict(extra or {})})


def read_fold(folder) -> FoldRecord:
    """A fold folder's record; one line naming the file when it is missing or not a kit model's."""
    path = Path(folder) / KIT_CONFIG
    try:
        saved = json.loads(path.read_text())
        spec = ModelSpec.from_dict(saved["model"])
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: file not found (not a kit model folder)") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is corrupt or not a kit model's record ({e!r})") from None
    comp = None
    if "competition" in saved:
        comp = Competition.from_dict(saved["competition"], str(path))
    elif "train" in saved:  # a fold saved before runs recorded their competition
        comp = from_settings(saved["train"])
    return FoldRecord(folder=Path(folder), spec=spec, train=saved.get("train") or {}, competition=comp,
                      base=saved.get("base"), target_mean=saved.get("target_mean"), fold=saved.get("fold"),
                      score=saved.get("score"), saved=saved)


def first_fold(run) -> FoldRecord:
    """The record of a run's first finished fold (an error naming the run when it has none)."""
    return read_fold(fold_dirs(run)[0])
