"""What goes to Kaggle: the kit and the trained runs as datasets, the notebooks as kernels.

Writes (each folder atomically; `utils.kaggle` prints and runs the kaggle commands for them):
    OUT/<name>-code/     the `utils` package, wheels/ (textstat for the EDA kernel, offline),
                         dataset-metadata.json
    OUT/<name>-models/   per run: fold*/ (fp16 weights by default, configs, tokenizer), oof.csv,
                         folds.csv, metrics.json, config.json; blend.json; dataset-metadata.json
    OUT/kernels/<name>-<eda|train|ensemble|submission|pseudo>/   notebook + kernel-metadata.json
A LoRA run's folds hold its adapters only (megabytes), never its base model (gigabytes): the kernels
that load the runs attach the base, a Kaggle Model (kernel-metadata.json's model_sources) or a
dataset (dataset_sources), and find it under /kaggle/input themselves (utils.backbone.find_base).
Nothing here touches the network.
"""

from __future__ import annotations

import ast
import copy
import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .competition import DEFAULT as DEFAULT_COMPETITION
from .competition import CompetitionError, load_competition
from .data import DataError
from .eda import TEXTSTAT_VERSION
from .ensemble import blend_weights, normalize_weights
from .ensemble import read_blend as read_blend_json
from .env import dataset_file_ref
from .files import WEIGHTS, atomic_dir, fold_dirs, run_names, write_json
from .fold import first_fold
from .rerank import check_pair
from .runs import BLEND, RUN_FILES, check_runs, identity, run_competition
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
SLUG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
OWNER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")  # a Kaggle user or organisation name
# A part of a Kaggle Model handle OWNER/MODEL/FRAMEWORK/VARIATION/VERSION (google/gemma-2/
# transformers/gemma-2-9b-it/2, metaresearch/llama-3.1/transformers/8b/1: dots allowed).
MODEL_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
BASE_FORMS = ("OWNER/MODEL/FRAMEWORK/VARIATION/VERSION (a Kaggle Model) or OWNER/DATASET (a dataset "
              "holding its folder)")

