"""Runs side by side: one table of every run folder, sorted by CV in its competition's metric.

    python -m utils.runs                    # the runs folder (utils.env.runs_dir())
    python -m utils.runs runs/ other/runs   # run folders, or folders holding them
    python -m utils.runs --diff runs/a runs/b   # every setting two runs differ in

Light (pandas only): it reads each run's config.json and metrics.json, no model.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import pandas as pd

from .cli import HelpFormatter, cli_error
from .competition import from_settings

# The end of a model folder that names nothing (a backbone is named by the folder above it).
GENERIC = {"model", "models", "weights", "checkpoint", "final", "main"}
# Always shown; the settings in which the listed runs differ are added after them.
SHOWN = ("competition", "model", "pooling", "max_len", "epochs", "lr", "seed")
# Never compared: paths and content hashes name the inputs, not the recipe.
UNCOMPARED = {"out", "train_csv", "train_csv_sha256", "folds_csv_sha256", "model_sha256",
              "pseudo_sha256", "competition_sha256"}


def is_run(folder: Path) -> bool:
    """A run folder: utils.train's config.json is in it."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        return False
    try:
        cfg = json.loads(path.read_text())
    except ValueError:
        return False
    return isinstance(cfg, dict) and {"model", "train_csv", "folds"} <= set(cfg)


def find_runs(paths) -> tuple[list, list]:
    """(run folders, notes on what was skipped): each path is a run folder or holds some."""
    runs, notes = [], []
    for p in map(Path, paths):
        if is_run(p):
            runs.append(p)
        elif p.is_dir():
            found = sorted(c for c in p.iterdir() if c.is_dir() and is_run(c))
            skipped = sorted(c.name for c in p.iterdir() if c.is_dir() and not is_run(c)
                             and not c.name.startswith("."))
            runs += found
            if skipped:
                notes.append(f"{p}: skipped {', '.join(skipped)} (no utils.train config.json)")
        else:
            notes.append(f"{p}: not a folder, skipped")
    return runs, notes


def read_run(run: Path) -> dict:
    """One row: the run's settings, its CV and status, from config.json and metrics.json."""
    cfg = json.loads((run / "config.json").read_text())
    mpath = run / "metrics.json"
    m = json.loads(mpath.read_text()) if mpath.is_file() else {}
    done = m.get("folds_done", [])
    todo = cfg.get("only_folds") or list(range(cfg.get("folds", 0)))
    comp = (m.get("competition") or {}).get("slug") or from_settings(cfg).slug
    git = m.get("git") or {}
    version = (m.get("versions") or {}).get("kit", "")
    if git.get("commit"):
        version += f" {git['commit'][:7]}{'+dirty' if git.get('dirty') else ''}"
    stamp = mpath if mpath.is_file() else run / "config.json"
    row = {"run": run.name, **{k: v for k, v in cfg.items() if k not in UNCOMPARED}, "competition": comp,
           "metric": m.get("metric", "rmse" if "cv_rmse" in m else ""),
           "cv": m.get("cv", m.get("cv_rmse")), "folds done": f"{len(done)}/{cfg.get('folds', len(todo))}",
           "minutes": round(sum((m.get("seconds_per_fold") or {}).values()) / 60, 1),
           "date": datetime.datetime.fromtimestamp(stamp.stat().st_mtime).strftime("%Y-%m-%d %H:%M"),
           "version": version.strip()}
    row["model"] = backbone_name(str(cfg.get("model", "")))
    if not done:
        row["folds done"] += " (no fold finished)"
    elif len(done) < cfg.get("folds", 0):
        row["folds done"] += " (unfinished)"
    return row


def backbone_name(model: str) -> str:
    """A backbone's short name: a hub name's last part, a folder's name without the generic parts
    a download leaves at its end (.../all-MiniLM-L6-v2/model, the hub cache's snapshots/<hash>)."""
    parts = [p for p in Path(model).parts if p not in ("/", "")]
    while len(parts) > 1 and (parts[-1].lower() in GENERIC or parts[-1] == "snapshots"
                              or (len(parts[-1]) == 40 and all(c in "0123456789abcdef" for c in parts[-1]))):
        parts.pop()
    name = parts[-1] if parts else model
    return name[len("models--"):].replace("--", "/") if name.startswith("models--") else name


def _differing(rows: list) -> list:
    keys = sorted({k for r in rows for k in r} - set(SHOWN) - {"run", "metric", "cv", "folds done", "minutes",
                                                             "date", "version"})
    return [k for k in keys if len({json.dumps(r.get(k), sort_keys=True) for r in rows}) > 1]


def table(runs) -> pd.DataFrame:
    """Every run: the always-shown settings, those the runs differ in, CV, folds, minutes, date,
    code version; sorted by CV within each metric (best first: higher for F1 and kappa)."""
    from .metrics import METRICS

    rows = [read_run(Path(r)) for r in runs]
    cols = ["run", *SHOWN, *_differing(rows), "metric", "cv", "folds done", "minutes", "date", "version"]
    df = pd.DataFrame([{c: r.get(c) for c in cols} for r in rows], columns=cols)
    if df.empty:
        return df
    greater = df["metric"].map(lambda m: METRICS[m].greater_is_better if m in METRICS else False)
    key = df["cv"].astype(float) * greater.map({True: -1, False: 1})
    return df.assign(_key=key).sort_values(["metric", "_key"], na_position="last").drop(columns="_key") \
        .reset_index(drop=True)


def diff(a, b) -> list:
    """[(setting, value in a, value in b)] for every setting two runs differ in."""
    ca = json.loads((Path(a) / "config.json").read_text())
    cb = json.loads((Path(b) / "config.json").read_text())
    keys = sorted(set(ca) | set(cb))
    return [(k, ca.get(k), cb.get(k)) for k in keys if ca.get(k) != cb.get(k)]


def main(argv=None) -> int:
    """CLI: the table of runs, or the settings two runs differ in."""
    p = argparse.ArgumentParser(prog="python -m utils.runs", description=__doc__.split("\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("paths", nargs="*", help="run folders or folders of runs (empty: the runs folder)")
    p.add_argument("--diff", nargs=2, metavar=("RUN_A", "RUN_B"), help="list every setting two runs differ in")
    args = p.parse_args(argv)
    try:
        if args.diff:
            for run in args.diff:
                if not is_run(Path(run)):
                    raise FileNotFoundError(f"{run} is not a run folder (no utils.train config.json)")
            rows = diff(*args.diff)
            for k, va, vb in rows:
                print(f"{k}: {va!r} -> {vb!r}")
            print(f"{len(rows)} setting(s) differ" if rows else "the runs' settings are the same")
            return 0
        from .env import runs_dir

        runs, notes = find_runs(args.paths or [runs_dir()])
        for n in notes:
            print(f"note: {n}", file=sys.stderr)
        if not runs:
            raise FileNotFoundError(f"no run folder in {', '.join(map(str, args.paths or [runs_dir()]))}")
        with pd.option_context("display.width", 250, "display.max_columns", 50, "display.max_colwidth", 40):
            print(table(runs).to_string(index=False, formatters={"cv": "{:.4f}".format}))
    except (OSError, ValueError) as e:
        return cli_error(e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
