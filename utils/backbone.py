"""What the kit knows about a backbone's family: encoder or decoder, LoRA's default targets, the
precision it can train in, the attention it needs; the LoRA / 4-bit setup; the base model a LoRA
fold was trained on; and the peak GPU memory a run will need, estimated before it starts.

A decoder (Llama, Mistral, Qwen2, Qwen3, Gemma 2, Gemma 3, Phi-3) goes through the same `--model` as an encoder.
What differs is read from its family here, never tested for elsewhere:

- pooling: a causal model's first token has seen nothing, so "cls" is refused for a decoder;
  "last" (the last real token), "attention" and "mean" work on any backbone;
- positions: a decoder is given position ids counted from its first real token, so a batch
  padded on the left computes what one padded on the right does;
- the pad token: a tokenizer without one gets its unknown or end-of-text token as padding (the
  mask hides it), never a new token: the vocabulary and the embeddings keep their size;
- precision: Gemma 2's activations exceed fp16's range (65504) and its attention soft-caps its
  logits, which only the "eager" attention does: it trains in bf16 where the GPU has bf16 (compute
  capability 8+), else in fp32 (a T4), with eager attention; --precision fp16 is refused for it.
  Gemma 3 (NaN or empty outputs in fp16) follows the same rule, with transformers' default attention.

An encoder family records what loading it needs: a transformers floor (ModernBERT: 4.48) and the
packages its SentencePiece tokenizer is converted with (DeBERTa-v3, XLM-R: sentencepiece and
protobuf); either missing is one line naming it (check_floor, check_packages).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from .env import kaggle_input
from .files import BACKBONE_CONFIG, BASE_FILES, KIT_CONFIG, file_sha256

ATTENTION_AND_MLP = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
GIB = 1024**3


@dataclass(frozen=True)
class Family:
    """A backbone family (a transformers model_type) and what training it needs."""

    name: str
    decoder: bool = False  # a causal LM: each token sees only the tokens before it
    lora_targets: tuple = ("query", "key", "value", "dense")  # LoRA's default target modules
    fp16: bool = True  # whether fp16 autocast is safe (else bf16 where the GPU has it, else fp32)
    attention: str = ""  # attn_implementation it must load with ("" = transformers' default)
    why: str = ""  # the reason for fp16=False / the attention
    saved_hidden: float = 8.5  # activations kept per token and layer, in hidden sizes (+ 4 intermediate)
    saved_scores: int = 1  # attention-score tensors kept per layer in eager attention
    positions_after_pad: bool = False  # position ids start after the pad id (RoBERTa, MPNet)
    title: str = ""  # the family as people call it, in messages
    floor: str = ""  # the oldest transformers that has the family ("" = any the kit supports)
    # Python packages its tokenizer needs to load from its SentencePiece model (a folder without
    # tokenizer.json converts it at load: DeBERTa-v3's spm.model, XLM-R's sentencepiece.bpe.model)
    needs: tuple = ()


GEMMA2_WHY = ("Gemma 2's activations exceed fp16's range and its attention soft-caps its logits, "
              "which only the eager attention computes")
GEMMA3_WHY = "Gemma 3's activations exceed fp16's range (NaN or empty outputs in fp16)"
SENTENCEPIECE = ("sentencepiece", "protobuf")
FAMILIES = {f.name: f for f in (
    Family("bert"), Family("roberta", positions_after_pad=True),
    # XLM-R: RoBERTa's model, a SentencePiece tokenizer with fairseq's ids (<s> 0, <pad> 1, </s> 2, <unk> 3)
    Family("xlm-roberta", positions_after_pad=True, title="XLM-RoBERTa", needs=SENTENCEPIECE),
    Family("electra"),
    # MPNet (all-mpnet-base-v2): q/k/v/o projections, relative position buckets on top of
    # absolute positions counted from pad id + 1, no token_type_ids
    Family("mpnet", lora_targets=("q", "k", "v", "o", "dense"), positions_after_pad=True),
    # DeBERTa-v3 (and mDeBERTa): relative positions only (no length limit of its own: --max-len
    # decides), no token types (type_vocab_size 0), a SentencePiece tokenizer (spm.model)
    Family("deberta-v2", lora_targets=("query_proj", "key_proj", "value_proj", "dense"), title="DeBERTa-v3",
           needs=SENTENCEPIECE),
    Family("deberta", lora_targets=("in_proj", "dense")),
    # ModernBERT: fused Wqkv, Wo and the gated MLP's Wi; rotary positions, local attention in most
    # layers, no token types
    Family("modernbert", lora_targets=("Wqkv", "Wo", "Wi"), title="ModernBERT", floor="4.48"),
    Family("llama", True, ATTENTION_AND_MLP),
    Family("mistral", True, ATTENTION_AND_MLP),
    Family("qwen2", True, ATTENTION_AND_MLP),
    Family("qwen3", True, ATTENTION_AND_MLP, title="Qwen3", floor="4.51"),
    Family("gemma", True, ATTENTION_AND_MLP, fp16=False, why="Gemma's activations exceed fp16's range"),
    # four norms per block, and the soft-capped scores kept beside the probabilities
    Family("gemma2", True, ATTENTION_AND_MLP, fp16=False, attention="eager", why=GEMMA2_WHY,
           saved_hidden=10.5, saved_scores=2),
    # Gemma 3's text model (gemma-3-1b, model_type gemma3_text; the larger checkpoints are
    # image-text models, "gemma3", whose config nests the text model's)
    Family("gemma3_text", True, ATTENTION_AND_MLP, fp16=False, why=GEMMA3_WHY, title="Gemma 3", floor="4.50"),
    Family("phi3", True, ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")),
    Family("phi", True, ("q_proj", "k_proj", "v_proj", "dense", "fc1", "fc2")),
)}


ENCODER = Family("encoder")  # what a family without traps follows (BERT, RoBERTa, ...)


def family_of(config) -> Family:
    """The family of a backbone config; one the table does not know is a decoder when its
    config says so (is_decoder, a *ForCausalLM architecture), and LoRA then targets every
    linear layer ("all-linear")."""
    model_type = str(getattr(config, "model_type", ""))
    if model_type in FAMILIES:
        return FAMILIES[model_type]
    archs = getattr(config, "architectures", None) or []
    decoder = bool(getattr(config, "is_decoder", False)) or any(a.endswith("ForCausalLM") for a in archs)
    return Family(model_type or "unknown", decoder, ("all-linear",))


def _version(text: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", text)[:2])


def check_floor(model_type: str, name: str, version: str | None = None) -> None:
    """A family newer than this transformers (ModernBERT before 4.48, Qwen3 before 4.51, Gemma 3
    before 4.50), refused in one line naming the release it needs (transformers' own error only
    says the model type is unknown)."""
    fam = FAMILIES.get(model_type)
    if fam is None or not fam.floor:
        return
    if version is None:
        import transformers

        version = transformers.__version__
    if _version(version) < _version(fam.floor):
        raise ValueError(f"{name}: {fam.title or fam.name} needs transformers >= {fam.floor} (this is {version}): "
                         f"pip install -U 'transformers>={fam.floor}'")


def check_packages(packages, what: str) -> None:
    """Each of `packages` importable, or one line naming the first missing one and what needs it."""
    import importlib

    imports = {"protobuf": "google.protobuf"}
    for package in packages:
        try:
            importlib.import_module(imports.get(package, package))
        except ImportError:
            raise ValueError(f"{what} needs {package}, which is not installed: pip install {package}") from None


def check_pooling(pooling: str, fam: Family) -> None:
    """A pooling that cannot work on this backbone, refused in one line."""
    if fam.decoder and pooling == "cls":
        raise ValueError(f"--pooling cls on a decoder ({fam.name}): its first token has seen nothing "
                         "of the text; use last (its last real token), attention or mean")


def prepare_tokenizer(tokenizer):
    """A tokenizer with a pad token: its own, else its unknown, end-of-text or start token
    (padding is masked, so which one does not matter), never a new token (which would need
    the embeddings resized). Returns the same tokenizer."""
    if tokenizer.pad_token is None:
        for name in ("unk_token", "eos_token", "bos_token"):
            token = getattr(tokenizer, name, None)
            if token is not None:
                tokenizer.pad_token = token
                break
    return tokenizer


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions counted from each row's first real token (0 on the padding before it): a
    left-padded row gets the positions it would have unpadded."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


# ----------------------------------------------------------------------------- precision


def gpu_has_bf16() -> bool:
    """bf16 with tensor cores: compute capability 8+ (A100, L4, H100), not a T4 (7.5), which
    only emulates it (is_bf16_supported() answers True there, so it is not asked)."""
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8


_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
_ACCELERATE = {"fp32": "no", "fp16": "fp16", "bf16": "bf16"}


@dataclass(frozen=True)
class Precision:
    """What a run computes in, for training and for prediction alike (precision_for decides)."""

    name: str  # fp32 | fp16 | bf16
    note: str = ""  # why this family runs in another precision than an encoder would, or a warning
    half_base: bool = True  # a frozen base loads in the half dtype (not at prediction off CUDA)

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        """The dtype of mixed-precision autocast; None: no autocast (fp32)."""
        return None if self.name == "fp32" else _DTYPES[self.name]

    @property
    def weight_dtype(self) -> torch.dtype:
        """The dtype a frozen base model loads in: half for AMP (its weights are never updated,
        so no fp32 master copy is needed), fp32 otherwise."""
        return _DTYPES[self.name] if self.half_base else torch.float32

    @property
    def grad_scaler(self) -> bool:
        """Whether a GradScaler runs (fp16's narrow range underflows small gradients)."""
        return self.name == "fp16"

    @property
    def accelerate(self) -> str:
        """accelerate's mixed_precision value."""
        return _ACCELERATE[self.name]

    def autocast(self, device_type: str):
        """The autocast context for a forward on `device_type`; a no-op in fp32."""
        import contextlib

        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device_type, dtype=self.autocast_dtype)


