"""Bundle trained runs for Kaggle: the kit and the weights as datasets, the notebooks as kernels.

    python -m utils.kaggle build --runs runs/rb-attn runs/rl-attn --owner me --out bundle \
        --blend blend.json            # prints the upload, push and submit commands, in order
    python -m utils.kaggle build ... --push   # also uploads the datasets, pushes the submission
                                              # kernel and prints the submit command
    python -m utils.kaggle build ... --push --kernels train   # ... and retrains on Kaggle's GPU

Writes (each folder atomically):
    OUT/<name>-code/     the `utils` package, wheels/ (textstat for the EDA kernel, offline),
                         dataset-metadata.json
    OUT/<name>-models/   per run: fold*/ (fp16 weights by default, configs, tokenizer), oof.csv,
                         folds.csv, metrics.json, config.json; blend.json; dataset-metadata.json
    OUT/kernels/<name>-<eda|train|ensemble|submission|pseudo>/   notebook + kernel-metadata.json
Nothing touches the network without --push; `kaggle` is imported by nobody here (it
authenticates at import time): --push runs the kaggle CLI in a subprocess. Pushing a kernel runs
it (on Kaggle's GPU quota when it asks for one), so --push pushes only the submission kernel
unless --kernels names others. Needs kaggle>=1.8.4: the first release that sends
kernel-metadata.json's machine_shape and accepts `competitions submit -k -v` with `-f`.
"""

from __future__ import annotations

import argparse
import ast
import copy
import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import __version__
from .env import COMPETITION
from .files import atomic_dir, write_json
from .wheels import WHEELS_DIR

ROOT = Path(__file__).resolve().parents[1]  # the project (pyproject.toml), when run from a checkout
NOTEBOOKS = tuple(
    ROOT / "notebooks" / f
    for f in (
        "01_eda.ipynb",
        "02_train.ipynb",
        "03_ensemble.ipynb",
        "04_submission.ipynb",
        "05_pseudo.ipynb",
    )
)
# kernel-metadata.json `machine_shape` of a GPU kernel. Kaggle's only T4 offer is "GPU T4 x2" and
# "NvidiaTeslaT4" is its name: the kaggle CLI's own help for `kernels push --accelerator` says
# "'NvidiaTeslaT4' for GPU T4 x2" (kaggle 2.2), and its list of retired shapes sends the old
# "NvidiaTeslaP100" to "the default GPU (NvidiaTeslaT4)". There is no single-T4 shape, so a kernel
# asking for a GPU gets two, and the train kernel is told to use both (num_processes=T4_GPUS).
# A CPU kernel sets enable_gpu false and no machine_shape: it spends no GPU quota.
MACHINE_SHAPE = "NvidiaTeslaT4"
T4_GPUS = 2
SUBMISSION_FILE = "submission.csv"  # what the submission kernel writes; `competitions submit -f`
# "other" is always accepted by Kaggle; the kit's own license (MIT) travels as LICENSE.
DEFAULT_LICENSE = "other"
FP16_TOL = 1e-3  # max |fp16 - fp32| prediction difference a bundle may have
# A few texts to compare fp16 and fp32 weights on (any text works: only the difference matters).
CHECK_TEXTS = (
    "The cat sat on the mat while the dog ran home.",
    "Notwithstanding the aforementioned considerations, the committee deliberated extensively.",
    "Photosynthesis converts luminous energy into chemical bonds.",
)
# Files of a fold folder that inference never needs (training state), never bundled.
NOT_FOR_INFERENCE = re.compile(
    r"^(optimizer|scheduler|scaler|rng_state|trainer_state|training_args)|\.(pt|pth|ckpt|bin)$"
)
RUN_FILES = ("config.json", "oof.csv", "folds.csv", "metrics.json")
SLUG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")

