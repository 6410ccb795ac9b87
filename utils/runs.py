"""A run folder, in one place: its files, written and read here and nowhere else, its identity,
and the table of runs side by side.

    python -m utils.runs                    # ./runs (relative to the working folder, as --out is)
    python -m utils.runs runs/ other/runs   # run folders, or folders holding them
    python -m utils.runs --diff runs/a runs/b   # every setting two runs differ in

A run folder (utils.train writes it; a baseline from the EDA is one too, with its OOF only):

    config.json    the settings that define the run (resuming compares them)
    folds.csv      id,fold: the fold of every training row
    fold{k}/       a finished fold: the model's own files (utils.model), oof.csv, history.json
    oof.csv        every finished fold's out-of-fold rows: id, the truth, the predictions, fold
    metrics.json   the competition's metric per fold and over the folds, and how to reproduce it

A run's identity is a short hash of what defines it: its config, its folds, and its finished
folds' model files (weights, the saved config and tokenizer); the training data and the backbone
count through the content hashes in its config. A copy of the folder keeps it; a fold trained
again, or other data in the same paths, changes it. blend.json records its members' identities.

Light (pandas only): nothing here loads a model.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .cli import HelpFormatter, cli_error, first_paragraph
from .competition import Competition, from_settings
from .data import DataError
from .files import BACKBONE_CONFIG, OOF, file_sha256, fold_dirs, read_oof_csv, write_csv, write_json
from .fold import first_fold
from .metrics import METRICS as REGISTERED_METRICS
from .objective import Objective, objective_of

CONFIG = "config.json"
FOLDS = "folds.csv"
METRICS = "metrics.json"
HISTORY = "history.json"
BLEND = "blend.json"  # utils.ensemble's output, beside the runs it blends
RUN_FILES = (FOLDS, OOF, METRICS, CONFIG)  # a run's own summaries, beside its fold folders
FOLD_SUMMARIES = (OOF, HISTORY)  # a fold folder's files that are not the model's


# ----------------------------------------------------------------------------- the folder


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot be read as JSON ({type(e).__name__}: {e})") from None


def read_config(run) -> dict:
    """config.json: the settings that define the run."""
    return _read_json(Path(run) / CONFIG)


def has_config(run) -> bool:
    return (Path(run) / CONFIG).is_file()


def write_config(run, settings: dict) -> None:
    write_json(Path(run) / CONFIG, settings)


def has_folds(run) -> bool:
    return (Path(run) / FOLDS).is_file()


def read_folds(run) -> pd.Series:
    """folds.csv as a Series: fold per id (ids as strings)."""
    return pd.read_csv(Path(run) / FOLDS, dtype={"id": str}).set_index("id")["fold"]


def folds_path(run) -> Path:
    """folds.csv's path (what --folds-csv takes to train another run on the same folds)."""
    return Path(run) / FOLDS


def write_folds(run, ids, folds) -> None:
    write_csv(Path(run) / FOLDS, pd.DataFrame({"id": np.asarray(ids), "fold": np.asarray(folds)}))


def write_fold_summaries(folder, oof: pd.DataFrame, history: dict) -> None:
    """A fold folder's OOF rows and history (the model's own files are utils.model's)."""
    write_csv(Path(folder) / OOF, oof)
    write_json(Path(folder) / HISTORY, history)


def read_history(run, fold: int) -> dict:
    """fold{k}/history.json: the fold's validations, steps, seconds, micro-batch."""
    return _read_json(Path(run) / f"fold{fold}" / HISTORY)


def finished_folds(run) -> list:
    """Fold numbers of the run's finished folds (none: [])."""
    return [int(p.name[4:]) for p in fold_dirs(run, required=False)]


def collect_oof(run) -> pd.DataFrame:
    """The finished folds' OOF rows, concatenated and written as the run's oof.csv."""
    oof = pd.concat([read_oof_csv(Path(run) / f"fold{k}" / OOF) for k in finished_folds(run)])
    write_oof(run, oof)
    return oof


def write_oof(run, oof: pd.DataFrame) -> None:
    """A run's oof.csv (a baseline's: id, the truth, fold, the predictions)."""
    write_csv(Path(run) / OOF, oof)


def has_oof(run) -> bool:
    return (Path(run) / OOF).is_file()


def remove_results(run) -> None:
    """Delete a run's finished folds, saved fold states and summaries (its config stays): a run
    started over."""
    import shutil

    run = Path(run)
    for p in [*run.glob("fold[0-9]*"), run / OOF, run / METRICS, run / FOLDS, run / "resume"]:
        shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)


