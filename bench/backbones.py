"""The second backbone: all-mpnet-base-v2 (MPNet, 12 layers, hidden 768, 110M parameters) beside
all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384, 22M), both offline (utils.models).

    python bench/backbones.py steps            # one training step of each, same batch, same command
    python bench/backbones.py --table          # the saved results

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


def table() -> str:
    res = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    lines = []
    if "steps" in res:
        s = res["steps"]
        lines += [f"Training step on {s['torch_threads']} CPU threads (median of {s['steps']}; `{s['command']}`):", "",
                  "| batch | backbone | s / step | vs MiniLM |", "| --- | --- | --- | --- |"]
        lines += [f"| {r['batch']} | {r['backbone']} | {r['seconds_per_step']:.2f} | {r['vs_minilm']:.2f}x |"
                  for r in s["rows"]]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("arm", nargs="?", choices=("steps",))
    p.add_argument("--data", default=None, help="CommonLit's folder (default: the kit's lookup order)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--table", action="store_true")
    a = p.parse_args()
    if a.arm == "steps":
        from utils.files import write_json

        res = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
        res["steps"] = steps(a.data, a.steps)
        write_json(RESULTS, res)
    print(table())


if __name__ == "__main__":
    main()