# What each notebook becomes, by its name without the number: the parameters injected
# (required: the notebook's parameters cell must declare them; optional: injected when declared),
# whether it reads the models dataset, may use the internet, and runs on a GPU (T4 x2).
ROLES = {
    "eda": dict(required=("kit_dataset",), optional=(), models=False, internet=False, gpu=False),
    # Training fetches a hub backbone (internet on) and trains data-parallel on both T4s.
    "train": dict(
        required=("kit_dataset", "num_processes"),
        optional=(),
        models=False,
        internet=True,
        gpu=True,
    ),
    # Fitting blend weights on out-of-fold predictions needs no GPU.
    "ensemble": dict(
        required=("kit_dataset", "runs"),
        optional=("models_dataset",),
        models=True,
        internet=False,
        gpu=False,
    ),
    # The inference kernel of a code competition must run with the internet off.
    "submission": dict(
        required=("kit_dataset", "models_dataset", "runs", "blend_json", "data_dir", "out_dir"),
        optional=(),
        models=True,
        internet=False,
        gpu=True,
    ),
    # In-task pretraining fetches a hub backbone (internet on); the teacher runs label texts on
    # the GPU. Writes pseudo.csv (+ the backbone) to its output for the students' training.
    "pseudo": dict(
        required=("kit_dataset", "models_dataset", "teachers"),
        optional=("blend_json",),
        models=True,
        internet=True,
        gpu=True,
    ),
}
# Pushed by --push on every call; the others only when named with --kernels (a push runs them).
ALWAYS_PUSHED = "submission"
OPTIONAL_KERNELS = tuple(r for r in ROLES if r != ALWAYS_PUSHED)


class BundleError(ValueError):
    """A bundle that cannot be built as asked; the message says what to change."""


# ----------------------------------------------------------------------------- names


def check_slug(slug: str, what: str, lo: int = 6, hi: int = 50) -> str:
    """A Kaggle slug: lowercase letters, digits and single hyphens, lo..hi characters."""
    if not SLUG.match(slug or ""):
        raise BundleError(f"{what} slug {slug!r} must be lowercase letters, digits and hyphens")
    if not lo <= len(slug) <= hi:
        raise BundleError(
            f"{what} slug {slug!r} has {len(slug)} characters; Kaggle needs {lo}-{hi}"
        )
    return slug


def title_of(slug: str, what: str = "dataset") -> str:
    """'commonlit-kit-code' -> 'Commonlit Kit Code' (Kaggle slugifies a kernel title back to its slug)."""
    title = " ".join(w.capitalize() for w in slug.split("-"))
    if not 6 <= len(title) <= 50:
        raise BundleError(f"{what} title {title!r} has {len(title)} characters; Kaggle needs 6-50")
    return title


def check_owner(owner: str) -> str:
    """A Kaggle user name (the OWNER in OWNER/slug)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", owner or ""):
        raise BundleError(f"owner {owner!r} is not a Kaggle user name (letters, digits, - and _)")
    return owner


def kernel_role(notebook) -> str:
    """'04_submission.ipynb' -> 'submission': the notebook's kind (a key of ROLES), its kernel suffix."""
    suffix = re.sub(r"^\d+[_-]", "", Path(notebook).stem).replace("_", "-").lower()
    if suffix not in ROLES:
        raise BundleError(
            f"notebook {Path(notebook).name}: unknown kind {suffix!r}; "
            f"expected a name ending in one of {', '.join(ROLES)}"
        )
    return suffix


def dataset_metadata(owner: str, slug: str, license_name: str = DEFAULT_LICENSE) -> dict:
    """dataset-metadata.json content: id, title (6-50 characters) and exactly one license."""
    check_slug(slug, "dataset")
    return {
        "title": title_of(slug),
        "id": f"{check_owner(owner)}/{slug}",
        "licenses": [{"name": license_name}],
    }


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


# ----------------------------------------------------------------------------- code dataset


def add_wheels(dest: Path, src: Path) -> list:
    """Copy the notebooks' offline wheels (textstat 0.7.8 and its dependencies, for the EDA kernel,
    which installs them with `utils.wheels.ensure`) into dest/wheels/; their file names."""
    from .eda import TEXTSTAT_VERSION

    wheels = sorted(Path(src).glob("*.whl"))
    if not any(w.name.lower().startswith(f"textstat-{TEXTSTAT_VERSION}-") for w in wheels):
        raise BundleError(
            f"{src} has no textstat-{TEXTSTAT_VERSION} wheel for the EDA kernel: run `make wheels` "
            "(or give --wheels DIR, or --no-wheels to rely on Kaggle's image)"
        )
    (dest / WHEELS_DIR).mkdir()
    for w in wheels:
        shutil.copy2(w, dest / WHEELS_DIR / w.name)
    return [w.name for w in wheels]