# Keys of metrics.json written before it had one vocabulary: (cv key, per-fold key, metric).
OLD_KEYS = (("cv_rmse", "fold_rmse", "rmse"), ("cv_log_loss", "fold_log_loss", "log_loss"))
# What the keys the kit reads back must hold (JSON names them: list, object, string, number).
SHAPES = {"folds_done": (list, "a list"), "fold_score": (dict, "an object"), "seconds_per_fold": (dict, "an object"),
          "metric": (str, "a string"), "git": (dict, "an object"), "versions": (dict, "an object"),
          "cv": ((int, float, type(None)), "a number")}


def read_metrics(run) -> dict:
    """metrics.json in one vocabulary: `metric`, `cv`, `fold_score` ({fold: score}, int keys), and
    `per_metric` for the loss's own figures; a run saved before it had them is read through its
    older keys (cv_rmse, cv_log_loss). {} when the run has none yet; one line naming the file and
    the key when it is not metrics.json's shape."""
    path = Path(run) / METRICS
    if not path.is_file():
        return {}
    m = _read_json(path)
    if not isinstance(m, dict):
        raise ValueError(f"{path}: expected an object of metrics, found a {type(m).__name__} "
                         f"({json.dumps(m)[:40]}); train the run again to rewrite it")
    if "cv" not in m:
        for cv, fold, name in OLD_KEYS:
            if cv in m:
                m = {**m, "metric": m.get("metric", name), "cv": m[cv], "fold_score": m.get(fold, {})}
                break
    for key, (kind, what) in SHAPES.items():
        if key in m and (not isinstance(m[key], kind) or isinstance(m[key], bool)):
            raise ValueError(f"{path}: {key!r} should be {what}, found {json.dumps(m[key])[:40]}")
    if "fold_score" in m:
        try:
            m["fold_score"] = {int(k): v for k, v in m["fold_score"].items()}
        except ValueError:
            raise ValueError(f"{path}: 'fold_score' should map fold numbers to scores, found "
                             f"{json.dumps(m['fold_score'])[:40]}") from None
    return m


def write_metrics(run, metrics: dict) -> None:
    write_json(Path(run) / METRICS, metrics)


def has_metrics(run) -> bool:
    return (Path(run) / METRICS).is_file()


def run_competition(run, target: str = "target") -> Competition:
    """The competition a run was trained for (the one place that says): metrics.json's record,
    else its first finished fold's (utils.fold: a run copied without its summaries, such as a
    models dataset), else the one its config's column flags describe (a run saved before runs
    recorded it); a folder with none of them (a baseline's OOF): a regression of `target`."""
    recorded = read_metrics(run).get("competition")
    if recorded:
        return Competition.from_dict(recorded, str(Path(run) / METRICS))
    if fold_dirs(run, required=False):
        comp = first_fold(run).competition
        if comp is not None:
            return comp
    settings = read_config(run) if has_config(run) else {"target_cols": [target]}
    return from_settings(settings)


# ----------------------------------------------------------------------------- out-of-fold rows