# What each notebook becomes, by its name without the number: the parameters injected
# (required: the notebook's parameters cell must declare them; optional: injected when declared),
# whether it reads the models dataset, loads the runs' weights (then a LoRA run's base model is
# attached), may use the internet, and runs on a GPU (T4 x2).
ROLES = {
    "eda": dict(required=("kit_dataset",), optional=("competition",), models=False, loads=False, internet=False,
                gpu=False),
    # Training fetches a hub backbone (internet on) and trains data-parallel on both T4s.
    "train": dict(
        required=("kit_dataset", "num_processes"),
        optional=("competition",),
        models=False,
        loads=False,
        internet=True,
        gpu=True,
    ),
    # Fitting blend weights on out-of-fold predictions needs no GPU.
    "ensemble": dict(
        required=("kit_dataset", "runs"),
        optional=("models_dataset",),
        models=True,
        loads=False,  # out-of-fold predictions only
        internet=False,
        gpu=False,
    ),
    # The inference kernel of a code competition must run with the internet off.
    "submission": dict(
        required=("kit_dataset", "models_dataset", "runs", "blend_json", "data_dir", "out_dir", "reranker"),
        optional=(),
        models=True,
        loads=True,
        internet=False,
        gpu=True,
    ),
    # In-task pretraining fetches a hub backbone (internet on); the teacher runs label texts on
    # the GPU. Writes pseudo.csv (+ the backbone) to its output for the students' training.
    "pseudo": dict(
        required=("kit_dataset", "models_dataset", "teachers"),
        optional=("blend_json", "competition"),
        models=True,
        loads=True,
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
    if not OWNER.fullmatch(owner or ""):
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


def join_datasets(comp) -> list:
    """OWNER/DATASET of each other Kaggle dataset whose tables the competition joins (train_joins
    and test_joins naming OWNER/DATASET/FILE), in order, once each: the kernels attach them."""

    refs = []
    for file, *_ in (*comp.train_joins, *comp.test_joins):
        ref = dataset_file_ref(file)
        if ref is None:
            continue
        what = f"joined table {file!r}: dataset"
        try:
            ref = f"{check_owner(ref[0])}/{check_slug(ref[1], what, lo=1)}"
        except BundleError as e:
            raise BundleError(f"{e} (a join's file is FILE or OWNER/DATASET/FILE)") from None
        refs += [ref] if ref not in refs else []
    return refs


def base_source(ref: str) -> tuple[str, str]:
    """A LoRA run's base model as the kernels attach it: ("model", OWNER/MODEL/FRAMEWORK/VARIATION/
    VERSION) for a Kaggle Model (kernel-metadata.json's model_sources), ("dataset", OWNER/DATASET)
    for a dataset holding its folder (dataset_sources); anything else refused in one line."""
    parts = str(ref).split("/")
    owner_ok = OWNER.fullmatch(parts[0])
    if owner_ok and len(parts) == 5 and all(MODEL_PART.fullmatch(p) for p in parts) and parts[4].isdigit():
        return "model", str(ref)
    if owner_ok and len(parts) == 2 and SLUG.fullmatch(parts[1]):
        return "dataset", str(ref)
    raise BundleError(f"--base-model-source {ref!r}: expected {BASE_FORMS}, e.g. "
                      "google/gemma-2/transformers/gemma-2-9b-it/2")


def lora_bases(runs) -> dict:
    """{run folder name: its base model's recorded hub id or folder} of the runs trained with LoRA
    (their folds hold adapters only); runs that are not folders here, or unreadable, are left to
    check_runs."""
    bases = {}
    for run in runs:
        if not fold_dirs(run, required=False):
            continue
        try:
            record = first_fold(run)
        except (OSError, ValueError):
            continue
        if record.lora:
            bases[Path(run).name] = (record.base or {}).get("model", "its base model")
    return bases


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

    from .model import load_fold  # torch: utils.kaggle builds kernels and metadata without it
    from .predict import predict_model  # torch, as above

    fold = load_fold(folder, "cpu")
    with torch.no_grad():
        return predict_model(fold.model, fold.tokenizer, list(CHECK_TEXTS), fold.record.max_len, precision="fp32",
                             progress=False)


def export_fold(src: Path, dst: Path, half: bool = True, tol: float = FP16_TOL) -> float:
    """Copy one fold's inference files to `dst` (weights in fp16 when `half`); returns the largest
    |prediction difference| against the source on CHECK_TEXTS, and fails above `tol`."""
    import numpy as np

    from .model import check_model_dir, load_fold  # torch: utils.kaggle builds kernels and metadata without it

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
        fold = load_fold(src, "cpu")
        with tempfile.TemporaryDirectory(prefix="fp16-", dir=dst.parent) as tmp:
            fold.model.save(tmp, fold.tokenizer, extra=fold.record.run_record(), half=True)
            shutil.move(str(Path(tmp) / WEIGHTS), dst / WEIGHTS)
        del fold
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


def read_blend(path, runs) -> dict:
    """blend.json of exactly the bundled runs (utils.ensemble.check_members: no member left out,
    no other run, each the run it was fitted on), its weights and weights_per_fold in the runs'
    order; fold k's pseudo-labels made from the bundle still use weights fitted without fold k's
    rows."""

    try:
        blend = read_blend_json(path)
        weights, per_fold = blend_weights(path, runs, blend)  # check_members first
        weights = normalize_weights(weights, len(runs))
    except (DataError, ValueError) as e:
        raise BundleError(str(e)) from None
    out = {**blend, "runs": [Path(r).name for r in runs], "weights": weights.tolist()}
    if per_fold is not None:
        out["weights_per_fold"] = {str(k): w.tolist() for k, w in per_fold.items()}
    return out


def export_run(run: Path, dst: Path, half: bool = True, tol: float = FP16_TOL) -> dict:
    """One run's finished folds (export_fold) and its summaries (utils.runs.RUN_FILES) into
    `dst`: {"max_diff", "weights_bytes", "source_weights_bytes"}."""

    info = {"max_diff": 0.0, "weights_bytes": 0, "source_weights_bytes": 0}
    for fold in fold_dirs(run):
        diff = export_fold(fold, dst / fold.name, half, tol)
        info["max_diff"] = max(info["max_diff"], diff)
        info["source_weights_bytes"] += (fold / WEIGHTS).stat().st_size
        info["weights_bytes"] += (dst / fold.name / WEIGHTS).stat().st_size
    for f in RUN_FILES:
        if (run / f).is_file():
            shutil.copy2(run / f, dst / f)
    return info


def build_models(
    dest: Path,
    owner: str,
    slug: str,
    runs,
    blend=None,
    half: bool = True,
    license_name: str = DEFAULT_LICENSE,
    tol: float = FP16_TOL,
    reranker=None,
) -> dict:
    """OUT/<models slug>/: each run's finished folds and summaries, blend.json, metadata; a LoRA
    run's folds with their adapters only (result['lora_bases']: {run: its base model, not bundled});
    a `reranker` run (utils.rerank) beside them, result['reranker'] its folder name.

    The bundled blend.json records the identities of the bundled copies (fp16 weights, no
    training state: other runs than the trained ones by identity), so the submission kernel's
    utils.predict accepts it for them."""

    meta = dataset_metadata(owner, slug, license_name)
    runs = [Path(r) for r in runs]
    try:
        names = run_names(runs)
    except ValueError as e:
        raise BundleError(f"run folder names must differ (they become folders): {e}") from None
    blend_obj = read_blend(blend, runs) if blend else None
    extra = [Path(reranker)] if reranker else []
    try:  # every run finished and predicting the same targets, before any weights are converted
        check_runs(runs)
        for run in extra:
            check_runs([run])  # a finished fold (the reranker predicts other outputs than the runs)
    except (ValueError, OSError) as e:  # one competition, the same outputs, a finished fold each
        raise BundleError(str(e)) from None
    info = {"path": str(dest), "id": meta["id"], "runs": names, "max_diff": 0.0,
            "weights_bytes": 0, "source_weights_bytes": 0, "lora_bases": lora_bases([*runs, *extra]),
            "reranker": extra[0].name if extra else None}
    with atomic_dir(dest) as tmp:
        for run in [*runs, *extra]:
            sizes = export_run(run, tmp / run.name, half, tol)
            info["max_diff"] = max(info["max_diff"], sizes.pop("max_diff"))
            for k, v in sizes.items():
                info[k] += v
        if blend_obj is not None:
            identities = {name: identity(tmp / name) for name in names}
            write_json(tmp / BLEND, {**blend_obj, "identities": identities})
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
    owner: str, slug: str, code_file: str, internet: bool, datasets, kernels=(), gpu: bool = True,
    competition: str = DEFAULT_COMPETITION, models=(),
) -> dict:
    """kernel-metadata.json content for a private notebook kernel of the competition: on a
    "GPU T4 x2" machine when `gpu`, else on CPU (no machine_shape); `models`: the Kaggle Models
    attached (OWNER/MODEL/FRAMEWORK/VARIATION/VERSION)."""
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
        "competition_sources": [competition],
        "kernel_sources": list(kernels),
        "model_sources": list(models),
    }
    if gpu:
        meta["machine_shape"] = MACHINE_SHAPE
    return meta


