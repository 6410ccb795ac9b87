"""Estimates, not measurements: peak memory per T4 and GPU hours of a 7-9B decoder trained with
QLoRA on Kaggle's "GPU T4 x2".

    python bench/llm_memory.py            # the recipe and one variant, three models: memory, hours
    python bench/llm_memory.py --grid     # memory for every max_len x micro-batch x checkpointing
    python bench/llm_memory.py --utilisation 0.10 --epochs 1    # other assumptions

Memory: utils.backbone.estimate_memory (the figure `python -m utils.train` prints before training)
on each architecture's config, built from its transformers config class with the published sizes
(no weights: the parameters are counted on the meta device), in the precision the kit picks on a
T4 (utils.backbone.precision_for: fp16, Gemma 2 fp32). Not in the estimate: the CUDA context
(a few hundred MiB, outside torch's allocator), the allocator's fragmentation, and DDP's
gradient buckets (4 bytes per trained parameter).

Hours: arithmetic with its inputs printed. FLOPs per token: 2 x N forward, 2 x N backward to the
inputs (the base is frozen: no weight gradients; the adapters' are negligible), 2 x N more when
gradient checkpointing recomputes the forward; N = the Linear layers' parameters; attention's own
FLOPs (under 1% at ~217 tokens) and padding left out. Validation: 2 x N per token. Throughput is
an ASSUMPTION until a T4 is measured: --utilisation of the T4's peak in the run's precision (NVIDIA's
datasheet: 65 TFLOP/s fp16 with tensor cores, 8.1 TFLOP/s fp32), --ddp-efficiency for the second
T4 (the defaults are bench/scaling.py's); the pessimistic column halves the utilisation. Tokens:
CommonLit's 2,834 training rows x the mean tokens per excerpt measured by bench/scaling.py
(all-MiniLM-L6-v2's tokenizer, capped at 256; a decoder's tokenizer counts differently: unmeasured).
Writes bench/results/llm_memory.json.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the kit need not be installed where this runs

from utils import backbone as bb  # noqa: E402

# The published sizes (each model's config.json on the hub); AutoModel: no LM head.
ARCHS = {
    "Gemma-2-9B": ("Gemma2Config", dict(hidden_size=3584, intermediate_size=14336, num_hidden_layers=42,
                                        num_attention_heads=16, num_key_value_heads=8, head_dim=256,
                                        vocab_size=256000)),
    "Llama-3.1-8B": ("LlamaConfig", dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                                         num_attention_heads=32, num_key_value_heads=8, vocab_size=128256)),
    "Qwen2.5-7B": ("Qwen2Config", dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                                       num_attention_heads=28, num_key_value_heads=4, vocab_size=152064)),
}
T4_MEMORY_GIB = 15  # usable per T4 (16 GB on the box)
T4_PEAK = {"fp16": 65e12, "fp32": 8.1e12}  # FLOP/s, NVIDIA's T4 datasheet (fp16: tensor cores)
QUOTA_HOURS = 30  # Kaggle's weekly GPU quota, counted in hours of a session with its accelerator
SESSION_HOURS = 12  # one Kaggle session stops after this
# The recipe: QLoRA, checkpointing, 4 texts x 2 micro-batches x 2 GPUs = 16 per optimizer step.
RECIPE = dict(name="recipe", lora_r=16, lora_alpha=32, lora_dropout=0.05, load_in_4bit=True, max_len=512,
              micro_batch=4, grad_accum=2, processes=2, gradient_checkpointing=True)
# Without checkpointing: a third less compute, far more activations (1 text x 8 x 2 GPUs = 16).
VARIANT = dict(RECIPE, name="no checkpointing", micro_batch=1, grad_accum=8, gradient_checkpointing=False)
DATA = dict(rows=2834, folds=5, epochs=2, eval_every=50)  # CommonLit's train.csv; 5 folds, 2 epochs
SCALING = ROOT / "bench" / "results" / "scaling.json"  # tokens_per_row, measured there


def config_of(name: str):
    """The architecture's transformers config, from its config class and the published sizes."""
    import transformers

    cls, sizes = ARCHS[name]
    return getattr(transformers, cls)(**sizes)