def _resolve(asked: str, fam: Family, cuda: bool) -> str:
    if asked != "auto":
        return asked
    if not cuda:
        return "fp32"
    if gpu_has_bf16():
        return "bf16"
    return "fp16" if fam.fp16 else "fp32"


def precision_for(asked: str = "auto", fam: Family = None, device_type: str | None = None,
                  training: bool = True) -> Precision:
    """The one precision rule. `asked` (--precision: auto, fp32, fp16, bf16) for a backbone of
    family `fam` (None: an encoder) on `device_type` ("cuda", "cpu"; None: CUDA when there is
    one). "auto" is bf16 on a GPU with bf16 (compute capability 8+), fp16 on an older GPU (T4,
    P100, V100), fp32 there for a family fp16 breaks (Gemma 2: the note says why), fp32 off
    CUDA; an explicit value is kept (fp16 for such a family too, with the note's warning).
    Training refuses fp16 without CUDA; prediction off CUDA loads a frozen base in fp32."""
    fam = fam or ENCODER
    cuda = torch.cuda.is_available() and device_type in (None, "cuda")
    if asked not in ("auto", *_DTYPES):
        raise ValueError(f"unknown precision {asked!r}; valid: auto, {', '.join(_DTYPES)}")
    if training and asked == "fp16" and not cuda:
        raise ValueError("--precision fp16 needs a CUDA GPU; on CPU use bf16 or fp32")
    mine, usual = _resolve(asked, fam, cuda), _resolve(asked, ENCODER, cuda)
    if mine == "fp16" and not fam.fp16:
        note = (f"warning: {fam.name} in fp16 as asked: {fam.why}; a step that overflows gives NaN, "
                "which the kit refuses (a fold keeps its best finite checkpoint, a submission is never "
                "written with NaN); --precision auto runs it in bf16 or fp32")
    else:
        note = f"{fam.name} runs in {mine}, not {usual}: {fam.why}" if mine != usual else ""
    return Precision(mine, note, half_base=training or cuda)


