"""A fold that resumes where it was killed: what the training loop carries from step to step
(`Progress`), saved with the weights, optimizer, scheduler, GradScaler, weight average and
random states to OUT/resume/fold{k}/ at each validation and every --save-every optimizer steps,
atomically, and read back by the same command run again. The fold then finishes exactly as an
uninterrupted one would (the same oof.csv on a CPU): the data order skips the micro-batches
already trained, and every random draw after the save is the one it would have been.

The folder is removed once the fold's own folder is written. What the run was given is checked
before (utils.runfolder.prepare_out: a changed argument or input is refused in one line while a fold
is unfinished), and a state that cannot go on to the uninterrupted result here (another
micro-batch or number of processes, random draws in DataLoader workers: cannot_resume) starts the
fold over, said in one line.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from .files import atomic_dir, recover, write_json

STATE, SUMMARY = "state.pt", "progress.json"


@dataclass
class Progress:
    """Where a fold's training stands."""

    step: int = 0  # optimizer steps done
    epoch: int = 0  # the phase (epoch) being trained
    batches: int = 0  # micro-batches of that epoch trained (this process's)
    next_eval: int = 0  # the step of the next validation
    loss_sum: float = 0.0  # training loss since the last validation
    loss_n: int = 0
    best: float = math.inf  # the best validation's score (the metric as a loss)
    best_state: dict | None = None  # its weights (CPU copy of what trains)
    best_pred: np.ndarray | None = None  # its validation predictions
    history: list = field(default_factory=list)
    finite_preds: bool = True  # the last validation's predictions were all finite
    seconds: float = 0.0  # training time spent before this process started
    micro_batches: int = 0  # micro-batches trained in all epochs (the collator's count of draws)
    random: dict | None = None  # a loaded state's random states, until restore_random applies them
    predict_seconds: float = 0.0  # the last validation's prediction time: the model's inference cost


def folder(out, fold: int) -> Path:
    return recover(Path(out) / "resume" / f"fold{fold}")  # a state a kill left aside mid-save: back


def pending(out) -> list:
    """Folds of a run that have a saved state (unfinished, resumable)."""
    root = Path(out) / "resume"
    for aside in root.glob(".fold[0-9]*.old") if root.is_dir() else []:
        recover(root / aside.name[1:-4])
    return sorted(int(p.name[4:]) for p in root.glob("fold[0-9]*") if (p / STATE).is_file()) if root.is_dir() else []


def _summary(out, fold: int) -> dict | None:
    """A fold's saved progress.json (step, epoch, micro-batch, processes, best), None when none."""
    path = folder(out, fold) / SUMMARY
    return json.loads(path.read_text()) if path.is_file() else None


def saved_micro_batch(out, fold: int) -> int | None:
    saved = _summary(out, fold)
    return int(saved["micro_batch"]) if saved else None


def cannot_resume(out, fold: int, micro_batch: int, processes: int, workers: int, collate) -> str:
    """Why a fold's saved state cannot go on to the result an uninterrupted fold gives here ('' when
    it can, or when none is saved): another micro-batch (an out-of-memory retry halved it) or
    another number of processes (the batches and their order differ), or a collator that draws at
    random in DataLoader workers (each worker counts its own draws from the epoch's start)."""
    saved = _summary(out, fold)
    if saved is None:
        return ""
    if int(saved["micro_batch"]) != micro_batch:
        return f"its saved state was trained at micro-batch {saved['micro_batch']}, not {micro_batch}"
    if int(saved.get("processes", 1)) != processes:
        return f"its saved state was trained by {saved.get('processes', 1)} process(es), not {processes}"
    if workers and getattr(collate, "draws", False):
        return (f"its batches draw at random in {workers} DataLoader worker(s) (--num-workers), whose draws "
                "cannot be taken up mid-way")
    return ""


def remove(out, fold: int | None = None) -> None:
    """Drop a fold's saved state (all of them: fold None)."""
    path = Path(out) / "resume" if fold is None else folder(out, fold)
    shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(OSError):  # the run's last saved fold: no empty folder left
        (Path(out) / "resume").rmdir()


def _random_states() -> dict:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def _every_process(obj) -> list:
    """obj from every process, in rank order (a list of one without data parallelism)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [obj]
    got = [None] * dist.get_world_size()
    dist.all_gather_object(got, obj)
    return got


def save(out, fold: int, progress: Progress, model, optimizer, scheduler, accelerator, average,
         micro_batch: int, trained: dict) -> None:
    """Write the fold's state (every process calls it: the random states of each are kept; the
    main process writes). `trained`: the weights that train (utils.average.trained_state)."""
    states = _every_process(_random_states())
    if accelerator.is_main_process:
        scaler = getattr(accelerator, "scaler", None)
        state = {"progress": {**asdict(progress), "random": None}, "model": trained,
                 "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                 "scaler": scaler.state_dict() if scaler is not None else None,
                 "average": {n: t.detach().cpu() for n, t in average.shadow.items()}, "random": states}
        with atomic_dir(folder(out, fold)) as tmp:
            torch.save(state, tmp / STATE)
            write_json(tmp / SUMMARY, {"step": progress.step, "epoch": progress.epoch,
                                       "micro_batch": micro_batch, "processes": accelerator.num_processes,
                                       "best": progress.best if math.isfinite(progress.best) else None})
    accelerator.wait_for_everyone()


def load(out, fold: int, model, optimizer, scheduler, accelerator, average, collate, lora: bool, micro_batch: int,
         total: int, workers: int = 0) -> Progress | None:
    """Restore a fold's saved state into the prepared model, optimizer, scheduler, scaler and
    weight average, and the collator's count of draws, said in one line; its Progress (holding
    this process's random states for restore_random), or None when none is saved (or one of
    that cannot_resume refuses, dropped)."""
    path = folder(out, fold) / STATE
    why = cannot_resume(out, fold, micro_batch, accelerator.num_processes, workers, collate)
    if why:
        accelerator.print(f"fold {fold}: {why}: the fold starts over")
        accelerator.wait_for_everyone()  # every process has read it before it goes
        if accelerator.is_main_process:
            remove(out, fold)
        return None
    if not path.is_file():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)  # the kit's own file
    except Exception as e:  # a file cut short by a full disk: the rename never happened, but say so
        raise ValueError(f"{path} cannot be read ({(str(e).splitlines() or [type(e).__name__])[0][:120]}); "
                         "delete it to start "
                         f"fold {fold} over") from None
    accelerator.unwrap_model(model).load_state_dict(state["model"], strict=not lora)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    scaler = getattr(accelerator, "scaler", None)
    if scaler is not None and state["scaler"] is not None:
        scaler.load_state_dict(state["scaler"])
    for n, t in state["average"].items():
        average.shadow[n].copy_(t)
    progress = Progress(**state["progress"])
    progress.random = state["random"][min(accelerator.process_index, len(state["random"]) - 1)]
    collate.calls = progress.micro_batches  # the next batch draws what it would have
    accelerator.print(f"fold {fold}: resumed at step {progress.step}/{total} (epoch {progress.epoch + 1}, best so "
                      f"far {progress.best:.4f} as a loss)")
    return progress


def restore_random(progress: Progress) -> None:
    """Put a loaded state's random states back, once: where the killed process stood, after the
    loader of the resumed epoch drew its own seed (torch's DataLoader takes one from the global
    generator when a pass begins)."""
    mine, progress.random = progress.random, None
    if mine is None:
        return
    torch.set_rng_state(mine["torch"])
    np.random.set_state(mine["numpy"])
    random.setstate(mine["python"])
    if mine["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(mine["cuda"])