def t4_precision(fam) -> str:
    """The precision `--precision auto` trains this family in on a T4 (compute capability 7.5: no
    bf16), from the kit's own rule (utils.backbone.precision_for)."""
    with mock.patch.object(bb, "gpu_has_bf16", lambda: False), \
            mock.patch.object(bb.torch.cuda, "is_available", lambda: True):
        return bb.precision_for("auto", fam, "cuda").name


def memory_row(name: str, config, setting: dict) -> dict:
    """utils.backbone.estimate_memory for one architecture and setting on a T4, in GiB."""
    fam = bb.family_of(config)
    precision = t4_precision(fam)
    est = bb.estimate_memory(config, precision, setting["micro_batch"], setting["max_len"], setting["lora_r"],
                             (), setting["load_in_4bit"], setting["gradient_checkpointing"],
                             config.hidden_size, setting["lora_dropout"])
    _, linear = bb.count_parameters(config)
    line = bb.memory_line(est, T4_MEMORY_GIB * bb.GIB, "a T4")
    return {"model": name, "family": fam.name, "setting": setting["name"], "precision": precision,
            "params": est.params, "linear_params": linear, "trained": est.trained,
            "max_len": setting["max_len"], "micro_batch": setting["micro_batch"],
            "gradient_checkpointing": setting["gradient_checkpointing"],
            "weights_gib": est.weights / bb.GIB, "trainable_gib": est.trainable / bb.GIB,
            "activations_gib": est.activations / bb.GIB, "total_gib": est.total / bb.GIB,
            "verdict": line.split(" on a T4: ", 1)[1].split(":")[0], "line": line}


def hours_row(mem: dict, setting: dict, a) -> dict:
    """GPU hours of 5-fold training on T4 x2, from FLOPs / assumed throughput (inputs kept)."""
    n = mem["linear_params"]
    train_rows = a.rows * (a.folds - 1) / a.folds
    valid_rows = a.rows / a.folds
    per_step = setting["micro_batch"] * setting["grad_accum"] * setting["processes"]
    steps = math.ceil(train_rows / per_step)  # optimizer steps per epoch
    validations = a.folds * a.epochs * math.ceil(steps / a.eval_every)  # the last at each epoch's end
    train_tokens = a.folds * a.epochs * train_rows * a.tokens
    valid_tokens = validations * valid_rows * a.tokens
    per_token = (6 if setting["gradient_checkpointing"] else 4) * n
    flops = per_token * train_tokens + 2 * n * valid_tokens
    throughput = setting["processes"] * T4_PEAK[mem["precision"]] * a.utilisation * a.ddp_efficiency
    hours = flops / throughput / 3600
    return {"model": mem["model"], "setting": setting["name"], "precision": mem["precision"],
            "train_flops_per_token": per_token, "train_tokens": train_tokens, "validations": validations,
            "valid_tokens": valid_tokens, "pflops": flops / 1e15, "throughput_tflops": throughput / 1e12,
            "hours": hours, "hours_pessimistic": 2 * hours, "hours_at_peak": hours * a.utilisation * a.ddp_efficiency,
            "quota_share": hours / QUOTA_HOURS,
            "quota_share_pessimistic": 2 * hours / QUOTA_HOURS}


def gib(x: float) -> str:
    return f"{x:.2f}"


def memory_table(rows: list) -> str:
    lines = ["| model | precision on a T4 | parameters | trained | max_len | micro-batch | checkpointing | "
             "weights | trained + AdamW | activations | total GiB per T4 | the kit's line on 15 GiB |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['precision']} | {r['params'] / 1e9:.2f}B | {r['trained'] / 1e6:.1f}M | "
                     f"{r['max_len']} | {r['micro_batch']} | {'on' if r['gradient_checkpointing'] else 'off'} | "
                     f"{gib(r['weights_gib'])} | {gib(r['trainable_gib'])} | {gib(r['activations_gib'])} | "
                     f"{gib(r['total_gib'])} | {r['verdict']} |")
    return "\n".join(lines)