@dataclass(frozen=True)
class Oof:
    """A run's out-of-fold rows and what its columns mean (from the run's competition, never
    guessed from their names)."""

    frame: pd.DataFrame  # id, fold, the truth columns, the prediction columns
    objective: Objective
    truth: tuple  # the truth columns (targets, or the label column)
    preds: tuple  # the prediction columns, one per output
    outputs: tuple  # the outputs' names: targets, or class labels
    metric: str  # the competition's metric

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(truth, predictions (N, outputs)) as the metrics take them."""
        return self.objective.outputs.oof_arrays(self.frame, list(self.truth))


def read_oof(run, target: str = "target") -> Oof:
    """The run's oof.csv, its columns named by the run's competition (`target`: the target of a
    folder that records none); one line naming the file when a column is missing."""
    run = Path(run)
    if not has_oof(run):
        raise FileNotFoundError(f"{run} has no {OOF}: not a run folder with a finished fold")
    frame = read_oof_csv(run / OOF)
    comp = run_competition(run, target)
    objective = objective_of(comp)
    truth = tuple(comp.target_cols[:1] if objective.classes else comp.target_cols)
    labels = objective.outputs.oof_labels(frame.columns) if objective.classes else None
    preds = tuple(objective.outputs.prediction_columns(truth, labels))
    missing = [c for c in ("id", "fold", *truth, *preds) if c not in frame.columns]
    if missing or (objective.classes and not labels):
        missing = missing or ["prob_<label>"]
        raise ValueError(f"{run / OOF} has no column {', '.join(map(repr, missing))} (found: "
                         f"{', '.join(map(str, frame.columns))}); it does not hold {comp.slug}'s outputs")
    outputs = tuple(labels) if objective.classes else truth
    return Oof(frame, objective, truth, preds, outputs, comp.metric_name)


# ----------------------------------------------------------------------------- identity


def identity(run) -> str:
    """A short hash of what defines the run: config.json (parsed, so formatting does not count),
    folds.csv, and every finished fold's model files by content; a folder with no fold (a
    baseline's OOF) counts its oof.csv instead."""
    run = Path(run)
    digest = hashlib.sha256()
    if has_config(run):
        digest.update(json.dumps(read_config(run), sort_keys=True).encode())
    if has_folds(run):
        digest.update(file_sha256(run / FOLDS).encode())
    folders = fold_dirs(run, required=False)
    for folder in folders:
        for f in sorted(p for p in folder.rglob("*") if p.is_file()):
            # Hidden files (.DS_Store, .ipynb_checkpoints) are not the model's; the bundle skips them too.
            if f.name not in FOLD_SUMMARIES and not any(part.startswith(".") for part in f.relative_to(folder).parts):
                digest.update(f"{folder.name}/{f.relative_to(folder)}\0{file_sha256(f)}\0".encode())
    if not folders and has_oof(run):
        digest.update(file_sha256(run / OOF).encode())
    return digest.hexdigest()[:12]


def check_same_competition(runs, target: str = "target") -> Competition:
    """The runs' common competition; one line naming the run whose competition differs (runs of
    two competitions never average or blend). `target`: as run_competition() takes it."""
    first = run_competition(runs[0], target)
    for run in runs[1:]:
        comp = run_competition(run, target)
        if comp != first:
            mine, theirs = first.to_dict(), comp.to_dict()
            fields = [k for k in mine if mine[k] != theirs[k]]
            short = lambda v: s if len(s := json.dumps(v)) <= 40 else s[:37] + "..."  # noqa: E731
            what = (f"{comp.slug}" if comp.slug != first.slug else f"another description of {comp.slug} ("
                    + "; ".join(f"{k} {short(theirs[k])} vs {short(mine[k])}" for k in fields[:2])
                    + (f"; {len(fields) - 2} more fields differ" if len(fields) > 2 else "") + ")")
            raise ValueError(f"{run} was trained for {what} but {runs[0]} for {first.slug}: only "
                             "runs of the same competition average or blend")
    return first


# ----------------------------------------------------------------------------- runs that predict together


def run_spec(run) -> dict:
    """The model spec a run's first finished fold saved (task, num_outputs, target_names, ...):
    read from disk (utils.fold), no model loaded, so checks on it come before any slow work."""
    try:
        return asdict(first_fold(run).spec)
    except ValueError as e:
        raise DataError(str(e)) from None


def check_runs_agree(runs) -> dict:
    """The runs' common spec; an error naming the run whose task or outputs differ (a blend of a
    classifier and a regressor, or of runs with other targets, has no meaning)."""
    first = run_spec(runs[0])
    for run in runs[1:]:
        spec = run_spec(run)
        for key in ("task", "target_names"):
            if spec.get(key) != first.get(key):
                raise DataError(f"{run} predicts {key} {spec.get(key)!r} but {runs[0]} predicts "
                                f"{first.get(key)!r}: only runs of the same task and targets blend")
    return first


def check_runs(runs) -> dict:
    """The runs' common spec, from saved files only (before any model loads): each run has a
    finished fold, all were trained for one competition (utils.runs.check_same_competition) and
    predict the same outputs (check_runs_agree); one line naming the run that differs."""
    for run in runs:
        fold_dirs(run)
    check_same_competition(runs)
    return check_runs_agree(runs)


# ----------------------------------------------------------------------------- the table