def build_code(
    dest: Path, owner: str, slug: str, wheels=ROOT / WHEELS_DIR, license_name: str = DEFAULT_LICENSE
) -> dict:
    """OUT/<code slug>/: utils/ (importable from the dataset folder), wheels/ (from the folder
    `wheels`; None: none), metadata."""
    meta = dataset_metadata(owner, slug, license_name)
    pkg = Path(__file__).resolve().parent
    with atomic_dir(dest) as tmp:
        shutil.copytree(
            pkg, tmp / "utils", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*")
        )
        if (pkg.parent / "LICENSE").is_file():
            shutil.copy2(pkg.parent / "LICENSE", tmp / "LICENSE")
        names = add_wheels(tmp, wheels) if wheels else []
        write_json(tmp / "dataset-metadata.json", meta)
    return {"path": str(dest), "id": meta["id"], "wheels": names, "bytes": _size(dest)}


# ----------------------------------------------------------------------------- models dataset


def _fold_predictions(folder: Path):
    import torch

    from .model import KIT_CONFIG, TextModel
    from .predict import predict_model

    model, tok = TextModel.load(folder)
    max_len = json.loads((folder / KIT_CONFIG).read_text()).get("train", {}).get("max_len", 256)
    with torch.no_grad():
        p = predict_model(model, tok, list(CHECK_TEXTS), max_len, precision="fp32", progress=False)
    return p


def export_fold(src: Path, dst: Path, half: bool = True, tol: float = FP16_TOL) -> float:
    """Copy one fold's inference files to `dst` (weights in fp16 when `half`); returns the largest
    |prediction difference| against the source on CHECK_TEXTS, and fails above `tol`."""
    import numpy as np

    from .model import KIT_CONFIG, WEIGHTS, TextModel, check_model_dir

    check_model_dir(src)
    dst.mkdir(parents=True)
    for p in sorted(src.iterdir()):
        if (
            p.is_file()
            and p.name != WEIGHTS
            and not p.name.startswith(".")
            and not NOT_FOR_INFERENCE.search(p.name)
        ):
            shutil.copy2(p, dst / p.name)
    if half:
        model, tok = TextModel.load(src)
        extra = {
            k: v for k, v in json.loads((src / KIT_CONFIG).read_text()).items() if k != "model"
        }
        with tempfile.TemporaryDirectory(prefix="fp16-", dir=dst.parent) as tmp:
            model.save(tmp, tok, extra=extra, half=True)
            shutil.move(str(Path(tmp) / WEIGHTS), dst / WEIGHTS)
        del model
    else:
        shutil.copy2(src / WEIGHTS, dst / WEIGHTS)
    # The bundled folder must load on its own and predict like the trained one.
    diff = float(np.max(np.abs(_fold_predictions(dst) - _fold_predictions(src))))
    if not diff <= tol:
        raise BundleError(
            f"{src}: {'fp16' if half else 'copied'} weights change predictions by {diff:.2e} "
            f"(> {tol:g}); bundle this run with --fp32"
        )
    return diff


def read_blend(path, names) -> dict:
    """blend.json restricted to the bundled runs; a run with a non-zero weight must be bundled."""
    from .predict import load_blend, normalize_weights

    blend = json.loads(Path(path).read_text())
    if not {"runs", "weights"} <= set(blend):
        raise BundleError(
            f"{path}: expected {{'runs': [...], 'weights': [...]}}, found {sorted(blend)}"
        )
    left_out = [r for r, w in zip(blend["runs"], blend["weights"]) if r not in names and w != 0]
    if left_out:
        raise BundleError(
            f"{path} gives weight to run(s) {', '.join(left_out)} that are not in "
            f"--runs ({', '.join(names)}); bundle them too"
        )
    try:
        weights = load_blend(path, names)
        normalize_weights(weights, len(names))
    except ValueError as e:
        raise BundleError(str(e)) from None
    return {**blend, "runs": list(names), "weights": [float(w) for w in weights]}