# ----------------------------------------------------------------------------- LoRA and 4-bit


def check_checkpointing(config) -> None:
    """--gradient-checkpointing on a backbone whose transformers model cannot recompute its layers
    (MPNet's, in transformers 4.x and 5.x), refused in one line before any work: transformers
    would raise only once the model is built."""
    from transformers import AutoModel

    try:
        cls = AutoModel._model_mapping[type(config)]
    except (KeyError, AttributeError):  # a model of remote code: transformers says so itself
        return
    if not getattr(cls, "supports_gradient_checkpointing", True):
        raise ValueError(f"--gradient-checkpointing: {cls.__name__} ({config.model_type}) cannot recompute its "
                         "layers in this transformers; leave it out (a smaller --batch-size with --grad-accum "
                         "saves memory instead)")


def check_4bit() -> None:
    """4-bit loading (QLoRA) needs a CUDA GPU and bitsandbytes: refused in one line otherwise."""
    if not torch.cuda.is_available():
        raise ValueError("--load-in-4bit needs a CUDA GPU (bitsandbytes' 4-bit kernels): this machine "
                         "has none; train without it (LoRA on a full-precision base) or on a GPU")
    try:
        import bitsandbytes  # noqa: F401
    except Exception as e:  # ImportError, or its own error when no kernel fits this GPU
        raise ValueError(f"--load-in-4bit needs bitsandbytes, which cannot be used here ({str(e)[:120]}): "
                         "pip install bitsandbytes>=0.43") from None
    major, minor = torch.cuda.get_device_capability()
    if major < 5:
        raise ValueError(f"--load-in-4bit: this GPU (compute capability {major}.{minor}) is too old "
                         "for bitsandbytes' 4-bit kernels")