def build_kernel(
    dest: Path, notebook: Path, owner: str, slug: str, role: str, values: dict, datasets, kernels=(),
    competition: str = DEFAULT_COMPETITION, models=(),
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
        owner, slug, Path(notebook).name, spec["internet"], datasets, kernels, spec["gpu"], competition,
        models,
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
        "model_sources": list(models),
    }


# ----------------------------------------------------------------------------- the bundle


def bundle_competition(runs, competition: str = "", kernel_sources=None):
    """The bundle's competition: the one given, else the runs' own (local runs), else CommonLit;
    given and the runs' must agree."""

    try:
        given = load_competition(competition) if competition else None
        if kernel_sources or not runs or not Path(runs[0]).is_dir():
            return given or load_competition()
        theirs = run_competition(runs[0])
    except (CompetitionError, FileNotFoundError, ValueError) as e:
        raise BundleError(str(e)) from None
    if given and given.slug != theirs.slug:
        raise BundleError(f"--competition {given.slug} but {runs[0]} was trained for {theirs.slug}")
    return given or theirs


@dataclass(frozen=True)
class BundleSpec:
    """What to build: the runs, whose datasets and kernels, from which notebooks."""

    runs: tuple  # run folders (with kernel_sources: their paths inside that kernel's output)
    owner: str  # the Kaggle user name that owns the datasets and kernels
    out: str | Path  # the folder the bundle is written into
    name: str = ""  # slug prefix of the datasets and kernels (empty: the competition's kit_name)
    blend: str | Path | None = None  # blend.json of exactly these runs (None: equal weights)
    half: bool = True  # fp16 weights (half the size), checked against fp32 within `tol`
    kernel_sources: str | None = None  # OWNER/KERNEL of a training kernel: no models dataset
    notebooks: tuple = NOTEBOOKS  # notebooks that become kernels (their kind from the name)
    wheels: str | Path | None = ROOT / WHEELS_DIR  # wheels for the EDA kernel (None: none)
    license_name: str = DEFAULT_LICENSE  # the datasets' Kaggle license
    tol: float = FP16_TOL  # largest |fp16 - fp32| prediction difference accepted
    competition: str = ""  # a slug or competition.json (empty: the runs', else CommonLit)
    # LoRA runs' base models, attached to the kernels that load the runs (base_source's forms)
    base_model_sources: tuple = ()
    # a reranker run (utils.rerank) reordering the one retriever run's top N in the submission
    reranker: str | Path | None = None

    def __post_init__(self):
        # Lists given are kept as tuples: the description stays frozen.
        object.__setattr__(self, "runs", tuple(self.runs))
        object.__setattr__(self, "notebooks", tuple(self.notebooks))
        object.__setattr__(self, "base_model_sources", tuple(self.base_model_sources))


