"""Any Hugging Face encoder or decoder + (optional) mix of its last N layers + pooling + a linear head.

A saved model folder is self-contained: `kit_config.json` (this module's options), `config.json`
(the backbone's architecture), the tokenizer files and `kit_model.safetensors` (all weights).
`TextModel.load(folder)` rebuilds it from those files alone: no hub name, no network.

A LoRA fold (ModelSpec.lora_r > 0) holds only what was trained: the adapters, the layer mix, the
pooling and the head (megabytes), and names its base model (hub id or folder, and its config and
weight files' sha256, utils.backbone.base_record); loading it finds that base model
(utils.backbone.find_base) and refuses another one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import AutoConfig, AutoModel, AutoTokenizer

from . import backbone as bb
from . import models
from .files import BACKBONE_CONFIG, FILES_NEEDED, KIT_CONFIG, VOCAB_FILES, WEIGHTS  # noqa: F401
from .fold import FoldRecord, ModelSpec, read_fold, write_record
from .pooling import build_pooling

_SAFETENSORS_ERRORS = tuple(e for e in (getattr(__import__("safetensors"), "SafetensorError", None),) if e)
# transformers 5 names the dtype to load in `dtype`; 4.x, `torch_dtype`.
_TRANSFORMERS_MAJOR = int(__import__("transformers").__version__.split(".")[0])
_DTYPE_KEY = "dtype" if _TRANSFORMERS_MAJOR >= 5 else "torch_dtype"


class LayerMix(nn.Module):
    """Softmax-weighted average of the last N hidden layers: N x (B, S, H) -> (B, S, H)."""

    def __init__(self, n_layers: int):
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(n_layers))  # starts as a plain average

    def forward(self, layers):
        w = torch.softmax(self.logits.float(), dim=0).to(layers[0].dtype)
        return torch.einsum("n,nbsh->bsh", w, torch.stack(list(layers)))


def _drop_pooler(backbone: nn.Module) -> None:
    # BERT/RoBERTa build a CLS pooler this kit never uses; left in, DDP fails on its unused
    # parameters, so it is removed (their forward() checks `self.pooler is not None`).
    if getattr(backbone, "pooler", None) is not None:
        backbone.pooler = None


def _reinit(module: nn.Module, std: float) -> None:
    # Done by hand: transformers 5.x's `_init_weights` skips modules already marked initialised.
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, mean=0.0, std=std)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


def _only_the_lm_head(message: str) -> bool:
    """A transformers load report (5.x: a table; 4.x: "Some weights ... were not used") whose only
    entries are the language-model head's weights left out: what loading a decoder's checkpoint
    into its bare model (AutoModel) always does, so the kit says nothing of it. Any other entry (a
    missing weight, a size mismatch) keeps the report."""
    if "LOAD REPORT" in message:
        rows = [line.split("|") for line in message.splitlines() if line.count("|") >= 2]
        entries = [(r[0].strip(), r[1].strip()) for r in rows if r[0].strip() != "Key"]  # past the header
        return bool(entries) and all(k.startswith("lm_head.") and "UNEXPECTED" in v for k, v in entries)
    if "were not used when initializing" in message:
        names = re.findall(r"'([^']+)'", message.split("initializing", 1)[1].split("\n")[0])
        return bool(names) and all(n.startswith("lm_head.") for n in names)
    return False


class _DropHeadReport(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not _only_the_lm_head(record.getMessage())


@contextlib.contextmanager
def quiet_head_report():
    """transformers' report of the LM head left out of a decoder's bare model, kept out of the
    user's output while a backbone loads (every other report still shows)."""
    from transformers.utils import logging as hf_logging

    handlers = hf_logging._get_library_root_logger().handlers + logging.getLogger().handlers
    drop = _DropHeadReport()
    for h in handlers:
        h.addFilter(drop)
    try:
        yield
    finally:
        for h in handlers:
            h.removeFilter(drop)


@contextlib.contextmanager
def readable_weights(source):
    """One line naming a backbone whose weights file is truncated or corrupt (safetensors' own
    error, a traceback, otherwise)."""
    try:
        yield
    except _SAFETENSORS_ERRORS as e:
        raise ValueError(f"the weights of {source} are corrupt or incomplete ({e}): copy or download the model "
                         "again") from None


