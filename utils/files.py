"""Files on disk: atomic writes (every file and folder the kit produces appears whole or not at
all) and a run folder's finished folds."""

from __future__ import annotations

import contextlib
import csv
import functools
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

# A fold folder's files (utils.model writes them, utils.fold reads them).
KIT_CONFIG = "kit_config.json"  # the kit's record: model spec, training settings, competition, base
WEIGHTS = "kit_model.safetensors"
BACKBONE_CONFIG = "config.json"  # the backbone's architecture, in a model folder as in a hub model's
FILES_NEEDED = (KIT_CONFIG, WEIGHTS, BACKBONE_CONFIG, "tokenizer_config.json")
# A span task's fold keeps its out-of-fold character scores here (utils.outputs.SpansOutputs).
CHARS = "chars.npz"
# A run's out-of-fold rows, and each fold folder's own (utils.runs).
OOF = "oof.csv"
# An oof.csv cell reading "NA", "None" or "null" is that text (a label, a span task's answer); only an
# empty cell is missing.
TEXTS_AS_WRITTEN = {"keep_default_na": False, "na_values": [""]}
# The files of a base model that decide what it computes (a LoRA fold records their sha256).
BASE_FILES = (BACKBONE_CONFIG, "*.safetensors", "*.bin")
# A saved tokenizer also needs its vocabulary: tokenizer.json (fast) or a slow tokenizer's file.
VOCAB_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spm.model", "sentencepiece.bpe.model")


@contextlib.contextmanager
def atomic_file(path):
    """Yield a temp path beside `path` to write; on success it replaces `path` in one rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o644)  # mkstemp's 0600 would survive the rename
    try:
        yield Path(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)  # atomic on POSIX and Windows
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


def _atomic_file(path, write) -> None:
    with atomic_file(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
        write(f)


def write_json(path, obj) -> None:
    """Write JSON atomically (temp file + rename)."""
    _atomic_file(path, lambda f: json.dump(obj, f, indent=2, default=str))


def read_oof_csv(path):
    """An oof.csv (a run's or a fold folder's) as written: ids and texts as text."""
    import pandas as pd

    return pd.read_csv(path, dtype={"id": str}, **TEXTS_AS_WRITTEN)


def write_csv(path, df) -> None:
    """Write a DataFrame as CSV (no index) atomically. Lines end in "\n"; where a text holds a
    carriage return (which the csv module quotes only when it ends lines), every text is quoted,
    so the file reads back as written."""
    texts = df.select_dtypes(include=["object", "string"])
    cr = any(texts[c].astype(str).str.contains("\r", regex=False).any() for c in texts.columns)
    quoting = csv.QUOTE_NONNUMERIC if cr else csv.QUOTE_MINIMAL
    _atomic_file(path, lambda f: df.to_csv(f, index=False, lineterminator="\n", quoting=quoting))


@contextlib.contextmanager
def atomic_dir(path):
    """Yield a temp folder beside `path`; on success it replaces `path`: the old folder is renamed
    aside (.NAME.old), the new one renamed into place, then the old one removed. A kill at any
    point leaves the old folder or the new one, never neither: `recover` puts the old one back
    when the kill fell between the two renames."""
    path = recover(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    os.chmod(tmp, 0o755)  # mkdtemp's 0700 would survive the rename
    old = _aside(path)
    try:
        yield tmp
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _aside(path: Path) -> Path:
    return path.with_name(f".{path.name}.old")


def recover(path) -> Path:
    """`path`, with the folder atomic_dir had renamed aside put back when a kill fell between its
    two renames (the new folder never arrived)."""
    path = Path(path)
    old = _aside(path)
    if old.is_dir() and not path.exists():
        os.replace(old, path)
    return path


def fold_dirs(run, required: bool = True) -> list:
    """A run's finished fold folders (fold0, fold1, ...; a fold folder appears only when complete),
    in fold order; with `required`, an error naming the run when there is none."""
    run = Path(run)
    if required and not run.is_dir():
        raise FileNotFoundError(f"run folder not found: {run}")
    found = sorted((p for p in run.glob("fold[0-9]*") if p.is_dir()), key=lambda p: int(p.name[4:]))
    if required and not found:
        raise FileNotFoundError(f"run folder {run} has no finished fold (fold0/, fold1/, ...)")
    return found


def run_names(runs) -> list:
    """The runs' folder names, which name them as blend members (oof columns, blend.json); an
    error when two runs share one (`runs/a/s42`, `runs/b/s42`, or one run given twice)."""
    names, seen = [], {}
    for run in runs:
        name = Path(run).name
        if name in seen:
            what = ("is given twice" if Path(seen[name]).resolve() == Path(run).resolve()
                    else f"and {seen[name]} share the folder name {name!r}")
            raise ValueError(f"run {run} {what}: blend members are named by their folder, "
                             "so each run needs a folder name of its own")
        seen[name] = run
        names.append(name)
    return names


# A model folder's files that shape what it computes: config, weights, tokenizer.
MODEL_FILES = ("*.json", "*.safetensors", "*.bin", "*.model", "*.txt")


@functools.lru_cache(maxsize=64)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    # Keyed by size and mtime too: a file rewritten in place is hashed again.
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path) -> str:
    """sha256 of a file's content (cached while its size and mtime stay the same)."""
    st = Path(path).stat()
    return _file_sha256(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)


def content_sha256(path) -> str | None:
    """What a run was given, by content: a file's sha256; a local model folder's, over its
    config, weight and tokenizer files (names and contents); None for a hub name or no path."""
    path = Path(path) if path else None
    if path is None or not path.exists():
        return None
    if path.is_file():
        return file_sha256(path)
    files = sorted({f for pattern in MODEL_FILES for f in path.glob(pattern) if f.is_file()})
    digest = hashlib.sha256()
    for f in files:
        digest.update(f"{f.name}\0{file_sha256(f)}\0".encode())
    return digest.hexdigest()
