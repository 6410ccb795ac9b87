"""Offline installs from a folder of wheels: an internet-off Kaggle kernel gets a pinned package
(textstat for the EDA) from the kit's code dataset. Standard library only: it runs before the
package it installs exists.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys
from pathlib import Path

WHEELS_DIR = "wheels"  # the folder of wheels inside the kit's code dataset


def installed_version(name: str) -> str | None:
    """The installed version of distribution `name`, or None."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def ensure(name: str, version: str, wheels=None) -> str:
    """Make `name==version` importable: a no-op when installed, else `pip install --no-index` from
    the folder `wheels` (which holds its wheel and those of its missing dependencies).

    Returns what it did, one line; an ImportError saying how to get the package when it is missing
    (or another version) and `wheels` has no wheel of it; a RuntimeError with pip's error if pip fails.
    """
    found = installed_version(name)
    if found == version:
        return f"{name} {version} already installed"
    folder = Path(wheels) if wheels else None
    # Wheel file names spell the project name with underscores (PEP 427), in any case.
    stem = f"{name.replace('-', '_').lower()}-{version}-"
    if folder is None or not any(p.name.lower().startswith(stem) for p in folder.glob("*.whl")):
        where = f"{folder} has no {stem}*.whl" if folder else "no wheels folder was given"
        raise ImportError(
            f"{name} {version} is needed (installed: {found or 'none'}) and {where}: "
            f"pip install {name}=={version}, or attach the kit's code dataset (its "
            f"{WHEELS_DIR}/ folder) to the Kaggle kernel"
        )
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-index",
        "--find-links",
        str(folder),
        "--disable-pip-version-check",
        "--no-input",
        "-q",
        f"{name}=={version}",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        tail = " | ".join((res.stderr or res.stdout).strip().splitlines()[-5:])
        raise RuntimeError(f"pip could not install {name}=={version} from {folder}: {tail}")
    importlib.invalidate_caches()  # this process must see the new site-packages entries
    if name in sys.modules and found is not None:
        raise RuntimeError(
            f"{name} {found} was already imported: restart the kernel to use {version}"
        )
    return f"{name} {version} installed from {folder} (was: {found or 'none'})"