def encoder_layers(backbone: nn.Module) -> nn.ModuleList:
    """The backbone's list of transformer blocks (BERT, RoBERTa, DeBERTa, ELECTRA, ... layouts)."""
    for path in ("encoder.layer", "encoder.layers", "transformer.layer", "layers", "layer"):
        obj = backbone
        for name in path.split("."):
            obj = getattr(obj, name, None)
        if isinstance(obj, nn.ModuleList):
            return obj
    raise ValueError(f"cannot find the encoder layers of {type(backbone).__name__}")


class TextModel(nn.Module):
    """Encoder -> token states (B, S, H) -> pooling (B, D) -> head (B, num_outputs)."""

    def __init__(self, backbone: nn.Module, spec: ModelSpec, base: str = "", fam: bb.Family | None = None):
        super().__init__()
        self.spec = spec
        self.backbone = backbone
        self.base = base  # a LoRA model's base (hub id or folder), recorded by save()
        self.decoder = (fam or bb.family_of(backbone.config)).decoder
        _drop_pooler(backbone)
        hidden = backbone.config.hidden_size
        self.layer_mix = LayerMix(spec.layers) if spec.layers > 1 else None
        kw = {"scorer": spec.attention_scorer} if "attention" in spec.pooling else {}
        self.pooling = build_pooling(spec.pooling, hidden, **kw)
        self.dropout = nn.Dropout(spec.head_dropout)
        # No outputs: the pooled embedding is the output (a retriever's; utils.shapes.CatalogueRows).
        self.head = nn.Linear(self.pooling.output_dim, spec.num_outputs) if spec.num_outputs else nn.Identity()
        if spec.lora_r:  # built beside a half / 4-bit base: what trains is fp32
            for module in (self.layer_mix, self.pooling, self.head):
                if module is not None:
                    module.float()

    @classmethod
    def from_backbone(
        cls,
        name_or_dir: str,
        spec: ModelSpec,
        backbone_dropout: bool = False,
        reinit_layers: int = 0,
        gradient_checkpointing: bool = False,
        precision: bb.Precision | str = "fp32",
        device_map=None,
        max_memory: dict | None = None,
    ) -> TextModel:
        """Pretrained encoder or decoder (hub name or local folder) with a fresh pooling layer and
        head. With spec.lora_r, LoRA adapters on a frozen base loaded in `precision`'s weight
        dtype (utils.backbone.precision_for's, or a resolved name), or in 4-bit with spec.load_in_4bit;
        `device_map` (accelerate's: {"": 1}, or "auto" and `max_memory` to split a model over
        GPUs) places the base as it loads."""
        config = _pretrained(AutoConfig, name_or_dir)
        source = models.resolve(name_or_dir)  # the folder of a backbone the kit has offline
        fam = bb.family_of(config)
        bb.check_pooling(spec.pooling, fam)
        if not backbone_dropout:
            # Dropout off in the backbone is reported to help regression on this task.
            for key, value in config.to_dict().items():
                if "dropout" in key and isinstance(value, float):
                    setattr(config, key, 0.0)
        # .float(): fp32 master weights whatever the checkpoint's dtype (transformers 5 loads a
        # checkpoint in the dtype it was saved in: an fp16 folder would train fp16 weights, and
        # fp16 AMP's GradScaler refuses fp16 gradients).
        kw = {"attn_implementation": fam.attention} if fam.attention else {}
        if spec.lora_r:
            precision = bb.Precision(precision) if isinstance(precision, str) else precision
            dtype = precision.weight_dtype
            kw[_DTYPE_KEY] = dtype
            if spec.load_in_4bit:
                bb.check_4bit()
                kw["quantization_config"] = bb.quantization_config(precision)
                device_map = device_map or {"": torch.cuda.current_device()}
            if device_map is not None:
                from transformers.utils import is_accelerate_available

                if not is_accelerate_available():  # transformers' own floor for device_map
                    raise ValueError("placing a model on GPUs as it loads (4-bit, or split across GPUs) needs "
                                     "a newer accelerate than this one: pip install -U accelerate")
                kw["device_map"] = device_map
                if max_memory:
                    kw["max_memory"] = max_memory
            with quiet_head_report(), readable_weights(source):
                backbone = AutoModel.from_pretrained(source, config=config, **kw)
            if device_map is None:
                backbone = backbone.to(dtype)
            targets = bb.lora_targets(spec.lora_targets, fam)
            backbone = bb.add_lora(backbone, spec.lora_r, spec.lora_alpha or 2 * spec.lora_r,
                                   spec.lora_dropout, targets)
            for p in backbone.parameters():
                if p.requires_grad:  # the adapters train in fp32 on a half base
                    p.data = p.data.float()
        else:
            with quiet_head_report(), readable_weights(source):
                backbone = AutoModel.from_pretrained(source, config=config, **kw).float()
        if reinit_layers > 0:
            std = getattr(config, "initializer_range", 0.02)
            for layer in encoder_layers(backbone)[-reinit_layers:]:
                layer.apply(lambda m: _reinit(m, std))
        if gradient_checkpointing:
            # use_reentrant=False works with DDP and with frozen inputs.
            backbone.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False}
            )
        model = cls(backbone, spec, base=str(name_or_dir), fam=fam)
        if device_map is not None:  # the pooling and head beside the backbone's first weights
            first = next(backbone.parameters()).device
            for module in (model.layer_mix, model.pooling, model.head):
                if module is not None:
                    module.to(first)
        return model

    def forward(self, input_ids, attention_mask, return_weights: bool = False):
        """(B, S) ids and mask -> (B, num_outputs), or the (B, D) pooled embedding when the spec has
        no outputs; with return_weights also (B, S) token weights."""
        # A decoder counts positions from each row's first real token: left padding computes
        # what right padding does.
        positions = {"position_ids": bb.position_ids(attention_mask)} if self.decoder else {}
        out = self.backbone(
            input_ids=input_ids,
            attention_mask=attention_mask,
            output_hidden_states=self.layer_mix is not None,
            **positions,
        )
        if self.layer_mix is None:
            states = out.last_hidden_state  # (B, S, H)
        else:
            states = self.layer_mix(out.hidden_states[-self.spec.layers :])
        weights = None
        if return_weights:
            if "attention" not in self.spec.pooling:
                raise ValueError(f"pooling {self.spec.pooling!r} has no token weights")
            pooled, weights = self.pooling(states, attention_mask, return_weights=True)
        else:
            pooled = self.pooling(states, attention_mask)
        # The head runs outside autocast, in its own dtype (fp32 unless the model was .half()'d):
        # under bf16 AMP a bf16 output would round every prediction to 8 significant bits
        # (steps of 0.008 near |target| = 1, on a metric where 0.005 matters).
        with torch.autocast(device_type=pooled.device.type, enabled=False):
            if self.spec.num_outputs:
                preds = self.head(self.dropout(pooled).to(self.head.weight.dtype))
            else:
                preds = pooled.float()
        return (preds, weights) if return_weights else preds

    def save(self, folder, tokenizer, extra: dict | None = None, half: bool = False) -> None:
        """Write a self-contained model folder (weights in fp16 when `half`); a LoRA model's
        holds only the trained parameters and the record of its base model.

        Wrap in `files.atomic_dir` when the folder must appear whole or not at all.
        """
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        state, extra = {}, dict(extra or {})
        trained = bb.trainable_names(self) if self.spec.lora_r else None
        if trained is not None and "base" not in extra:
            extra["base"] = bb.base_record(self.base)
        if "tokenizer" not in extra:  # what the fold was tokenized with (a copy keeps the original's)
            extra["tokenizer"] = tokenizer_identity(tokenizer)
        for k, v in self.state_dict().items():
            if trained is not None and k not in trained:
                continue
            v = v.detach().to("cpu")
            state[k] = (v.half() if half and v.is_floating_point() else v).contiguous().clone()
        save_file(state, str(folder / WEIGHTS))
        self.backbone.config.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        write_record(folder, self.spec, extra)

    @classmethod
    def load(cls, folder, device="cpu", base: str | None = None, precision: str = "auto",
             split=None) -> tuple[TextModel, object]:
        """(model in eval mode, tokenizer) from a folder written by `save`: load_fold's model on
        `device` (`split`: a LoRA fold's base spread over {device: max memory})."""
        fold = load_fold(folder, device, base, precision, split=split)
        return fold.model, fold.tokenizer