def build_models(
    dest: Path,
    owner: str,
    slug: str,
    runs,
    blend=None,
    half: bool = True,
    license_name: str = DEFAULT_LICENSE,
    tol: float = FP16_TOL,
) -> dict:
    """OUT/<models slug>/: each run's finished folds and summaries, blend.json, metadata."""
    from .files import fold_dirs

    meta = dataset_metadata(owner, slug, license_name)
    runs = [Path(r) for r in runs]
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise BundleError(f"run folder names must differ (they become folders): {names}")
    blend_obj = read_blend(blend, names) if blend else None
    info = {
        "path": str(dest),
        "id": meta["id"],
        "runs": names,
        "max_diff": 0.0,
        "weights_bytes": 0,
        "source_weights_bytes": 0,
    }
    with atomic_dir(dest) as tmp:
        for run in runs:
            for fold in fold_dirs(run):
                d = export_fold(fold, tmp / run.name / fold.name, half, tol)
                info["max_diff"] = max(info["max_diff"], d)
                info["source_weights_bytes"] += (fold / "kit_model.safetensors").stat().st_size
                info["weights_bytes"] += (
                    (tmp / run.name / fold.name / "kit_model.safetensors").stat().st_size
                )
            for f in RUN_FILES:
                if (run / f).is_file():
                    shutil.copy2(run / f, tmp / run.name / f)
        if blend_obj is not None:
            write_json(tmp / "blend.json", blend_obj)
        write_json(tmp / "dataset-metadata.json", meta)
    info["bytes"] = _size(dest)
    return info


# ----------------------------------------------------------------------------- kernels


def _tags(cell) -> list:
    return cell.get("metadata", {}).get("tags", [])


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def declared_parameters(nb: dict) -> list:
    """Names assigned in the notebook's cell tagged 'parameters'."""
    cells = [c for c in nb.get("cells", []) if "parameters" in _tags(c)]
    if not cells:
        raise BundleError("has no cell tagged 'parameters'")
    text = _source(cells[0])
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return re.findall(r"^(\w+)\s*(?::[^=]*)?=", text, flags=re.M)
    names = []
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else ([node.target] if isinstance(node, ast.AnnAssign) else [])
        )
        names += [t.id for t in targets if isinstance(t, ast.Name)]
    return names


def inject_parameters(nb: dict, params: dict) -> dict:
    """A copy of `nb` with papermill's own 'injected-parameters' cell right after the
    'parameters' cell (an earlier injected cell is replaced), as `papermill -p` would run it."""
    import nbformat
    from papermill.parameterize import parameterize_notebook

    if not any("parameters" in _tags(c) for c in nb.get("cells", [])):
        raise BundleError("has no cell tagged 'parameters'")
    node = nbformat.from_dict(copy.deepcopy(nb))
    # What papermill's own notebook loader does first: every cell has tags, and a papermill
    # metadata block (where it records the parameters).
    for cell in node.cells:
        cell.metadata.setdefault("tags", [])
    node.metadata.setdefault("papermill", {})
    node = parameterize_notebook(node, params, kernel_name="python3", language="python")
    return json.loads(nbformat.writes(node))


def kernel_metadata(
    owner: str, slug: str, code_file: str, internet: bool, datasets, kernels=(), gpu: bool = True
) -> dict:
    """kernel-metadata.json content for a private notebook kernel of the competition: on a
    "GPU T4 x2" machine when `gpu`, else on CPU (no machine_shape)."""
    check_slug(slug, "kernel", lo=5)
    meta = {
        "id": f"{check_owner(owner)}/{slug}",
        "title": title_of(slug, "kernel"),
        "code_file": code_file,
        "language": "python",
        "kernel_type": "notebook",
        "is_private": True,
        "enable_gpu": gpu,
        "enable_tpu": False,
        "enable_internet": internet,
        "dataset_sources": list(datasets),
        "competition_sources": [COMPETITION],
        "kernel_sources": list(kernels),
        "model_sources": [],
    }
    if gpu:
        meta["machine_shape"] = MACHINE_SHAPE
    return meta