@dataclass(frozen=True)
class BundlePlan:
    """The names a bundle gets, checked before any slow work."""

    competition: object  # utils.competition.Competition
    code_slug: str
    models_slug: str  # the models dataset, or the source kernel's slug
    names: list  # the runs as the kernels name them
    kernels: list  # [OWNER/KERNEL] of the source kernel, or []
    notebooks: list  # [(notebook, kernel slug, role)]
    joined: tuple = ()  # (OWNER/DATASET, ...) whose tables the competition joins (join_datasets)
    base_models: tuple = ()  # Kaggle Models holding LoRA runs' base models (model_sources)
    base_datasets: tuple = ()  # datasets holding them (dataset_sources)
    reranker: str = ""  # the reranker run as the submission kernel names it ("": none)


def plan_bundle(spec: BundleSpec) -> BundlePlan:
    """Every name of the bundle (slugs, runs, kernels), checked: a bad one fails here, before the
    slow work."""

    check_owner(spec.owner)
    comp = bundle_competition(spec.runs, spec.competition, spec.kernel_sources)
    name = spec.name or comp.kit_name
    code_slug = check_slug(f"{name}-code", "code dataset")
    models_slug = check_slug(f"{name}-models", "models dataset")
    # From a kernel's output the runs are paths inside it (e.g. runs/roberta-base-attention);
    # bundled runs become folders of the models dataset, named after the run folders.
    names = [Path(r).as_posix() if spec.kernel_sources else Path(r).name for r in spec.runs]
    if not names:
        raise BundleError("give at least one run folder with --runs")
    reranker = ""
    if spec.reranker:
        reranker = Path(spec.reranker).as_posix() if spec.kernel_sources else Path(spec.reranker).name
        if len(names) != 1 or spec.blend:
            raise BundleError(f"--reranker reorders one retriever's candidates: give one run with --runs, no "
                              f"--blend (given {len(names)} run(s){', a blend' if spec.blend else ''})")
        if reranker in names:
            raise BundleError(f"--reranker {reranker}: the runs and the reranker must be folders of other names")
        if not spec.kernel_sources:
            try:
                check_pair(spec.runs[0], spec.reranker)
            except (DataError, ValueError, OSError) as e:
                raise BundleError(str(e)) from None
    bad = [r for r in [*names, reranker] if r and (Path(r).is_absolute() or ".." in Path(r).parts)]
    if bad:
        raise BundleError(f"--runs {' '.join(bad)}: give paths inside the source kernel's output")
    kernels = []
    if spec.kernel_sources:
        parts = spec.kernel_sources.split("/")
        if len(parts) != 2 or not all(parts):
            raise BundleError(f"--kernel-sources {spec.kernel_sources!r}: expected OWNER/KERNEL")
        kernels = [spec.kernel_sources]
        models_slug = check_slug(parts[1], "source kernel", lo=5)
    notebooks = []
    for nb in spec.notebooks:
        role = kernel_role(nb)
        notebooks.append((Path(nb), check_slug(f"{name}-{role}", "kernel", lo=5), role))
    try:
        joined = join_datasets(comp)
    except BundleError as e:
        raise BundleError(f"competition {comp.slug}: {e}") from None
    sources = [base_source(ref) for ref in dict.fromkeys(spec.base_model_sources)]
    if not spec.kernel_sources:  # the runs are here: a LoRA run needs its base, others none
        loaded = [*spec.runs, *([spec.reranker] if spec.reranker else [])]
        bases = lora_bases(loaded)
        if bases and not sources:
            run, base = next(iter(bases.items()))
            raise BundleError(f"run {run} was trained with LoRA: its folds hold adapters only, not its base "
                              f"model {base}, which the kernels must attach; give it as --base-model-source "
                              f"{BASE_FORMS}")
        if sources and not bases and all(fold_dirs(r, required=False) for r in loaded):
            raise BundleError(f"--base-model-source {' '.join(spec.base_model_sources)}: no run was trained "
                              "with LoRA (their folds hold whole models); leave it out")
    return BundlePlan(comp, code_slug, models_slug, names, kernels, notebooks, tuple(joined),
                      tuple(ref for kind, ref in sources if kind == "model"),
                      tuple(ref for kind, ref in sources if kind == "dataset"), reranker)