def hours_table(rows: list, a) -> str:
    lines = ["| model | setting | precision | training FLOPs per token | PFLOPs in all | assumed T4 x2 TFLOP/s | "
             "hours | hours at half the utilisation | share of the 30 h weekly quota | "
             "hours at 100% of both T4s (a floor) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['setting']} | {r['precision']} | {r['train_flops_per_token'] / 1e9:.1f}G | "
                     f"{r['pflops']:,.0f} | {r['throughput_tflops']:.1f} | {r['hours']:.1f} | "
                     f"{r['hours_pessimistic']:.1f} | {r['quota_share']:.0%} ({r['quota_share_pessimistic']:.0%}) | "
                     f"{r['hours_at_peak']:.1f} |")
    r = rows[0]
    lines += ["", f"Inputs: {a.rows:,} rows x {a.tokens:.0f} tokens per row (bench/results/scaling.json), "
              f"{a.folds} folds x {a.epochs} epochs on {(a.folds - 1)}/{a.folds} of the rows = "
              f"{r['train_tokens'] / 1e6:.2f}M training tokens; {r['validations']} validations of "
              f"{a.rows / a.folds:.0f} rows (--eval-every {a.eval_every}, recipe) = "
              f"{r['valid_tokens'] / 1e6:.2f}M tokens "
              f"at 2 x N. Throughput ASSUMED: {a.utilisation:.0%} of the T4's peak (fp16 65, fp32 8.1 TFLOP/s) "
              f"x 2 GPUs x {a.ddp_efficiency:.0%} data-parallel efficiency. A session stops after "
              f"{SESSION_HOURS} h: a longer run goes in parts (--only-folds)."]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--grid", action="store_true", help="memory for every max_len x micro-batch x checkpointing")
    p.add_argument("--rows", type=int, default=DATA["rows"], help="training rows")
    p.add_argument("--tokens", type=float, default=0, help="mean tokens per row (default: bench/results/scaling.json)")
    p.add_argument("--folds", type=int, default=DATA["folds"])
    p.add_argument("--epochs", type=int, default=DATA["epochs"])
    p.add_argument("--eval-every", type=int, default=DATA["eval_every"], help="optimizer steps between validations")
    p.add_argument("--utilisation", type=float, default=0.15, help="ASSUMED share of a T4's peak sustained")
    p.add_argument("--ddp-efficiency", type=float, default=0.75, help="ASSUMED gain of the second T4")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "llm_memory.json"))
    a = p.parse_args(argv)
    if not a.tokens:
        a.tokens = json.loads(SCALING.read_text())["measured"]["tokens_per_row"]

    configs = {name: config_of(name) for name in ARCHS}
    settings = (RECIPE, VARIANT)
    if a.grid:
        settings = [dict(RECIPE, name=f"L{L} b{b} {'ckpt' if ck else 'no ckpt'}", max_len=L, micro_batch=b,
                         gradient_checkpointing=ck)
                    for L in (256, 512, 1024) for b in (1, 2, 4, 8) for ck in (True, False)]
    memory = [memory_row(name, configs[name], s) for name in ARCHS for s in settings]
    print("Peak memory per T4, ESTIMATED (utils.backbone.estimate_memory), QLoRA r "
          f"{RECIPE['lora_r']} on each family's default targets, LoRA dropout {RECIPE['lora_dropout']}:\n")
    print(memory_table(memory))
    result = {"command": "python bench/llm_memory.py" + (" --grid" if a.grid else ""), "estimate": True,
              "architectures": {k: {"config_class": c, **s} for k, (c, s) in ARCHS.items()},
              "settings": list(settings), "memory": memory}
    if not a.grid:
        hours = [hours_row(m, s, a) for m, s in zip(memory, [s for _ in ARCHS for s in settings])]
        print("\nGPU hours of 5-fold training on T4 x2, ESTIMATED (arithmetic; throughput assumed):\n")
        print(hours_table(hours, a))
        result.update(hours=hours, assumptions={k: getattr(a, k) for k in (
            "rows", "tokens", "folds", "epochs", "eval_every", "utilisation", "ddp_efficiency")},
            t4_peak_flops=T4_PEAK, quota_hours=QUOTA_HOURS)
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(result, indent=2))
        out = Path(a.out).resolve()
        print(f"\nwrote {out.relative_to(ROOT) if ROOT in out.parents else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