# ----------------------------------------------------------------------------- a trained fold, loaded

# What a model may take of a GPU's memory to run inference there whole (the rest: activations).
FITS_ONE_GPU = 0.7


@dataclass(frozen=True)
class LoadedFold:
    """A trained fold ready to predict: its record, its model (a replica per device), its
    tokenizer and the precision it runs in there."""

    record: FoldRecord
    models: tuple  # TextModel in eval mode, one per device
    tokenizer: object
    precision: bb.Precision
    devices: tuple  # torch.device of each model (a split model: its first)

    @property
    def model(self) -> TextModel:
        return self.models[0]


def load_fold(folder, device=None, base: str | None = None, precision: str = "auto", devices=None,
              split=None) -> LoadedFold:
    """A fold folder written by TextModel.save, loaded in one walk down, each step asked once:
    its files (check_model_dir), its record (utils.fold), the backbone's config and family,
    where it runs (`devices`: a replica on each; `device`: there; neither: placement's choice
    over the GPUs), the precision (utils.backbone.precision_for: the one rule), a LoRA fold's
    base model (utils.backbone.find_base: `base`, $KIT_BASE_MODEL, the recorded one, an attached
    Kaggle Model), the weights, then the tokenizer. Needs no network."""
    folder = Path(folder)
    check_model_dir(folder)
    record = read_fold(folder)
    config = AutoConfig.from_pretrained(folder)
    fam = bb.family_of(config)
    if devices:
        places = [torch.device(d) for d in devices]
    elif split is not None:
        places = [torch.device(device or "cpu")]
    else:
        places, split = placement(record, config, device)
    prec = bb.precision_for(precision, fam, places[0].type, training=False)
    base_dir = None
    if record.spec.lora_r:
        if not record.base:
            raise ValueError(f"{folder / KIT_CONFIG} is a LoRA fold without its base model's record")
        base_dir = bb.find_base(record.base, base)
    tokenizer = load_tokenizer(folder)
    check_tokenization(record, tokenizer)
    state = _read_weights(folder)
    models = tuple(_fold_model(record, config, fam, base_dir, prec, state, place, split) for place in places)
    return LoadedFold(record, models, tokenizer, prec, tuple(places))


