"""The accelerator a run trains with, and its trackers (--log-with): accelerate's Accelerator for a
precision and gradient accumulation (one process, or each process of `accelerate launch`), and the
trackers that log a run's curves under OUT/logs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from . import backbone as bb
from .competition import Competition
from .config import TrainConfig, identity
from .env import detect


def start_trackers(accelerator, cfg: TrainConfig, comp: Competition) -> None:
    """accelerate's trackers for --log-with, the run's settings as their config (scalars)."""
    if not cfg.log_with:
        return
    if "wandb" in cfg.log_with.split(","):
        if detect() == "kaggle":  # no network in a submission kernel: logs stay in the run
            os.environ.setdefault("WANDB_MODE", "offline")
    config = {k: v if isinstance(v, (int, float, str, bool)) else json.dumps(v)
              for k, v in identity(cfg, comp).items()}
    accelerator.init_trackers(Path(cfg.out).name, config=config)


def check_trackers(log_with: str) -> list:
    """--log-with's tracker names; one line naming a tracker accelerate does not know, or one whose
    package is not installed (accelerate itself would only warn, then train with no logs)."""
    from accelerate.tracking import LOGGER_TYPE_TO_CLASS, get_available_trackers
    from accelerate.utils import LoggerType

    installed = {getattr(t, "value", t) for t in get_available_trackers()}
    names = [n.strip() for n in log_with.split(",") if n.strip()]
    for name in names:
        if name == "all":
            if not installed:
                raise ValueError("--log-with all: no tracker's package is installed (e.g. pip install "
                                 "tensorboard); install one, or leave --log-with out")
        elif name not in LOGGER_TYPE_TO_CLASS:
            raise ValueError(f"--log-with {name}: not a tracker accelerate knows; choose from "
                             f"{', '.join(LOGGER_TYPE_TO_CLASS)}")
        elif name in LoggerType.list() and name not in installed:  # one registered by the user brings its own
            raise ValueError(f"--log-with {name}: its package is not installed; pip install "
                             f"{name.replace('_', '-')}, or leave --log-with out")
    return names


def accelerator_for(precision: bb.Precision, grad_accum: int = 1, log_with: str = "", project_dir=None):
    """An Accelerator for a precision (utils.backbone.precision_for's; training here, masked-LM
    pretraining too)."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    mp = precision.accelerate
    trackers = dict(log_with=check_trackers(log_with), project_dir=str(project_dir)) if log_with else {}
    if AcceleratorState._shared_state and AcceleratorState().mixed_precision != mp:
        # A notebook or test that trains twice with different precisions in one process:
        # accelerate's state is a process-wide singleton, so it is reset between runs.
        AcceleratorState._reset_state(reset_partial_state=False)
    # cpu=True without CUDA: processes started by torchrun / `accelerate launch --multi_gpu` /
    # notebook_launcher then join one gloo group (MULTI_CPU); with cpu=False each would train
    # the whole data alone and all of them would write OUT.
    cpu = not torch.cuda.is_available()
    accelerator = Accelerator(mixed_precision=mp, gradient_accumulation_steps=grad_accum, cpu=cpu, **trackers)
    # The kit's batch samplers have no batch size (batches vary in length) and deal_evenly()
    # already gives every process the same number of batches. accelerate before 1.14 refuses
    # such a sampler unless even_batches is off (a constructor argument in some releases, a
    # DataLoaderConfiguration in others; the attribute works in all of them).
    accelerator.even_batches = False
    return accelerator