def build_kernel(
    dest: Path, notebook: Path, owner: str, slug: str, role: str, values: dict, datasets, kernels=()
) -> dict:
    """OUT/kernels/<slug>/: the notebook with its injected parameters + kernel-metadata.json."""
    spec = ROLES[role]
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    try:
        declared = declared_parameters(nb)
    except BundleError as e:
        raise BundleError(f"notebook {notebook} {e}") from None
    missing = [k for k in spec["required"] if k not in declared]
    if missing:
        raise BundleError(
            f"notebook {notebook}: its parameters cell does not declare "
            f"{', '.join(missing)} (declares: {', '.join(declared) or 'nothing'})"
        )
    params = {
        k: values[k]
        for k in (*spec["required"], *spec["optional"])
        if k in declared and k in values
    }
    meta = kernel_metadata(
        owner, slug, Path(notebook).name, spec["internet"], datasets, kernels, spec["gpu"]
    )
    with atomic_dir(dest) as tmp:
        text = json.dumps(inject_parameters(nb, params), indent=1, ensure_ascii=False) + "\n"
        (tmp / Path(notebook).name).write_text(text, encoding="utf-8")
        write_json(tmp / "kernel-metadata.json", meta)
    return {
        "path": str(dest),
        "id": meta["id"],
        "role": role,
        "parameters": params,
        "internet": spec["internet"],
        "gpu": spec["gpu"],
    }


# ----------------------------------------------------------------------------- the bundle


def build(
    runs,
    owner: str,
    out,
    name: str = "commonlit-kit",
    blend=None,
    half: bool = True,
    kernel_sources=None,
    notebooks=NOTEBOOKS,
    wheels=ROOT / WHEELS_DIR,
    license_name: str = DEFAULT_LICENSE,
    tol: float = FP16_TOL,
) -> dict:
    """Write the code dataset, the models dataset and one kernel per notebook under `out`.

    A missing notebook is reported in result['errors'] and its kernel skipped; the rest is built.
    With `kernel_sources` (OWNER/KERNEL of a training kernel) the kernels read the runs from that
    kernel's output and no models dataset is built; `runs` are then just the run names.
    """
    out = Path(out)
    check_owner(owner)
    code_slug = check_slug(f"{name}-code", "code dataset")
    models_slug = check_slug(f"{name}-models", "models dataset")
    # From a kernel's output the runs are paths inside it (e.g. runs/roberta-base-attention);
    # bundled runs become folders of the models dataset, named after the run folders.
    names = [Path(r).as_posix() if kernel_sources else Path(r).name for r in runs]
    if not names:
        raise BundleError("give at least one run folder with --runs")
    bad = [r for r in names if Path(r).is_absolute() or ".." in Path(r).parts]
    if bad:
        raise BundleError(f"--runs {' '.join(bad)}: give paths inside the source kernel's output")
    kernels = []
    if kernel_sources:
        parts = kernel_sources.split("/")
        if len(parts) != 2 or not all(parts):
            raise BundleError(f"--kernel-sources {kernel_sources!r}: expected OWNER/KERNEL")
        kernels = [kernel_sources]
        models_slug = check_slug(parts[1], "source kernel", lo=5)
    # Fail on names before any slow work.
    kernel_plan = []
    for nb in notebooks:
        role = kernel_role(nb)
        kernel_plan.append((Path(nb), check_slug(f"{name}-{role}", "kernel", lo=5), role))

    result = {
        "owner": owner,
        "code": None,
        "models": None,
        "kernels": [],
        "kernel_sources": kernels,
        "errors": [],
    }
    result["code"] = build_code(out / code_slug, owner, code_slug, wheels, license_name)
    if not kernel_sources:
        result["models"] = build_models(
            out / models_slug, owner, models_slug, runs, blend, half, license_name, tol
        )
    # blend_json is relative to the models folder: our blend.json, or (kernel output) its name there.
    blend_json = "" if not blend else Path(blend).name if kernel_sources else "blend.json"
    values = {
        "kit_dataset": code_slug,
        "models_dataset": models_slug,
        "runs": names,
        "teachers": names,
        "blend_json": blend_json,
        "data_dir": "",
        "out_dir": "",
        "num_processes": T4_GPUS,
    }
    for nb, slug, role in kernel_plan:
        if not nb.is_file():
            result["errors"].append(f"notebook {nb} not found: kernel {slug} skipped")
            continue
        datasets = [f"{owner}/{code_slug}"]
        if ROLES[role]["models"] and not kernel_sources:
            datasets.append(f"{owner}/{models_slug}")
        ks = kernels if ROLES[role]["models"] else []
        try:
            result["kernels"].append(
                build_kernel(out / "kernels" / slug, nb, owner, slug, role, values, datasets, ks)
            )
        except BundleError as e:
            result["errors"].append(f"{e}: kernel {slug} skipped")
    return result