def placement(record: FoldRecord, config, device=None) -> tuple[list, dict | None]:
    """Where a fold's model runs: ([device], None) for a given device or one GPU (or none);
    on several GPUs (Kaggle's T4 x2), a replica on each when the model fits one GPU
    (data-parallel), else ([first GPU], {gpu: memory}): the model split across them."""
    if device is not None or torch.cuda.device_count() < 2:
        return [torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))], None
    gpus = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
    memory = min(torch.cuda.get_device_properties(g).total_memory for g in gpus)
    if model_bytes(record, config) < FITS_ONE_GPU * memory:
        return gpus, None
    return gpus[:1], {g.index: int(0.85 * torch.cuda.get_device_properties(g).total_memory) for g in gpus}


def model_bytes(record: FoldRecord, config) -> float:
    """Bytes a fold's model takes on a GPU for inference: its backbone's parameters in the
    dtype it loads in (fp32 for a full fold, half for a LoRA fold's base, about 0.53 bytes per
    Linear weight in 4-bit), counted from its config without loading it."""
    total, linear = bb.count_parameters(config)
    if not record.lora:
        return 4.0 * total
    return bb.weight_bytes(total, linear, "fp16", record.spec.load_in_4bit)


def _read_weights(folder: Path) -> dict:
    try:
        return load_file(str(folder / WEIGHTS))
    except Exception as e:  # safetensors' own error type: a truncated or corrupt file
        raise ValueError(f"{folder / WEIGHTS} is corrupt or incomplete ({e})") from None


