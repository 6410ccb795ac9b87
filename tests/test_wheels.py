"""utils.wheels.ensure in a fresh venv, offline: installs a pinned package and its dependency from a
local wheels folder when it is missing or another version, does nothing when it is there, and
says how to get it when no wheel is available. (The EDA notebook's setup cell calls it for textstat.)"""

import base64
import hashlib
import subprocess
import sys
import venv
import zipfile

import pytest
from conftest import ROOT

from utils.wheels import ensure


def make_wheel(folder, name, version, requires=()):
    """A minimal pure-Python wheel of module `name` (whose VERSION is `version`)."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\n",
        f"{dist}/METADATA": "Metadata-Version: 2.1\n"
        f"Name: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join([*record, f"{dist}/RECORD,,"]) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for p, text in files.items():
            z.writestr(p, text)
    return path


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    """A venv with pip and nothing else (no textstat, no kit dependencies)."""
    d = tmp_path_factory.mktemp("venv")
    venv.create(d, with_pip=True)
    return d / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")


def run_ensure(python, name, version, wheels):
    """ensure(name, version, wheels) inside `python`, then the version it imports (or the error)."""
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from utils.wheels import ensure\n"
        "try:\n"
        f"    print(ensure({name!r}, {version!r}, {wheels!r}))\n"
        "except ImportError as e:\n"
        "    print('ImportError:', e); raise SystemExit(0)\n"
        f"import {name}; print('imported', {name}.VERSION)\n"
    )
    res = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.strip().splitlines()


def test_ensure_installs_missing_or_other_version_from_wheels_offline(bare_python, tmp_path):
    wheels, old = tmp_path / "wheels", tmp_path / "old"
    make_wheel(wheels, "kitfake", "0.7.8", requires=["kitfakedep"])
    make_wheel(wheels, "kitfakedep", "1.0")
    make_wheel(old, "kitfake", "0.1.0")

    # Missing and no wheels folder (or one without its wheel): an error saying what to do.
    msg = run_ensure(bare_python, "kitfake", "0.7.8", None)
    assert msg[0].startswith("ImportError: kitfake 0.7.8 is needed (installed: none)")
    assert "pip install kitfake==0.7.8" in msg[0] and "wheels/ folder" in msg[0]
    msg = run_ensure(bare_python, "kitfake", "0.7.8", str(old))
    assert msg[0].startswith("ImportError:") and "has no kitfake-0.7.8-*.whl" in msg[0]

    # Missing: installed, with its dependency, from the folder (pip --no-index: no network).
    msg = run_ensure(bare_python, "kitfake", "0.7.8", str(wheels))
    assert msg == [f"kitfake 0.7.8 installed from {wheels} (was: none)", "imported 0.7.8"]
    run = subprocess.run([str(bare_python), "-c", "import kitfakedep"], capture_output=True)
    assert run.returncode == 0

    # Already there: nothing to do, even without a folder.
    assert run_ensure(bare_python, "kitfake", "0.7.8", None)[0] == "kitfake 0.7.8 already installed"

    # Another version installed: replaced by the pinned one.
    pip = [str(bare_python), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(old)]
    subprocess.run([*pip, "kitfake==0.1.0"], check=True, capture_output=True)
    msg = run_ensure(bare_python, "kitfake", "0.7.8", str(wheels))
    assert msg == [f"kitfake 0.7.8 installed from {wheels} (was: 0.1.0)", "imported 0.7.8"]


def test_ensure_is_a_no_op_for_the_installed_version():
    import importlib.metadata

    version = importlib.metadata.version("numpy")
    assert ensure("numpy", version, None) == f"numpy {version} already installed"