# How the `kaggle` console script enters the CLI: `python -m kaggle` fails before kaggle 2.1
# (no kaggle/__main__.py in 1.8 or 2.0).
KAGGLE_ENTRY = "import sys; from kaggle.cli import main; sys.argv[0] = 'kaggle'; sys.exit(main())"
# What the kaggle CLI prints (with exit code 0) when the server refused part of a request.
KAGGLE_REFUSED = re.compile(r"creation error|push error|not valid", re.I)
PUSHED_VERSION = re.compile(r"Kernel version (\d+) successfully")


def _kaggle() -> list:
    # The CLI of this interpreter when installed, else whatever `kaggle` is on PATH.
    if importlib.util.find_spec("kaggle"):
        return [sys.executable, "-c", KAGGLE_ENTRY]
    return ["kaggle"]


def dataset_commands(bundle: dict, message: str) -> list:
    """[(ref, create argv, new-version argv)] for the code and models datasets."""
    steps = []
    for key in ("code", "models"):
        if bundle[key]:
            p = bundle[key]["path"]
            steps.append(
                (
                    bundle[key]["id"],
                    ["datasets", "create", "-p", p, "--dir-mode", "zip"],
                    ["datasets", "version", "-p", p, "-m", message, "--dir-mode", "zip"],
                )
            )
    return steps


def kernels_to_push(bundle: dict, named=()) -> list:
    """The kernels --push pushes, in notebook order: the submission kernel, unless the kernel it
    reads its runs from is pushed too (it must finish first), and the ones named by role."""
    ids = {k["id"] for k in bundle["kernels"] if k["role"] in named}
    wait_for = [k for k in bundle.get("kernel_sources") or [] if k in ids]
    want = set(named) | ({ALWAYS_PUSHED} if not wait_for else set())
    return [k for k in bundle["kernels"] if k["role"] in want]


def submit_command(bundle: dict, message: str, version="N"):
    """The code-competition submit argv, or None when no submission kernel was built."""
    sub = [k for k in bundle["kernels"] if k["role"] == ALWAYS_PUSHED]
    if not sub:
        return None
    return [
        "competitions",
        "submit",
        COMPETITION,
        "-f",
        SUBMISSION_FILE,
        "-k",
        sub[0]["id"],
        "-v",
        str(version),
        "-m",
        message,
    ]


def _show(argv) -> str:
    return shlex.join(["kaggle", *argv])


def _machine(k: dict) -> str:
    if not k["gpu"]:
        return "CPU"
    n = k["parameters"].get("num_processes")
    return f"GPU T4 x{T4_GPUS}" + (f", num_processes={n}" if n else "")