# The end of a model folder that names nothing (a backbone is named by the folder above it).
GENERIC = {"model", "models", "weights", "checkpoint", "final", "main"}
# A Kaggle Model's folders: /kaggle/input/<model>/<framework>/<variation>/<version>.
KAGGLE_FRAMEWORKS = {"transformers", "pytorch", "keras", "tensorflow", "tensorflow2", "jax", "flax", "other"}
# Always shown; the settings in which the listed runs differ are added after them. `family` is the
# backbone's (llama, deberta-v2, ...), `tuning` how it trains: full, or LoRA's rank and scale (shown
# when a listed run has adapters; it then stands for the LoRA settings it summarises).
SHOWN = ("competition", "model", "family", "tuning", "pooling", "max_len", "epochs", "lr", "seed")
SUMMARISED = {"tuning": ("lora_r", "lora_alpha", "load_in_4bit")}
# What a run has done, after its settings.
STATUS = ("metric", "cv", "folds done", "minutes", "ms per row", "date", "version", "identity")
# Shown when a listed run has them: a distilled student's teachers (their folder names).
SOMETIMES = ("teachers",)
# Never compared: paths and content hashes name the inputs, not the recipe.
UNCOMPARED = {"out", "train_csv", "train_csv_sha256", "folds_csv_sha256", "model_sha256",
              "pseudo_sha256", "competition_sha256"}


def is_run(folder: Path) -> bool:
    """A run folder: utils.train's config.json is in it."""
    if not has_config(folder):
        return False
    try:
        cfg = read_config(folder)
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
            notes.append(f"{p}: {'not a folder' if p.exists() else 'no such folder'}, skipped")
    return runs, notes


def metrics_problem(run) -> str:
    """Why a run's metrics.json cannot be read ("" when it can, or when there is none)."""
    try:
        read_metrics(run)
    except ValueError as e:
        return str(e)
    return ""


def read_run(run: Path) -> dict:
    """One row: the run's settings, its CV and status, from config.json and metrics.json (a
    malformed one: the row has its settings only, and says so)."""
    cfg, problem = read_config(run), metrics_problem(run)
    m = {} if problem else read_metrics(run)
    done = m.get("folds_done", [])
    todo = cfg.get("only_folds") or list(range(cfg.get("folds", 0)))
    comp = from_settings(cfg).slug if problem else run_competition(run).slug
    git = m.get("git") or {}
    version = (m.get("versions") or {}).get("kit", "")
    if git.get("commit"):
        version += f" {git['commit'][:7]}{'+dirty' if git.get('dirty') else ''}"
    stamp = run / (METRICS if has_metrics(run) else CONFIG)
    row = {"run": run.name, **{k: v for k, v in cfg.items() if k not in UNCOMPARED}, "competition": comp,
           "metric": m.get("metric", ""), "cv": m.get("cv"), "identity": identity(run),
           "folds done": f"{len(done)}/{cfg.get('folds', len(todo))}",
           "minutes": round(sum((m.get("seconds_per_fold") or {}).values()) / 60, 1),
           "date": datetime.datetime.fromtimestamp(stamp.stat().st_mtime).strftime("%Y-%m-%d %H:%M"),
           "version": version.strip()}
    row["ms per row"] = predict_cost(run, done)
    row["teachers"] = ", ".join(t.get("run", "?") for t in m.get("teachers") or [])
    row["model"] = backbone_name(str(cfg.get("model", "")))
    row["family"], row["tuning"] = family(run), tuning(cfg)
    if problem:
        row["folds done"] = f"? ({METRICS} unreadable)"
    elif not done:
        row["folds done"] += " (no fold finished)"
    elif len(done) < cfg.get("folds", 0):
        row["folds done"] += " (unfinished)"
    return row


def family(run) -> str:
    """The run's backbone family (its config's model_type: llama, qwen2, deberta-v2, ...): from
    the first finished fold's saved backbone config, else the --model folder's; '' when neither
    is on this machine (JSON only: nothing is loaded)."""
    run = Path(run)
    folders = fold_dirs(run, required=False)
    places = [folders[0] / BACKBONE_CONFIG] if folders else []
    model = read_config(run).get("model") if has_config(run) else None
    if model:
        places.append(Path(str(model)).expanduser() / BACKBONE_CONFIG)
    for path in places:
        try:
            return str(json.loads(path.read_text()).get("model_type") or "")
        except (OSError, ValueError, AttributeError):
            continue
    return ""


def tuning(cfg: dict) -> str:
    """How a run trains its backbone, from its settings: "full" (every weight), or its adapters'
    rank and scale, "LoRA r=8 alpha=16" ("QLoRA ..." on a 4-bit base)."""
    r = cfg.get("lora_r") or 0
    if not r:
        return "full"
    alpha = cfg.get("lora_alpha") or 2 * r  # 0: 2 x rank, as training reads it
    return f"{'QLoRA' if cfg.get('load_in_4bit') else 'LoRA'} r={r} alpha={alpha:g}"