def _fold_model(record: FoldRecord, config, fam: bb.Family, base_dir, prec: bb.Precision, state: dict, place,
                split) -> TextModel:
    """The fold's model on `place`, its weights in, in eval mode: the backbone built from its
    config (a LoRA fold: its base loaded in `prec`'s weight dtype on a GPU, fp32 off it, and
    the adapters), `state` loaded (fp16-saved weights are cast to the model's dtype)."""
    spec = record.spec
    if spec.lora_r:
        device_map = "auto" if split else {"": place.index or 0} if spec.load_in_4bit and place.type == "cuda" else None
        model = TextModel.from_backbone(str(base_dir), spec, precision=prec, device_map=device_map, max_memory=split)
        model.base = record.base["model"]
    else:
        model = TextModel(AutoModel.from_config(config), spec, fam=fam)
    weights = record.folder / WEIGHTS
    try:
        if spec.lora_r:  # the trained parameters only: exactly those, no base weight
            expected = bb.trainable_names(model)
            if set(state) != expected:
                odd = sorted(set(state) ^ expected)
                raise RuntimeError(f"{len(odd)} parameters differ from the adapters built, e.g. {odd[0]}")
            model.load_state_dict(state, strict=False)
        else:
            model.load_state_dict(state, strict=True)
    except RuntimeError as e:  # weights from another model than config.json / kit_config.json
        first = str(e).strip().splitlines()[0]
        raise ValueError(f"{weights} does not match the folder's configs ({first})") from None
    if not spec.load_in_4bit and not split:  # a 4-bit or split base is placed as it loads
        model = model.to(place)
    return model.eval()