def print_commands(bundle: dict, message: str, file=None) -> None:
    """The exact kaggle CLI commands, in order, from upload to submit; then the optional kernels.
    Every command stands alone on its line, after `N. `, after `: ` or indented."""
    file = file or sys.stdout
    steps = dataset_commands(bundle, message)
    sub = [k for k in bundle["kernels"] if k["role"] == ALWAYS_PUSHED]
    last = len(steps) + len(sub)
    print(f"\nUpload, run and submit, in order (--push runs steps 1-{last}):", file=file)
    n = 0
    for ref, create, version in steps:
        n += 1
        print(f"{n:2d}. {_show(create)}", file=file)
        print(f"    # once {ref} exists, instead: {_show(version)}", file=file)
        print(
            f"    # then wait until it says ready: {_show(['datasets', 'status', ref])}", file=file
        )
    for k in sub:
        n += 1
        print(f"{n:2d}. {_show(['kernels', 'push', '-p', k['path']])}", file=file)
        print(
            f"    # pushing runs it ({_machine(k)}); wait until it says complete: "
            f"{_show(['kernels', 'status', k['id']])}",
            file=file,
        )
        print(f"{n + 1:2d}. {_show(submit_command(bundle, message))}", file=file)
        print(
            '    # N: the version `kernels push` printed ("Kernel version N successfully ...")',
            file=file,
        )
    rest = [k for k in bundle["kernels"] if k["role"] != ALWAYS_PUSHED]
    if rest:
        print(
            "\nOptional: each push runs the kernel on Kaggle; --push pushes these only when "
            f"named with --kernels {' '.join(k['role'] for k in rest)}",
            file=file,
        )
        for k in rest:
            print(f"    {_show(['kernels', 'push', '-p', k['path']])}  # {_machine(k)}", file=file)


def push(
    bundle: dict,
    message: str,
    runner=subprocess.run,
    wait_s: float = 600,
    poll_s: float = 15,
    kernels=(),
) -> dict:
    """Upload the datasets (create, or a new version when they exist), wait until Kaggle has
    processed them, then push the submission kernel and the kernels named by role in `kernels`:
    the kaggle CLI in a subprocess (credentials needed). Returns {kernel id: pushed version}."""
    cli = _kaggle()

    def call(argv, check=True):
        print("$", _show(argv), flush=True)
        res = runner([*cli, *argv], capture_output=True, text=True)
        out = (res.stdout or "") + (res.stderr or "")
        if out.strip():
            print(out.strip(), flush=True)
        if check and (res.returncode != 0 or KAGGLE_REFUSED.search(out)):
            raise BundleError(
                f"`kaggle {' '.join(argv[:2])}` failed (exit {res.returncode}); see its output above"
            )
        return res.returncode, out

    for ref, create, version in dataset_commands(bundle, message):
        exists, _ = call(["datasets", "status", ref], check=False)
        call(version if exists == 0 else create)
        deadline = time.monotonic() + wait_s
        while True:
            rc, out = call(["datasets", "status", ref], check=False)
            if rc == 0 and "ready" in out.lower():
                break
            if time.monotonic() > deadline:
                print(f"warning: {ref} not ready after {wait_s:.0f}s; pushing anyway", flush=True)
                break
            time.sleep(poll_s)
    versions = {}
    for k in kernels_to_push(bundle, kernels):
        _, out = call(["kernels", "push", "-p", k["path"]])
        m = PUSHED_VERSION.search(out)
        versions[k["id"]] = int(m.group(1)) if m else None
    return versions


# ----------------------------------------------------------------------------- CLI


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB"


