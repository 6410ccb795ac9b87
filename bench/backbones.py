"""The second backbone: all-mpnet-base-v2 (MPNet, 12 layers, hidden 768, 110M parameters) beside
all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384, 22M), both offline (utils.models).

    python bench/backbones.py steps            # one training step of each, same batch, same command
    python bench/backbones.py commonlit --model all-mpnet-base-v2 --pooling attention --out runs/cl-mpnet-attention
    python bench/backbones.py commonlit-blend --runs RUN RUN ...   # equal and fitted blends of fold 0
    python bench/backbones.py --table          # the saved results

`commonlit`: fold 0 of 5 of CommonLit with bench/quality.py's recipe (3 epochs, batch 16, max_len
256, lr 5e-5 / 1e-3, a validation every 40 steps) on the backbone given; its run folder `--out`
is saved at each validation and every `--save-every` steps, so the same command again resumes a
fold that a session's end killed. `commonlit-blend`: the fold-0 runs averaged with equal weights
(nothing fitted) and blended with weights fitted on one half of the validation rows for the other
(utils.ensemble's honest blend needs two folds: on one fold the halves stand in for them).

`steps`: the kit's model (attention pooling + head) on each backbone, AdamW, one optimizer step
of a batch of real CommonLit excerpts (16 x 256 tokens, as bench/quality.py trains) and of a
Science Exam batch (8 questions x 5 options x 128 tokens, as bench/ranking.py science-kit does);
median seconds of STEPS steps after one warm-up, on this machine's CPU threads. The quality arms
are bench/quality.py --model, bench/ranking.py --model and bench/patent.py --model; their
figures land in their own result files, and this file's table gathers the step times.
Results land in bench/results/backbones.json.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "backbones.json"
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

BACKBONES = ("sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers/all-mpnet-base-v2")
SHAPES = {"commonlit (16 x 256)": (16, 256), "science exam (8 x 5 options x 128)": (40, 128)}


def step_seconds(name: str, batch: int, length: int, steps: int, texts: list) -> float:
    import torch

    from utils.fold import ModelSpec
    from utils.model import TextModel, load_tokenizer

    torch.manual_seed(0)
    model = TextModel.from_backbone(name, ModelSpec(pooling="attention"))
    tok = load_tokenizer(name)
    enc = tok((texts * batch)[:batch], truncation=True, max_length=length, padding="max_length",
              return_tensors="pt")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    model.train()
    times = []
    for i in range(steps + 1):
        t0 = time.perf_counter()
        loss = model(enc["input_ids"], enc["attention_mask"]).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i:  # the first step warms up
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def steps(data: str, n: int) -> dict:
    import pandas as pd
    import torch

    from utils.env import competition_dir

    texts = pd.read_csv(Path(competition_dir(data)) / "train.csv")["excerpt"].head(64).tolist()
    rows = []
    for shape, (batch, length) in SHAPES.items():
        base = None
        for name in BACKBONES:
            s = step_seconds(name, batch, length, n, texts)
            base = base or s
            rows.append({"backbone": name.split("/")[-1], "batch": shape, "seconds_per_step": round(s, 3),
                         "vs_minilm": round(s / base, 2)})
            print(rows[-1], flush=True)
    return {"rows": rows, "steps": n, "torch_threads": torch.get_num_threads(),
            "command": "python bench/backbones.py steps"}


def commonlit(model: str, pooling: str, out: str, epochs: int, save_every: int, data: str | None) -> dict:
    from common import backbone_name
    from quality import run_mode

    from utils.env import competition_dir

    name = backbone_name(model)
    result = RESULTS.parent / f"backbones_commonlit_{name}_{pooling.replace('+', '-')}.json"
    r = run_mode(pooling, str(Path(competition_dir(data)) / "train.csv"), epochs, model=model, result_file=result,
                 out=out, save_every=save_every)
    return {**r, "backbone": name, "run": out}


def commonlit_blend(runs: list) -> dict:
    """Fold 0's validation rows of each run: each alone, their equal average, and a blend whose
    weights (non-negative, RMSE) are fitted on one half of the rows and scored on the other, both ways."""
    import numpy as np
    import pandas as pd
    from scipy.optimize import nnls

    frames = [pd.read_csv(Path(r) / "oof.csv", dtype={"id": str}).set_index("id").sort_index() for r in runs]
    y = frames[0]["target"].to_numpy()
    p = np.stack([f.loc[frames[0].index, "pred"].to_numpy() for f in frames], 1)
    rmse = lambda a: float(np.sqrt(np.mean((a - y) ** 2)))  # noqa: E731
    half = np.random.default_rng(0).permutation(len(y)) < len(y) // 2
    fitted, weights = np.zeros(len(y)), []
    for fit, score in ((half, ~half), (~half, half)):
        w = nnls(p[fit], y[fit])[0]
        weights.append((w / w.sum()).tolist())
        fitted[score] = p[score] @ (w / w.sum())
    return {"runs": [str(r) for r in runs], "rows": int(len(y)), "alone": [rmse(p[:, j]) for j in range(len(runs))],
            "equal": rmse(p.mean(1)), "fitted_halves": rmse(fitted), "weights_halves": weights,
            "command": "python bench/backbones.py commonlit-blend --runs " + " ".join(map(str, runs))}


def table() -> str:
    res = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    lines = []
    if "steps" in res:
        s = res["steps"]
        lines += [f"Training step on {s['torch_threads']} CPU threads (median of {s['steps']}; `{s['command']}`):", "",
                  "| batch | backbone | s / step | vs MiniLM |", "| --- | --- | --- | --- |"]
        lines += [f"| {r['batch']} | {r['backbone']} | {r['seconds_per_step']:.2f} | {r['vs_minilm']:.2f}x |"
                  for r in s["rows"]]
    for r in res.get("commonlit", {}).values():
        lines.append(f"- CommonLit fold 0, {r['backbone']}, {r['mode']} pooling, {r['epochs']} epochs: RMSE "
                     f"{r['valid_rmse']:.4f} in {r['minutes']:.0f} min of training (`{r['command']}`)")
    for b in res.get("commonlit_blends", []):
        lines.append(f"- CommonLit fold 0 blend of {', '.join(Path(r).name for r in b['runs'])}: alone "
                     f"{', '.join(f'{x:.4f}' for x in b['alone'])}; equal {b['equal']:.4f}; fitted on halves "
                     f"{b['fitted_halves']:.4f} (`{b['command']}`)")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("arm", nargs="?", choices=("steps", "commonlit", "commonlit-blend"))
    p.add_argument("--data", default=None, help="CommonLit's folder (default: the kit's lookup order)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--model", default="sentence-transformers/all-mpnet-base-v2", help="commonlit: the backbone")
    p.add_argument("--pooling", default="attention", help="commonlit: the pooling")
    p.add_argument("--epochs", type=int, default=3, help="commonlit: epochs")
    p.add_argument("--out", default="", help="commonlit: the run folder (again: resumes it)")
    p.add_argument("--save-every", type=int, default=20, help="commonlit: save the fold every N steps")
    p.add_argument("--runs", nargs="+", help="commonlit-blend: fold-0 runs of commonlit (or bench/quality.py)")
    p.add_argument("--table", action="store_true")
    a = p.parse_args()
    from utils.files import write_json

    if a.arm == "commonlit":
        sys.path.insert(0, str(HERE))
    r = {"steps": lambda: steps(a.data, a.steps), "commonlit-blend": lambda: commonlit_blend(a.runs),
         "commonlit": lambda: commonlit(a.model, a.pooling, a.out, a.epochs, a.save_every, a.data)}[a.arm]() \
        if a.arm else None
    res = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}  # read after the arm: others write it too
    if a.arm == "steps":
        res["steps"] = r
    elif a.arm == "commonlit":
        res.setdefault("commonlit", {})[f"{Path(a.out).name or a.model}"] = r
    elif a.arm == "commonlit-blend":
        res.setdefault("commonlit_blends", []).append(r)
    if a.arm:
        write_json(RESULTS, res)
    print(table())


if __name__ == "__main__":
    main()