def quantization_config(precision: Precision):
    """bitsandbytes' NF4 with double quantisation, computing in the run's precision."""
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=precision.weight_dtype)


def _peft():
    try:
        import peft
    except ImportError:
        raise ValueError("--lora-r needs peft: pip install peft>=0.13") from None
    return peft


def lora_targets(targets, fam: Family) -> list | str:
    """The modules LoRA adapts: the given names, else the family's defaults."""
    names = list(targets) or list(fam.lora_targets)
    return "all-linear" if names == ["all-linear"] else names


def add_lora(backbone: torch.nn.Module, r: int, alpha: float, dropout: float, targets) -> torch.nn.Module:
    """LoRA adapters injected into the backbone (peft), and every base weight frozen: only the
    adapters of the backbone train. The same module, its forward unchanged."""
    peft = _peft()
    config = peft.LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=targets, bias="none")
    try:
        backbone = peft.inject_adapter_in_model(config, backbone)
    except ValueError as e:  # no module matched the targets
        raise ValueError(f"--lora-targets {targets}: {str(e).splitlines()[0][:200]}") from None
    for name, p in backbone.named_parameters():
        p.requires_grad = "lora_" in name
    return backbone


def trainable_names(model: torch.nn.Module) -> set:
    """Names of the parameters that train (a LoRA fold saves these only)."""
    return {n for n, p in model.named_parameters() if p.requires_grad}


# ----------------------------------------------------------------------------- the base model

def local_dir(name_or_dir: str) -> Path | None:
    """The folder holding a model's files: the folder given, or a hub id's snapshot in the local
    Hugging Face cache (no download), or the kit's offline copy (utils.models); None when
    none exists."""
    path = Path(name_or_dir).expanduser()
    if path.is_dir():
        return path
    from .models import local  # noqa: PLC0415 (light: files only)

    offline = local(str(name_or_dir))
    if offline is not None:
        return offline
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(str(name_or_dir), local_files_only=True))
    except Exception:
        return None


def base_files(folder) -> dict:
    """{file name: sha256} of a base model folder's config and weight files."""
    folder = Path(folder)
    files = sorted({f for pattern in BASE_FILES for f in folder.glob(pattern) if f.is_file()})
    return {f.name: file_sha256(f) for f in files}


def base_record(name_or_dir: str) -> dict:
    """What a LoRA fold records of its base model: its hub id or folder, and its files' sha256."""
    folder = local_dir(name_or_dir)
    if folder is None:
        raise FileNotFoundError(f"base model {name_or_dir}: its files are not on this machine")
    return {"model": str(name_or_dir), "files": base_files(folder)}


