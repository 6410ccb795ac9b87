"""What a run folder records before its folds train: that OUT can hold this run (the same
arguments and inputs as the run it holds, else refused in one line), its folds, and how to
reproduce it (the command, the code's git commit, the hardware)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from . import resume, runs
from .competition import Competition
from .config import CONTENT_KEYS, TrainConfig, differences, identity, to_command
from .data import read_folds
from .tables import competition_folds


class RunError(RuntimeError):
    """A run folder that cannot be resumed with these arguments."""


def _git() -> dict:
    """The kit's git commit and whether its tree had changes, when it runs from a checkout."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return {}
    try:
        run = lambda *a: subprocess.run(["git", "-C", str(root), *a], capture_output=True, text=True,  # noqa: E731
                                        timeout=10, check=True).stdout.strip()
        return {"commit": run("rev-parse", "HEAD"), "dirty": bool(run("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError):
        return {}


def _hardware() -> dict:
    """CPU model and count, GPU names (no host names)."""
    import os
    import platform

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {"cpu": cpu, "cpu_count": os.cpu_count(), "gpus": gpus, "gpu_count": len(gpus)}


def provenance(cfg: TrainConfig, comp: Competition) -> dict:
    """How to reproduce a run: the command that makes its config (and the command line it was
    started with, from a shell), the code's git commit, the hardware."""
    out = {"command": to_command(cfg, comp)}
    if sys.argv and Path(sys.argv[0]).resolve() == Path(__file__).with_name("train.py").resolve():  # -m utils.train
        out["argv"] = ["python", "-m", "utils.train", *sys.argv[1:]]
    return {**out, "git": _git(), "hardware": _hardware()}


def prepare_out(cfg: TrainConfig, comp: Competition, out: Path) -> None:
    """Check that OUT can hold this run (same arguments, or --overwrite), and record them."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in [*out.glob(".*.tmp"), *out.glob("resume/.*.tmp")]:  # left by a killed process; never read
        shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink()
    if runs.has_config(out):
        saved, current = runs.read_config(out), identity(cfg, comp)
        defaults = json.loads(json.dumps({f.name: f.default for f in dataclasses.fields(TrainConfig)}))
        defaults["fit"] = "head"  # what every run did before --fit existed
        for key in list(current):
            # A run saved before a setting existed (or before its inputs were hashed): the
            # setting's default is what it ran with; its paths decide for the inputs.
            if key not in saved and (key in CONTENT_KEYS or current[key] == defaults.get(key)):
                current.pop(key)
        diff = differences(saved, current)
        # No finished or saved fold (e.g. the last command had a typo in --model): nothing to lose, so
        # the corrected command simply starts over instead of asking for --overwrite.
        if diff and not cfg.overwrite and (runs.finished_folds(out) or resume.pending(out)):
            raise RunError(
                f"{out} holds a run made with different arguments or inputs ({diff}); "
                "use another --out, the same arguments and inputs, or --overwrite"
            )
        if diff:
            runs.remove_results(out)
    runs.write_config(out, identity(cfg, comp))


def assign_folds(cfg: TrainConfig, comp: Competition, df: pd.DataFrame, out: Path) -> np.ndarray:
    """Folds from --folds-csv, else from OUT/folds.csv (resume), else as the competition makes
    them: its folds file (beside the train file), grouped by its column, or stratified."""
    ids = df[comp.id_col]
    source = cfg.folds_csv or (runs.folds_path(out) if runs.has_folds(out) else "")
    if not source and comp.folds == "file":
        source = Path(cfg.train_csv).parent / comp.folds_file
    if source:
        return read_folds(source, ids, cfg.folds)
    return competition_folds(comp, df, cfg.folds, cfg.fold_seed)