def backbone_name(model: str) -> str:
    """A backbone's short name: a hub name's last part, a folder's name without the generic parts
    a download leaves at its end (.../all-MiniLM-L6-v2/model, the hub cache's snapshots/<hash>);
    a Kaggle Model's <model>/<variation> (.../gemma-2/transformers/gemma-2-9b-it/2)."""
    parts = [p for p in Path(model).parts if p not in ("/", "")]
    if len(parts) >= 4 and parts[-1].isdigit() and parts[-3].lower() in KAGGLE_FRAMEWORKS:
        return f"{parts[-4]}/{parts[-2]}"
    while len(parts) > 1 and (parts[-1].lower() in GENERIC or parts[-1] == "snapshots"
                              or (len(parts[-1]) == 40 and all(c in "0123456789abcdef" for c in parts[-1]))):
        parts.pop()
    name = parts[-1] if parts else model
    return name[len("models--"):].replace("--", "/") if name.startswith("models--") else name


def predict_cost(run: Path, done) -> float | None:
    """Milliseconds per validation row of the finished folds' last validation (the model's
    inference cost where it trained, at its batch size); None where no history records it."""
    costs = []
    for k in done:
        try:
            h = read_history(run, k)
        except (OSError, ValueError):
            continue
        if h.get("predict_seconds") and h.get("n_valid"):
            costs.append(1000 * h["predict_seconds"] / h["n_valid"])
    return round(float(np.mean(costs)), 2) if costs else None


def _differing(rows: list, summarised=()) -> list:
    keys = sorted({k for r in rows for k in r} - set(SHOWN) - set(STATUS) - set(SOMETIMES) - {"run"}
                  - set(summarised))
    return [k for k in keys if len({json.dumps(r.get(k), sort_keys=True) for r in rows}) > 1]


def table(runs) -> pd.DataFrame:
    """Every run: the always-shown settings (`tuning` only when a run has LoRA adapters), those
    the runs differ in, CV, folds, minutes, date, code version; sorted by CV within each metric
    (best first: higher for F1 and kappa)."""
    rows = [read_run(Path(r)) for r in runs]
    shown = [c for c in SHOWN if c != "tuning" or any(r["tuning"] != "full" for r in rows)]
    summarised = [k for c in shown for k in SUMMARISED.get(c, ())]
    sometimes = [c for c in SOMETIMES if any(r.get(c) for r in rows)]
    cols = ["run", *shown, *_differing(rows, summarised), *sometimes, *STATUS]
    df = pd.DataFrame([{c: r.get(c) for c in cols} for r in rows], columns=cols)
    if df.empty:
        return df
    greater = df["metric"].map(lambda m: REGISTERED_METRICS[m].greater_is_better if m in REGISTERED_METRICS else False)
    key = df["cv"].astype(float) * greater.map({True: -1, False: 1})
    return df.assign(_key=key).sort_values(["metric", "_key"], na_position="last").drop(columns="_key") \
        .reset_index(drop=True)


def diff(a, b) -> list:
    """[(setting, value in a, value in b)] for every setting two runs differ in."""
    ca, cb = read_config(a), read_config(b)
    keys = sorted(set(ca) | set(cb))
    return [(k, ca.get(k), cb.get(k)) for k in keys if ca.get(k) != cb.get(k)]


def main(argv=None) -> int:
    """CLI: the table of runs, or the settings two runs differ in."""
    p = argparse.ArgumentParser(prog="python -m utils.runs", description=first_paragraph(__doc__),
                                formatter_class=HelpFormatter)
    p.add_argument("paths", nargs="*", help="run folders or folders of runs (empty: ./runs, in the working "
                   "folder, as utils.train's --out is)")
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
        paths = args.paths or ["runs"]  # relative to the working folder, as --out is
        runs, notes = find_runs(paths)
        notes += [f"listed without its metrics: {problem}" for problem in map(metrics_problem, runs) if problem]
        for n in notes:
            print(f"note: {n}", file=sys.stderr)
        if not runs:
            where = ", ".join(f"{Path(p).resolve()}{'' if Path(p).is_dir() else ' (missing)'}" for p in paths)
            raise FileNotFoundError(f"no run folder in {where}")
        with pd.option_context("display.width", 250, "display.max_columns", 50, "display.max_colwidth", 40):
            print(table(runs).to_string(index=False, formatters={"cv": "{:.4f}".format}))
    except (OSError, ValueError) as e:
        return cli_error(e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