def kaggle_model_dirs(record: dict) -> list:
    """Folders under the Kaggle input that may hold a fold's base model, nearest first: a Kaggle
    Model attached to the notebook (/kaggle/input/<model>/<framework>/<variation>/<version>/, or
    /kaggle/input/models/<owner>/<model>/<framework>/<variation>/<version>/) or a dataset
    (/kaggle/input/[datasets/<owner>/]<slug>/): those whose path holds the recorded name's last
    part (gemma-2-9b-it; a Kaggle Model's variation, not its version number), then any whose
    backbone config is the recorded one (same sha256). A kit's fold folder (the models dataset)
    is never one."""
    root = kaggle_input()
    # A model trained from an attached Kaggle Model records .../<variation>/<version>: "1" would
    # match nearly any path.
    names = [p for p in Path(str(record["model"]).rstrip("/")).parts if not p.isdigit()]
    leaf = names[-1].lower() if names else ""
    if not root.is_dir():
        return []
    named, same_config = [], []
    config_sha = record.get("files", {}).get(BACKBONE_CONFIG)
    for depth in range(0, 7):
        for config in sorted(root.glob("/".join(["*"] * depth + [BACKBONE_CONFIG]))):
            if (config.parent / KIT_CONFIG).is_file():
                continue
            if leaf and leaf in str(config.parent.relative_to(root)).lower():
                named.append(config.parent)
            elif config_sha and file_sha256(config) == config_sha:
                same_config.append(config.parent)
    return named + same_config


def find_base(record: dict, given: str | None = None) -> Path:
    """The folder of a fold's base model: `given` (or $KIT_BASE_MODEL), else the recorded hub
    id or folder when it is on this machine, else a Kaggle Model or dataset attached to the
    notebook (kaggle_model_dirs). Checked against the recorded files' sha256: another model is
    refused in one line."""
    given = given or os.environ.get("KIT_BASE_MODEL", "")
    if given:
        folder = local_dir(given)
        if folder is None:
            raise FileNotFoundError(f"base model not found: {given}")
        check_base(record, folder)
        return folder
    candidates = [local_dir(record["model"])] + kaggle_model_dirs(record)
    candidates = [c for c in candidates if c is not None]
    for folder in candidates:
        if not differs(record, folder):
            return folder
    if candidates:
        check_base(record, candidates[0])  # raises: say how the nearest one differs
    raise FileNotFoundError(
        f"base model {record['model']} not found: not a folder or a cached hub model here, and no "
        "Kaggle Model or dataset holding it is attached; attach it, or give its folder "
        "(--base-model, or $KIT_BASE_MODEL)")


def differs(record: dict, folder) -> str:
    """'' when the folder holds the recorded base model (same file names and sha256), else what
    differs."""
    mine = base_files(folder)
    saved = record.get("files", {})
    if set(mine) != set(saved):
        return f"files {sorted(set(mine) ^ set(saved))[:3]} differ"
    changed = [f for f in saved if saved[f] != mine[f]]
    return f"{changed[0]} has other content" if changed else ""


def check_base(record: dict, folder) -> None:
    """Refuse, in one line, a base model other than the one a fold was trained on."""
    why = differs(record, folder)
    if why:
        raise ValueError(f"base model {folder} is not the one this fold was trained on ({record['model']}): "
                         f"{why}; adapters only fit the weights they were trained with")


# ----------------------------------------------------------------------------- memory


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak GPU memory of one training process, in bytes, by part."""

    weights: float  # the model's weights as loaded (fp32, half, or 4-bit)
    trainable: float  # trained parameters' fp32 master copy, gradients and AdamW's two moments
    activations: float  # what the forward keeps for the backward
    params: int  # parameters of the backbone
    trained: int  # parameters that train

    @property
    def total(self) -> float:
        return self.weights + self.trainable + self.activations


def weight_bytes(total: int, linear: int, precision: str, load_in_4bit: bool = False) -> float:
    """Bytes of a frozen base's weights: `total` parameters in the precision's dtype (2 bytes in
    half, 4 in fp32), or its `linear` ones in 4-bit NF4 with double quantisation (about 0.53
    bytes each) and the rest in that dtype."""
    half = 4 if precision == "fp32" else 2
    return linear * 0.53 + (total - linear) * half if load_in_4bit else total * half


def _meta_backbone(config) -> torch.nn.Module:
    """The backbone of `config` as the kit builds it, on the meta device (no weights): BERT's and
    RoBERTa's CLS pooler removed, as utils.model drops it."""
    from transformers import AutoModel

    with torch.device("meta"):
        model = AutoModel.from_config(config)
    if getattr(model, "pooler", None) is not None:
        model.pooler = None
    return model