def main(argv=None, runner=subprocess.run) -> int:
    """CLI entry point: errors a user can act on are one line on stderr and exit code 2."""
    p = argparse.ArgumentParser(prog="python -m utils.kaggle", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write the datasets and kernels; print the kaggle commands")
    b.add_argument("--runs", nargs="+", required=True, help="run folders (each with fold*/)")
    b.add_argument("--owner", required=True, help="your Kaggle user name")
    b.add_argument("--out", required=True, help="folder to write the bundle into")
    b.add_argument("--name", default="commonlit-kit", help="slug prefix of datasets and kernels")
    b.add_argument("--blend", help="blend.json (from the ensemble notebook); default equal weights")
    b.add_argument(
        "--fp32", action="store_true", help="keep fp32 weights (default: fp16, half size)"
    )
    b.add_argument(
        "--kernel-sources",
        metavar="OWNER/KERNEL",
        help="read the runs from this training kernel's output, not a models dataset",
    )
    b.add_argument(
        "--notebooks",
        nargs="+",
        default=[str(n) for n in NOTEBOOKS],
        help="notebooks that become kernels",
    )
    b.add_argument(
        "--fp16-tol",
        type=float,
        default=FP16_TOL,
        help="largest |fp16 - fp32| prediction difference accepted",
    )
    b.add_argument("--wheels", default=str(ROOT / WHEELS_DIR),
                   help="folder of wheels for the EDA kernel's offline install (`make wheels`)")
    b.add_argument("--no-wheels", action="store_true",
                   help="no wheels in the code dataset (the EDA kernel then needs textstat 0.7.8 on Kaggle's image)")
    b.add_argument("--license", default=DEFAULT_LICENSE, help="Kaggle license name of the datasets")
    b.add_argument(
        "--message",
        default=f"commonlit-kit {__version__}",
        help="version notes and submission message",
    )
    b.add_argument(
        "--push",
        action="store_true",
        help="upload the datasets and push the submission kernel (needs Kaggle credentials)",
    )
    b.add_argument(
        "--kernels",
        nargs="+",
        default=[],
        choices=OPTIONAL_KERNELS,
        help="with --push, also push these kernels (a push runs the kernel on Kaggle)",
    )
    args = p.parse_args(argv)
    if args.kernels and not args.push:
        p.error("--kernels names kernels for --push to push; add --push")
    try:
        bundle = build(
            args.runs,
            args.owner,
            args.out,
            args.name,
            args.blend,
            not args.fp32,
            args.kernel_sources,
            [Path(n) for n in args.notebooks],
            None if args.no_wheels else Path(args.wheels),
            args.license,
            args.fp16_tol,
        )
    except (BundleError, OSError) as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    code, models = bundle["code"], bundle["models"]
    print(f"code dataset    {code['path']} ({_mb(code['bytes'])}, wheels: {len(code['wheels'])})")
    if models:
        kind = "fp32" if args.fp32 else "fp16"
        print(
            f"models dataset  {models['path']} ({_mb(models['bytes'])}; weights {kind} "
            f"{_mb(models['weights_bytes'])} from {_mb(models['source_weights_bytes'])}; "
            f"max |diff| {models['max_diff']:.1e})"
        )
    for k in bundle["kernels"]:
        net = "internet on" if k["internet"] else "internet off"
        print(f"kernel          {k['path']} ({_machine(k)}, {net})")
    for err in bundle["errors"]:
        print(f"error: {err}", file=sys.stderr)
    print_commands(bundle, args.message)
    if bundle["errors"]:
        if args.push:
            print("error: not pushing an incomplete bundle", file=sys.stderr)
        return 2
    if args.push:
        try:
            versions = push(bundle, args.message, runner, kernels=args.kernels)
        except BundleError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print_after_push(bundle, args.message, versions)
    return 0


def print_after_push(bundle: dict, message: str, versions: dict, file=None) -> None:
    """What is left after --push: the submit command with the pushed version, or the push of a
    submission kernel that waits for its source kernel."""
    file = file or sys.stdout
    sub = submit_command(bundle, message)
    if not sub:
        return
    kid = sub[sub.index("-k") + 1]
    if kid not in versions:
        k = next(k for k in bundle["kernels"] if k["id"] == kid)
        print(
            f"\nWhen {', '.join(bundle['kernel_sources'])} has finished, push the submission "
            f"kernel, then submit as listed above:\n    {_show(['kernels', 'push', '-p', k['path']])}",
            file=file,
        )
        return
    version = versions[kid] or "N"
    print(
        f"\nWhen {kid} has run (it says complete: {_show(['kernels', 'status', kid])}), submit:"
        f"\n    {_show(submit_command(bundle, message, version))}",
        file=file,
    )
    if version == "N":
        print("    # N: the version `kernels push` printed above", file=file)


if __name__ == "__main__":
    sys.exit(main())