def build(spec: BundleSpec) -> dict:
    """Write the code dataset, the models dataset and one kernel per notebook under spec.out.

    The competition (slug in the kernels' sources and the submit command; spec.name, default its
    kit_name, prefixes the datasets and kernels): spec.competition (a slug or competition.json),
    else the one the runs were trained for (read from them), else CommonLit Readability.

    Every kernel attaches the other Kaggle datasets whose tables the competition joins
    (result['joined_datasets']: OWNER/DATASET of a join's OWNER/DATASET/FILE).

    A LoRA run's folds hold adapters only: spec.base_model_sources (a Kaggle Model or a dataset
    holding its base model; required when a run here was trained with LoRA, refused when none
    was) are attached to the kernels that load the runs (submission, pseudo).

    A missing notebook is reported in result['errors'] and its kernel skipped; the rest is built.
    With spec.kernel_sources (OWNER/KERNEL of a training kernel) the kernels read the runs from
    that kernel's output and no models dataset is built; spec.runs are then just the run names.
    """
    out, owner = Path(spec.out), spec.owner
    p = plan_bundle(spec)
    result = {
        "owner": owner,
        "competition": p.competition.slug,
        "code": None,
        "models": None,
        "kernels": [],
        "kernel_sources": p.kernels,
        "joined_datasets": list(p.joined),
        "base_model_sources": [*p.base_models, *p.base_datasets],
        "errors": [],
    }
    result["code"] = build_code(
        out / p.code_slug, owner, p.code_slug, spec.wheels, spec.license_name
    )
    if not spec.kernel_sources:
        result["models"] = build_models(out / p.models_slug, owner, p.models_slug, spec.runs,
                                        spec.blend, spec.half, spec.license_name, spec.tol, spec.reranker)
    # blend_json is relative to the models folder: our blend.json, or (kernel output) its name.
    blend_json = "" if not spec.blend else Path(spec.blend).name if spec.kernel_sources else BLEND
    values = {
        "kit_dataset": p.code_slug,
        "models_dataset": p.models_slug,
        "runs": p.names,
        "teachers": p.names,
        "blend_json": blend_json,
        "data_dir": "",
        "out_dir": "",
        "num_processes": T4_GPUS,
        "competition": p.competition.as_parameter(),
        "reranker": p.reranker,
    }
    for nb, slug, role in p.notebooks:
        if not nb.is_file():
            result["errors"].append(f"notebook {nb} not found: kernel {slug} skipped")
            continue
        datasets = [f"{owner}/{p.code_slug}"]
        if ROLES[role]["models"] and not spec.kernel_sources:
            datasets.append(f"{owner}/{p.models_slug}")
        datasets += list(p.joined)  # every kernel reads the competition's data, joined tables included
        loads = ROLES[role]["loads"]  # a kernel loading the runs' weights attaches LoRA runs' base models
        datasets += list(p.base_datasets) if loads else []
        ks = p.kernels if ROLES[role]["models"] else []
        try:
            kernel = build_kernel(out / "kernels" / slug, nb, owner, slug, role, values, datasets,
                                  ks, p.competition.slug, p.base_models if loads else ())
            result["kernels"].append(kernel)
        except BundleError as e:
            result["errors"].append(f"{e}: kernel {slug} skipped")
    return result