def count_parameters(config) -> tuple[int, int]:
    """(all parameters, those in Linear layers) of a backbone config, counted without weights
    (the model built on the meta device, without the pooler the kit drops)."""
    model = _meta_backbone(config)
    total = sum(p.numel() for p in model.parameters())
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    return total, linear


def lora_parameters(config, r: int, targets) -> int:
    """Parameters LoRA adds: r x (in + out) for each targeted Linear layer."""
    model = _meta_backbone(config)
    n = 0
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.Linear) and (targets == "all-linear" or name.split(".")[-1] in targets):
            n += r * (m.in_features + m.out_features)
    return n


def estimate_memory(config, precision: str, micro_batch: int, max_len: int, lora_r: int = 0,
                    targets=(), load_in_4bit: bool = False, gradient_checkpointing: bool = False,
                    head_params: int = 0, lora_dropout: float = 0.0) -> MemoryEstimate:
    """The peak GPU memory of training one micro-batch, by part.

    weights: full fine-tuning keeps fp32 weights (4 bytes each); LoRA loads the frozen base in
    the run's half precision (2 bytes; 4 in fp32); 4-bit NF4 with double quantisation stores
    Linear weights in about 0.53 bytes (the rest as without it). trainable: 16 bytes per trained
    parameter (fp32 weight, gradient, AdamW's two moments). activations, 2 bytes each (4 in
    fp32), per token and layer: 8.5 x hidden + 4 x intermediate values (what autograd saves in a
    Llama-style block, measured on CPU: tests/test_decoders.py; Gemma 2's four norms: 10.5 x
    hidden), 7 x hidden + intermediate more when LoRA's dropout is on (each adapter keeps its
    dropped input), and heads x max_len attention probabilities in eager attention (Gemma 2:
    its soft-capped scores too); with gradient checkpointing, one hidden state per layer plus
    one layer's full set (recomputed in the backward).
    """
    fam = family_of(config)
    total, linear = count_parameters(config)
    act_bytes = 4 if precision == "fp32" else 2
    if lora_r:
        targets = lora_targets(targets, fam)
        trained = lora_parameters(config, lora_r, targets) + head_params
        weights = weight_bytes(total, linear, precision, load_in_4bit)
    else:
        trained = total + head_params
        weights = 0.0  # counted in trainable: the fp32 weights are the master copy
    hidden = config.hidden_size
    inter = getattr(config, "intermediate_size", None) or 4 * hidden
    layers = config.num_hidden_layers
    tokens = micro_batch * max_len
    values = fam.saved_hidden * hidden + 4 * inter
    if lora_r and lora_dropout > 0:
        values += 7 * hidden + inter
    if fam.attention == "eager" or not fam.decoder:
        values += fam.saved_scores * config.num_attention_heads * max_len
    per_layer = tokens * values * act_bytes
    if gradient_checkpointing:
        activations = layers * tokens * hidden * act_bytes + per_layer
    else:
        activations = layers * per_layer
    return MemoryEstimate(weights, trained * 16, activations, total, trained)


def memory_line(est: MemoryEstimate, device_bytes: float | None, device_name: str = "") -> str:
    """One line: the estimate, its parts, and the device's memory (or that there is no GPU)."""
    parts = (f"weights {est.weights / GIB:.2f} + trained {est.trainable / GIB:.2f} "
             f"+ activations {est.activations / GIB:.2f}")
    head = (f"memory estimate: {est.total / GIB:.2f} GiB peak per GPU ({parts}; {est.params / 1e6:,.0f}M "
            f"parameters, {est.trained / 1e6:,.2f}M trained)")
    if device_bytes is None:
        return f"{head}; no GPU here"
    verdict = "fits" if est.total < 0.9 * device_bytes else "may NOT fit: lower --batch-size or --max-len, " \
        "add --gradient-checkpointing, --lora-r or --load-in-4bit"
    return f"{head} of {device_bytes / GIB:.1f} GiB on {device_name}: {verdict}"