def check_model_dir(folder) -> None:
    """Raise a clear error when a model folder is missing or incomplete."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"model folder not found: {folder}")
    missing = [f for f in FILES_NEEDED if not (folder / f).is_file()]
    if not any((folder / f).is_file() for f in VOCAB_FILES) and not list(folder.glob("*.model")):
        missing.append(f"the tokenizer vocabulary ({' or '.join(VOCAB_FILES[:3])})")
    if missing:
        raise FileNotFoundError(f"model folder {folder} is incomplete: missing {', '.join(missing)}")


def _pretrained(auto_cls, name_or_dir: str):
    """`auto_cls.from_pretrained(name_or_dir)`, with "model not found: NAME" for a missing model."""
    text = models.resolve(name_or_dir)  # a backbone the kit has offline: its folder
    path = Path(text).expanduser()
    # A hub id is "name" or "org/name"; anything else that is not on disk is a mistyped path.
    looks_like_path = path.is_absolute() or text.startswith(("./", "../", "~")) or text.count("/") > 1
    if looks_like_path and not path.exists():
        raise FileNotFoundError(f"model not found: {text} (no such folder)")
    kw = {}
    if path.is_dir():
        bb.check_floor(_model_type(path), str(path))
        if auto_cls is AutoTokenizer:
            check_tokenizer_files(path)
            kw = _read_as_4x(path)
    try:
        return auto_cls.from_pretrained(text, **kw)
    except ValueError as e:
        # a hub model of a family newer than this transformers ("has model type `modernbert` but
        # Transformers does not recognize this architecture"): the release it needs
        unknown = re.search(r"model type `([\w-]+)`", str(e))
        if unknown:
            bb.check_floor(unknown.group(1), text)
        # transformers 5.x saves a generic fast tokenizer as class "TokenizersBackend", which 4.x
        # does not know; its tokenizer.json is all that a fast tokenizer needs.
        if auto_cls is not AutoTokenizer or not (path / "tokenizer.json").is_file():
            raise
        from transformers import PreTrainedTokenizerFast

        return PreTrainedTokenizerFast.from_pretrained(text, **kw)
    except OSError as e:
        if path.is_dir():
            raise  # a local folder without config.json / tokenizer files: transformers names them
        first = str(e).strip().split("\n")[0][:160]
        hint = models.how_to_get(text)
        raise FileNotFoundError(
            f"model not found: {text} (not a local folder, and the Hugging Face hub could not "
            f"provide it: {first})" + (f"; to have it offline: {hint}" if hint else "")
        ) from None


def _read_as_4x(folder: Path) -> dict:
    """What transformers 4.x needs to read a tokenizer transformers 5 saved: 5 writes its
    `extra_special_tokens` as a list (the special tokens, also in tokenizer.json), which 4.x takes
    for a dict of named tokens and fails on; {} there leaves them to tokenizer.json."""
    if _TRANSFORMERS_MAJOR >= 5:
        return {}
    try:
        from transformers.tokenization_utils_base import TOKENIZER_CONFIG_FILE

        extra = json.loads((folder / TOKENIZER_CONFIG_FILE).read_text()).get("extra_special_tokens")
    except (OSError, ValueError, AttributeError):
        return {}
    return {"extra_special_tokens": {}} if isinstance(extra, list) else {}


def _model_type(folder: Path) -> str:
    try:
        return str(json.loads((folder / BACKBONE_CONFIG).read_text()).get("model_type", ""))
    except (OSError, ValueError, AttributeError):
        return ""  # no or an unreadable config.json: transformers says so where it matters


# A tokenizer's vocabulary, in any of the layouts models are published in: a fast tokenizer's
# tokenizer.json, WordPiece's vocab.txt, BPE's vocab.json (+ merges.txt), a SentencePiece model
# (spm.model, sentencepiece.bpe.model, tokenizer.model, spiece.model, ...), tiktoken's file.
SPM_GLOB = "*.model"


def check_tokenizer_files(folder: Path) -> None:
    """A model folder's tokenizer, checked before transformers loads it, each failure one line naming
    the folder or file: no vocabulary at all (transformers 5 then builds a tokenizer of the special
    tokens alone, and every word becomes [UNK]); a SentencePiece model to convert at load (no
    tokenizer.json: DeBERTa-v3's hub layout) without sentencepiece or protobuf installed (transformers
    5 falls back to tiktoken and says to install that), or unreadable (a truncated download)."""
    spm_files = sorted(folder.glob(SPM_GLOB))
    has = [f for f in VOCAB_FILES if (folder / f).is_file()] + [f.name for f in spm_files]
    has += [f.name for f in folder.glob("*.tiktoken")]
    if not has:
        raise ValueError(f"model folder {folder} has no tokenizer vocabulary (tokenizer.json, vocab.txt, vocab.json "
                         "or a SentencePiece .model file): every word would be unknown; copy the model's tokenizer "
                         "files into it")
    if (folder / "tokenizer.json").is_file() or not spm_files:
        return
    fam = bb.FAMILIES.get(_model_type(folder))
    what = f"{folder}'s tokenizer ({fam.title or fam.name if fam else 'a SentencePiece model'}, converted from " \
           f"{spm_files[0].name} at load)"
    bb.check_packages(bb.SENTENCEPIECE, what)
    import sentencepiece

    for f in spm_files:
        try:
            sentencepiece.SentencePieceProcessor(model_file=str(f))
        except Exception as e:  # sentencepiece's own RuntimeError / OSError
            first = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
            raise ValueError(f"{f} is unreadable (not a SentencePiece model: {first}): copy or download the model "
                             "again") from None


def load_tokenizer(name_or_dir: str):
    """Tokenizer by hub name or folder (always from_pretrained: in transformers 5.x a fast
    tokenizer class built from a vocab file alone is silently ignored), with a pad token
    (utils.backbone.prepare_tokenizer: a decoder's own unknown or end-of-text token). A folder's
    tokenizer files are checked first (check_tokenizer_files); a tokenizer with no word beyond
    its special tokens is refused in one line."""
    try:
        tok = _pretrained(AutoTokenizer, name_or_dir)
    except (ValueError, ImportError, AttributeError) as e:
        # a hub model's SentencePiece tokenizer without its packages: transformers 5 asks for tiktoken,
        # 4.57 fails on the missing slow tokenizer's vocab_file ("'NoneType' object has no attribute
        # 'endswith'"); a folder's files were checked before the load
        folder = Path(models.resolve(name_or_dir)).expanduser().is_dir()
        words = ("tiktoken", "protobuf", "sentencepiece", "SentencePiece", "endswith")
        if not folder and any(w in str(e) for w in words):
            bb.check_packages(bb.SENTENCEPIECE, f"the tokenizer of {name_or_dir} (a SentencePiece model)")
        raise
    if not set(tok.get_vocab()) - set(tok.all_special_tokens):
        raise ValueError(f"the tokenizer of {name_or_dir} has no vocabulary beyond its special tokens: every word "
                         "would be unknown; its tokenizer files are missing or empty")
    return bb.prepare_tokenizer(tok)


# Texts whose ids and offsets identify a tokenization: spaces, tabs and new lines, accents,
# numbers, a tweet's and a clinical note's marks, and a pair.
PROBE = ("The cat sat on a mat.", "  Two  spaces,\tthen a tab\nand a new line ",
         "Caf\u00e9 na\u00efve 13,000 #fire @user", "17 y/o male c/o chest pain x2 days; denies fever.")


def tokenizer_identity(tokenizer) -> dict:
    """What a fold was tokenized with: the tokenizer's class, transformers' and tokenizers' versions,
    and the ids (and, for a fast tokenizer, character offsets) it gives PROBE's texts and a pair.
    Two tokenizers that agree on these are taken as one."""
    import tokenizers
    import transformers

    fast = bool(getattr(tokenizer, "is_fast", False))
    probe = []
    for first, second in [(t, None) for t in PROBE] + [(PROBE[0], PROBE[3])]:
        enc = tokenizer(first, second, return_offsets_mapping=fast, verbose=False)
        probe.append({"ids": list(enc["input_ids"]),
                      "offsets": [list(o) for o in enc["offset_mapping"]] if fast else None})
    return {"class": type(tokenizer).__name__, "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__, "probe": probe}


def check_tokenization(record: FoldRecord, tokenizer) -> None:
    """The fold's tokenizer as loaded here gives the ids and offsets it was trained with, or one line
    saying what differs: transformers 5 rebuilt SentencePiece tokenizers (DeBERTa-v3, XLM-R) with
    another normalizer, so a fold trained on 4.x and predicted on 5.x (or the other way) may see other
    tokens, and its predictions would silently mix two tokenizations. Offsets count for a span task
    only (they place its answers: 4.x's XLM-R offsets hold the space before a word, 5's do not). A
    fold saved before folds recorded it is not checked."""
    saved = record.saved.get("tokenizer")
    if not isinstance(saved, dict) or not saved.get("probe"):
        return
    spans = bool(getattr(record.competition, "span_task", False))
    mine = tokenizer_identity(tokenizer)
    for k, (a, b) in enumerate(zip(saved["probe"], mine["probe"])):
        offsets = spans and a["offsets"] and a["offsets"] != b["offsets"]
        what = "ids" if a["ids"] != b["ids"] else "offsets" if offsets else ""
        if what:
            text = PROBE[k] if k < len(PROBE) else f"{PROBE[0]} + {PROBE[3]}"
            raise ValueError(
                f"{record.folder}: its tokenizer gives other {what} here than when the fold was trained ({text!r}: "
                f"trained with {saved.get('class')}, transformers {saved.get('transformers')}, tokenizers "
                f"{saved.get('tokenizers')}; here {mine['class']}, transformers {mine['transformers']}, tokenizers "
                f"{mine['tokenizers']}): predict with the versions it was trained with, or train it again here")


def max_positions(name_or_dir: str) -> int | None:
    """How many tokens the backbone takes (its absolute position embeddings, less RoBERTa's and
    MPNet's padding offset); None when it has no such limit (relative positions, e.g. DeBERTa-v3)."""
    config = _pretrained(AutoConfig, name_or_dir)
    n = getattr(config, "max_position_embeddings", None)
    if not n or getattr(config, "position_biased_input", True) is False:
        return None
    if bb.family_of(config).positions_after_pad or "roberta" in str(getattr(config, "model_type", "")):
        n -= (getattr(config, "pad_token_id", 1) or 1) + 1  # positions start after the pad id
    return int(n)
