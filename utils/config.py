"""The one training configuration: a frozen dataclass, every default visible here."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from .cli import HelpFormatter, cli_error  # noqa: F401 (cli_error: re-exported)
from .competition import (
    BUILTIN,
    DEFAULT,
    LONG_TEXT,
    Competition,
    described,
    from_settings,
    load_competition,
)
from .files import content_sha256, file_sha256  # noqa: F401 (re-exported)
from .objective import OBJECTIVES, REGRESSION, objective_of, signal_not_made
from .pooling import NO_POOLING, POOLING_MODES
from .tables import catalogue_path, join_path

# Without --competition, the column flags' defaults are the default competition's (CommonLit).
_DEFAULT = BUILTIN[DEFAULT]

LOSSES = ("mse", "rmse", "se")
PRECISIONS = ("auto", "fp32", "fp16", "bf16")


@dataclass(frozen=True)
class TrainConfig:
    # --- data ---
    train_csv: str = ""  # competition train.csv (required)
    out: str = ""  # run folder: fold{k}/, folds.csv, oof.csv, metrics.json (required)
    # A built-in slug or a competition.json: columns, input text, targets, task, metric, folds, fit
    # (python -m utils.competition show). Empty: the column flags (Columns) describe the data.
    competition: str = ""  # built-in slug or competition.json (empty: the column flags below)
    num_labels: int = 0  # classification: number of classes (0 = infer from the data)
    max_rows: int = 0  # >0: train on a random subsample of this many rows (demo, smoke runs)
    drop_reference: bool = False  # leave out the reference row (target 0, se 0) everywhere
    # --- model ---
    model: str = ""  # hub name or local folder of any AutoModel encoder (required)
    pooling: str = "attention"  # attention | mean | max | cls | last (a decoder's last real token) | attention+mean
    attention_scorer: str = "mlp"  # mlp = Linear(H,H)-Tanh-Linear(H,1); linear = Linear(H,1)
    layers: int = 1  # pool a learned mix of the last N hidden layers
    backbone_dropout: bool = False  # off by default: reported to help regression on this task
    head_dropout: float = 0.0  # dropout before the head
    reinit_layers: int = 0  # re-initialise the top k encoder layers
    head_bias_mean: bool = False  # the head's bias starts at the labelled training rows' mean
    #   (log class shares), not near 0
    gradient_checkpointing: bool = False  # trade compute for memory (large models on a T4)
    lora_r: int = 0  # >0: LoRA adapters of this rank on a frozen backbone (decoder LLMs; needs peft);
    #   0: the whole backbone trains
    lora_alpha: float = 0.0  # LoRA scale numerator (0: 2 x lora_r)
    lora_dropout: float = 0.05  # dropout on LoRA's input
    lora_targets: tuple = ()  # module names LoRA adapts, or all-linear (empty: the family's defaults,
    #   utils.backbone.FAMILIES)
    load_in_4bit: bool = False  # QLoRA: the frozen backbone in 4-bit NF4 (CUDA and bitsandbytes; with lora_r)
    max_len: int = 256  # tokens per text, special tokens included (at most the backbone's)
    fit: str = ""  # a longer text: head = first tokens; head_tail = first quarter + end; windows =
    #   overlapping windows, predictions averaged (empty: the competition's)
    # --- folds ---
    folds: int = 5  # K of K-fold cross-validation
    fold_seed: int = 42  # folds depend only on the data and this, never on `seed`
    folds_csv: str = ""  # reuse a given id,fold assignment
    # --- optimisation ---
    seed: int = 42  # each fold is seeded with seed + fold at its start
    epochs: int = 3  # passes over each fold's training rows
    max_steps: int = 0  # >0: stop each fold after this many optimizer steps
    batch_size: int = 16  # texts per micro-batch (per process)
    eval_batch_size: int = 64  # texts per batch when validating
    grad_accum: int = 1  # micro-batches per optimizer step
    lr: float = 2e-5  # encoder learning rate (top layer)
    head_lr: float = 1e-3  # pooling + layer mix + head
    llrd: float = 1.0  # layer-wise decay: layer i from the top gets lr * llrd**i (1 = off)
    weight_decay: float = 0.01  # AdamW's, not on biases and norms
    warmup: float = 0.06  # fraction of steps of linear warmup, then cosine decay
    max_grad_norm: float = 1.0  # 0 = no clipping
    ema: float = 0.0  # >0: validate and keep an exponential moving average of the weights, this decay (e.g. 0.999)
    loss: str = "mse"  # mse | rmse | se (standard-error-aware: the competition's standard_error_col)
    min_se: float = 0.05  # clamp tiny standard errors (the reference row has 0)
    precision: str = "auto"  # auto = bf16/fp16 AMP on CUDA, fp32 on CPU; or fp32 | fp16 | bf16
    group_by_length: bool = True  # shuffled batches of similar length (less padding)
    # --- retrieval (a competition with a catalogue) ---
    temperature: float = 0.05  # contrastive loss: similarities over this (0.05: sentence-transformers' scale 20)
    hard_negatives: int = 1  # negatives per query in each batch, mined by the untrained model (0: in-batch only)
    # --- multiple choice (options in columns; a reranker's candidates) ---
    train_options: int = 0  # >0: a training row sees this many of its options, the true one and others drawn afresh
    options_in_text: bool = False  # each (text, option) pair's text also lists the row's every option, lettered
    # --- pseudo-labels (python -m utils.pseudo) ---
    pseudo_csv: str = ""  # extra rows for every fold's training side; fold k uses its O_fold{k} columns
    pseudo_weight: float = 1.0  # weight of a pseudo row's loss when mixed with the real rows
    pseudo_epochs: int = 0  # >0: first this many epochs on pseudo rows alone, then the real rows
    # --- distillation (python -m utils.pseudo --training-rows: a teacher's fold-matched predictions) ---
    distil_csv: str = ""  # fold k's student mixes the fold-k teachers' predictions of its rows into their targets
    distil_weight: float = 0.5  # the teacher's share of a training row's target (the label keeps 1 - it)
    distil_temperature: float = 1.0  # classes: the teacher's probabilities softened, p ** (1 / T) renormalised
    # --- evaluation ---
    eval_every: int = 40  # optimizer steps between validations (also at each epoch end)
    # Evaluate more often as RMSE falls: ((0.50, 16), (0.49, 8), (0, 1)) = every 16 steps while
    # the best RMSE >= 0.50, every 8 while >= 0.49, else every step. Empty = use eval_every.
    eval_schedule: tuple = ()
    # --- run control (not part of a run's identity) ---
    only_folds: tuple = ()  # train just these folds now; others can be added later
    overwrite: bool = False  # replace a run made with different arguments
    progress: bool = True  # tqdm bars
    num_workers: int = 0  # DataLoader worker processes
    log_with: str = ""  # accelerate trackers, e.g. tensorboard or wandb (comma-separated); logs in OUT/logs
    save_every: int = 0  # >0: also save the unfinished fold every N optimizer steps (0: at each
    #   validation only; -1: never); the same command resumes it there

    def __post_init__(self):
        for name in ("train_csv", "out", "model"):
            if not getattr(self, name):
                raise ValueError(f"TrainConfig.{name} is required")
        checks = [
            ("pooling", (*POOLING_MODES, NO_POOLING)),
            ("loss", LOSSES),
            ("precision", PRECISIONS),
            ("attention_scorer", ("mlp", "linear")),
        ]
        if self.fit and self.fit not in LONG_TEXT:
            raise ValueError(f"unknown fit {self.fit!r}; valid: {', '.join(LONG_TEXT)} (empty: the competition's)")
        for name, valid in checks:
            if getattr(self, name) not in valid:
                raise ValueError(
                    f"unknown {name} {getattr(self, name)!r}; valid: {', '.join(valid)}"
                )
        if self.max_len < 1:
            raise ValueError(f"max_len must be >= 1 token, got {self.max_len}: the model would see no text")
        if self.folds < 2:
            raise ValueError(f"folds must be >= 2, got {self.folds}")
        bad = [k for k in self.only_folds if not 0 <= k < self.folds]
        if bad:
            raise ValueError(f"only_folds {bad} outside 0..{self.folds - 1}")
        if self.layers < 1 or self.grad_accum < 1 or self.batch_size < 1:
            raise ValueError("layers, grad_accum and batch_size must be >= 1")
        if self.pseudo_epochs and not self.pseudo_csv:
            raise ValueError("--pseudo-epochs needs --pseudo-csv")
        if self.train_options < 0 or self.train_options == 1:
            raise ValueError(f"train_options must be 0 (every option) or >= 2 (the true one and others), "
                             f"got {self.train_options}")
        if not self.temperature > 0 or self.hard_negatives < 0:
            raise ValueError(f"temperature must be > 0 and hard_negatives >= 0, got {self.temperature}, "
                             f"{self.hard_negatives}")
        if self.pseudo_csv and self.loss == "se":
            raise ValueError("--pseudo-csv needs loss mse or rmse (pseudo rows have no standard error)")
        if self.lora_r < 0 or self.lora_alpha < 0 or not 0 <= self.lora_dropout < 1:
            raise ValueError("lora_r and lora_alpha must be >= 0, lora_dropout in [0, 1)")
        if self.load_in_4bit and not self.lora_r:
            raise ValueError("--load-in-4bit needs --lora-r (a 4-bit backbone is frozen: only adapters can train)")
        if self.lora_r and self.reinit_layers:
            raise ValueError("--reinit-layers with --lora-r: re-initialised layers would stay frozen")
        if not 0 <= self.distil_weight <= 1:
            raise ValueError(f"distil_weight is the teacher's share of a target, in [0, 1], got {self.distil_weight}")
        if self.distil_temperature <= 0:
            raise ValueError(f"distil_temperature must be > 0, got {self.distil_temperature}")
        if self.distil_csv and self.loss == "se":
            raise ValueError("--distil-csv needs loss mse or rmse (a teacher's prediction has no standard error)")
        if self.pseudo_weight < 0:
            raise ValueError(f"pseudo_weight must be >= 0, got {self.pseudo_weight}")
        if self.save_every < -1:
            raise ValueError(f"save_every must be >= -1 (0: at each validation only; -1: never), got {self.save_every}")
        if not 0 <= self.ema < 1:
            raise ValueError(f"ema must be in [0, 1) (0 = off; a decay such as 0.999), got {self.ema}")


RUN_CONTROL = ("only_folds", "overwrite", "progress", "num_workers", "log_with", "save_every")
# A shape's settings, by kind of rows: utils.shapes builds a shape from them, and a run's identity
# holds those of its own kind only.
SHAPE_SETTINGS = {"items": ("temperature", "hard_negatives"), "options": ("train_options", "options_in_text")}


@dataclass(frozen=True)
class Columns:
    """The data described by flags, without --competition: they build the run's Competition at the
    edge (utils.competition.from_settings), and TrainConfig never holds them."""

    text_col: str = _DEFAULT.text_cols[0]  # the column holding the text (without --competition)
    target_cols: tuple = ("target",)  # several = multi-target regression (without --competition)
    id_col: str = "id"  # the column of unique row ids (without --competition)
    task: str = REGRESSION.name  # what the model is trained as: utils.objective's names (without --competition)
    standard_error_col: str = "standard_error"  # the per-row label noise loss se reads (without --competition)

    def __post_init__(self):
        if self.task not in OBJECTIVES:
            raise ValueError(f"unknown task {self.task!r}; valid: {', '.join(OBJECTIVES)}")


DESCRIBED = tuple(f.name for f in dataclasses.fields(Columns))  # what a description sets instead


def column_flag_refused(field: str, competition: str) -> ValueError:
    """The one-line error for a column flag given with --competition (the description sets it)."""
    return ValueError(f"--{field.replace('_', '-')} comes from the competition with --competition: leave it "
                      "out, or change it in a competition.json (python -m utils.competition "
                      f"show {competition} > competition.json)")


def competition_for(cfg: TrainConfig, columns: Columns | None = None) -> Competition:
    """The run's competition, resolved once at the edge (CLI, notebook, tune): --competition's
    description, else the one the column flags describe; both at once is an error."""
    if cfg.competition:
        if columns is not None and columns != Columns():
            given = next(k for k in DESCRIBED if getattr(columns, k) != getattr(Columns(), k))
            raise column_flag_refused(given, cfg.competition)
        return load_competition(cfg.competition)
    return from_settings(dataclasses.asdict(columns or Columns()))


def for_competition(cfg: TrainConfig, comp: Competition) -> TrainConfig:
    """The config as a run records it for `comp`: --fit "" as its long_text, and `competition` the
    description itself when the column flags cannot say it (a Competition given in Python), so
    that the recorded settings name the competition they trained for."""
    obj = objective_of(comp)
    fit = obj.fit or cfg.fit or comp.long_text
    name = cfg.competition
    if not name and from_settings(described(comp)) != comp:
        name = comp.as_parameter()
    elif name and load_competition(name) != comp:
        raise ValueError(f"competition {comp.slug!r} given, but the config names {name!r}: give one of them")
    return dataclasses.replace(cfg, fit=fit, competition=name, pooling=obj.pooling or cfg.pooling)


def ignored_settings(cfg: TrainConfig, comp: Competition) -> list:
    """Notes on the settings given that `comp`'s objective replaces (a span task's pooling and fit)."""
    obj, fields = objective_of(comp), TrainConfig.__dataclass_fields__
    return [f"note: --{k.replace('_', '-')} {v} is not used: a {comp.task} model takes {k} {own!r}"
            for k, own in (("pooling", obj.pooling), ("fit", obj.fit))
            for v in [getattr(cfg, k)] if own and v and v != own and v != fields[k].default]


def check_settings(cfg: TrainConfig, comp: Competition) -> None:
    """The settings this competition cannot train with, refused in one line."""
    if cfg.loss == "se" and (objective_of(comp).kind != "values" or len(comp.target_cols) != 1):
        raise ValueError("loss 'se' needs a single regression target")
    for flag, file, signal in (("--pseudo-csv", cfg.pseudo_csv, "texts"), ("--distil-csv", cfg.distil_csv, "training")):
        if file and (why := signal_not_made(comp, signal)):
            raise ValueError(f"{flag}: {why}")
    if cfg.distil_csv and cfg.train_options:
        raise ValueError("--distil-csv with --train-options: a row seen with a few of its options drawn at random "
                         "would lose the teacher's distribution over the others; distil on every option "
                         "(--train-options 0)")
    if cfg.pooling == NO_POOLING and objective_of(comp).pooling != NO_POOLING:
        raise ValueError(f"--pooling tokens (no pooling: an output per token) is for span tasks; a {comp.task} "
                         "model pools its tokens into one vector: attention, mean, max, cls, last or attention+mean")


# What a run was given by content, not by path (identity's keys -> what a user calls them).
CONTENT_KEYS = {"train_csv_sha256": "--train-csv's content", "folds_csv_sha256": "--folds-csv's content",
                "model_sha256": "the --model folder's files", "pseudo_sha256": "--pseudo-csv's content",
                "competition_sha256": "--competition's file", "metric_sha256": "the competition's metric_file",
                "catalogue_sha256": "the catalogue file's content",
                "joins_sha256": "the tables joined onto --train-csv", "distil_sha256": "--distil-csv's content"}


def _joins_sha256(comp: Competition, train_csv) -> str:
    """One sha256 over the tables the description joins onto the training file, by name and content."""
    digest = hashlib.sha256()
    for file in sorted({file for file, *_ in comp.train_joins}):
        digest.update(f"{file}\0{content_sha256(join_path(Path(train_csv).parent, file))}\0".encode())
    return digest.hexdigest()


def identity(cfg: TrainConfig, comp: Competition) -> dict:
    """The fields that define a run: re-running with the same ones resumes it; the competition's
    columns and task among them (what runs recorded before descriptions existed). Its inputs count
    by content: the same paths holding other data (a regenerated folds file, a backbone
    pretrained again into the same folder) are another run."""
    d = dataclasses.asdict(cfg)
    for k in RUN_CONTROL:
        d.pop(k)
    kind = objective_of(comp).kind
    for k in (k for other, keys in SHAPE_SETTINGS.items() if other != kind for k in keys):
        d.pop(k)  # a retriever's settings mean nothing to other runs, and so on
    d.update(described(comp))
    d["train_csv_sha256"] = content_sha256(cfg.train_csv)
    d["folds_csv_sha256"] = content_sha256(cfg.folds_csv)
    d["model_sha256"] = content_sha256(cfg.model)  # None for a hub name: the name is the identity
    if cfg.competition and not cfg.competition.lstrip().startswith("{") and Path(cfg.competition).is_file():
        # a competition.json, by content (a description given as JSON text is its own content)
        d["competition_sha256"] = content_sha256(cfg.competition)
        if comp.metric_code:  # the metric of one's own, as read (its file may be edited between runs)
            d["metric_sha256"] = hashlib.sha256(comp.metric_code.encode()).hexdigest()
        if comp.reshape_code:  # the reshape of one's own, likewise
            d["reshape_sha256"] = hashlib.sha256(comp.reshape_code.encode()).hexdigest()
    if comp.catalogue:  # a retriever ranks the items of this file: other items are another run
        d["catalogue_sha256"] = _catalogue_sha256(comp, cfg.train_csv)
    if comp.train_joins:  # the tables joined onto each row (NBME's notes and features) are its input too
        d["joins_sha256"] = _joins_sha256(comp, cfg.train_csv)
    if cfg.pseudo_csv and Path(cfg.pseudo_csv).is_file():
        # The file's content, not just its name: a resume cannot mix two sets of pseudo-labels.
        d["pseudo_sha256"] = content_sha256(cfg.pseudo_csv)
    if cfg.distil_csv and Path(cfg.distil_csv).is_file():  # likewise: the teacher's predictions by content
        d["distil_sha256"] = content_sha256(cfg.distil_csv)
    return json.loads(json.dumps(d))  # tuples -> lists, exactly as config.json stores them


def _catalogue_sha256(comp: Competition, train_csv) -> str | None:
    """The content of the catalogue beside the train file (None: not found; reading it says so)."""
    try:
        return content_sha256(catalogue_path(comp, Path(train_csv).parent))
    except ValueError:  # a catalogue in another Kaggle dataset that is not attached
        return None


def differences(saved: dict, current: dict, limit: int = 4) -> str:
    """'' when two identities agree, else their first differing keys: 'k: saved -> current, ...'
    (a content hash is named with what changed, not its digits)."""
    keys = sorted(k for k in set(saved) | set(current) if saved.get(k) != current.get(k))
    return ", ".join(f"{k} changed ({CONTENT_KEYS[k]})" if k in CONTENT_KEYS and saved.get(k) and current.get(k)
                     else f"{k}: {saved.get(k)!r} -> {current.get(k)!r}" for k in keys[:limit])


def _schedule(text: str) -> tuple:
    """'0.50:16,0.49:8,0:1' -> ((0.5, 16), (0.49, 8), (0.0, 1))."""
    if not text:
        return ()
    try:
        pairs = [p.split(":") for p in text.split(",")]
        return tuple((float(a), int(b)) for a, b in pairs)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"bad --eval-schedule {text!r}; expected RMSE:STEPS pairs like 0.50:16,0.49:8,0:1"
        ) from None


def field_comments(cls) -> dict:
    """{field: the comment beside it in the dataclass's source}: the one place a setting is
    explained, read for --help so the help cannot drift from the code. A comment too long for one
    line goes on in the lines below it that start with "#   " (three spaces)."""
    import inspect
    import re

    out, last = {}, None
    for line in inspect.getsource(cls).splitlines():
        m = re.match(r"\s+(\w+): [^=#]+=[^#]*#\s*(.+)$", line)
        more = re.match(r"\s+#   (\S.*)$", line)
        if m:
            last = m.group(1)
            out[last] = m.group(2).strip()
        elif more and last:
            out[last] += " " + more.group(1).strip()
        else:
            last = None
    return out


def add_fields(p: argparse.ArgumentParser, cls, required=(), lists=None, special=None) -> None:
    """One flag per field of the dataclass `cls`, --kebab-case, its comment as help and its
    default shown: booleans as --x/--no-x, `lists` ({name: item type}) with nargs="+", `special`
    ({name: add_argument kwargs})."""
    lists, special = lists or {}, special or {}
    helps = field_comments(cls)
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        # "%" is argparse's format character; the default is appended by the formatter.
        text = helps.get(f.name, "").replace("%", "%%")
        if f.name in special:
            p.add_argument(flag, **{"help": text, **special[f.name]})
        elif f.name in lists:
            p.add_argument(flag, nargs="+", type=lists[f.name], default=f.default,
                           required=f.name in required, help=text)
        elif isinstance(f.default, bool):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=text)
        else:
            p.add_argument(flag, type=type(f.default), default=f.default, required=f.name in required,
                           help=text)


def build_parser() -> argparse.ArgumentParser:
    """Command-line flags generated from TrainConfig and Columns: one per field, --kebab-case."""
    p = argparse.ArgumentParser(
        prog="python -m utils.train",
        description="Train K folds of an encoder + pooling + head; resumes finished folds.",
        formatter_class=HelpFormatter,
    )
    schedule = dict(type=_schedule, default=(),
                    help="validate more often as the score falls, RMSE:STEPS pairs, e.g. "
                         "0.50:16,0.49:8,0.48:4,0:1 (empty: every --eval-every steps)")
    add_fields(p, TrainConfig, required=("train_csv", "out", "model"),
               lists={"only_folds": int, "lora_targets": str}, special={"eval_schedule": schedule})
    add_fields(p.add_argument_group("the data, without --competition"), Columns, lists={"target_cols": str})
    return p


def _flags(obj, skip=()) -> list:
    """The flags that make a dataclass's values (those that differ from its defaults)."""
    argv = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.name in skip or value == f.default and f.name not in ("train_csv", "out", "model"):
            continue
        flag = "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + flag[2:])
        elif f.name == "eval_schedule":
            argv += [flag, ",".join(f"{a:g}:{b}" for a, b in value)]
        elif isinstance(value, (tuple, list)):
            argv += [flag, *map(str, value)]
        else:
            argv += [flag, str(value)]
    return argv


def to_command(cfg: TrainConfig, comp: Competition) -> str:
    """The `python -m utils.train ...` command that makes this run (the settings that differ
    from the defaults, run control left out; the column flags when no --competition names the
    data): what a run records to be reproduced."""
    import shlex

    argv = ["python", "-m", "utils.train", *_flags(cfg, RUN_CONTROL)]
    if not cfg.competition:
        columns = {k: tuple(v) if isinstance(v, list) else v for k, v in described(comp).items()}
        argv += _flags(Columns(**columns))
    return shlex.join(argv)


def parse_args(argv=None) -> tuple[TrainConfig, Competition]:
    """Command-line arguments -> (the TrainConfig, the run's Competition, resolved here once)."""
    parser = build_parser()
    args = vars(parser.parse_args(argv))
    if args["competition"]:  # a column flag given at all (even with its default value) is refused
        for action in parser._actions:
            action.default = argparse.SUPPRESS
        given = [k for k in vars(parser.parse_args(argv)) if k in DESCRIBED]
        if given:
            raise column_flag_refused(given[0], args["competition"])
    for k in ("target_cols", "only_folds", "lora_targets"):
        args[k] = tuple(args[k])
    columns = Columns(**{k: args.pop(k) for k in DESCRIBED})
    cfg = TrainConfig(**args)
    return cfg, competition_for(cfg, columns)


def config_from_args(argv=None) -> TrainConfig:
    """Parse command-line arguments into a TrainConfig (parse_args also gives the competition)."""
    return parse_args(argv)[0]
