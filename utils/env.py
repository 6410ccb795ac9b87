"""Where am I (Kaggle, Colab, local) and where are the data, the attached datasets and the outputs.

All paths the notebooks use come from here. Kaggle has two /kaggle/input layouts:
old  /kaggle/input/<slug>/                      (competitions and datasets alike)
new  /kaggle/input/competitions/<slug>/  and  /kaggle/input/datasets/<owner>/<slug>/
Both are tried, then a search of the input tree as a fallback. A Kaggle Model attached to a
notebook (OWNER/MODEL/FRAMEWORK/VARIATION/VERSION, e.g. a LoRA run's base model) is mounted at
old  /kaggle/input/<model>/<framework>/<variation>/<version>/
new  /kaggle/input/models/<owner>/<model>/<framework>/<variation>/<version>/
(utils.backbone.kaggle_model_dirs looks for a fold's base model in both, and in datasets).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# The default competition (utils.competition.DEFAULT, whose data $COMMONLIT_DATA and data/ hold),
# spelled here so that this module stays standard library only; a test pins the two together.
COMPETITION = "commonlitreadabilityprize"
KAGGLE_INPUT = Path("/kaggle/input")
KAGGLE_WORKING = Path("/kaggle/working")
DATA_FILES = ("train.csv", "test.csv")


def project_root() -> Path:
    """The checkout this kit runs from (the folder with pyproject.toml beside utils/), else the
    current folder (the kit installed as a package, or imported from a Kaggle dataset)."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() else Path.cwd()


def shown(path) -> str:
    """A path as result files store it: relative to the project when inside it, else its name
    (never a machine's absolute path)."""
    path = Path(path).resolve()
    try:
        return str(path.relative_to(project_root().resolve()))
    except ValueError:
        return path.name


def detect() -> str:
    """'kaggle', 'colab' or 'local'."""
    if os.environ.get("KAGGLE_KERNEL_RUN_TYPE"):
        return "kaggle"
    if "google.colab" in sys.modules or os.environ.get("COLAB_RELEASE_TAG"):
        return "colab"
    return "local"


def kaggle_input() -> Path:
    """The Kaggle input root (KAGGLE_INPUT_ROOT overrides it, e.g. for offline tests)."""
    return Path(os.environ.get("KAGGLE_INPUT_ROOT", KAGGLE_INPUT))


def _search(root: Path, slug: str, marker: str | None, depth: int = 4):
    """First folder named `slug` under root (breadth-first, `depth` levels) holding `marker`."""
    level = [root]
    for _ in range(depth):
        nxt = []
        for d in level:
            try:
                children = sorted(p for p in d.iterdir() if p.is_dir())
            except OSError:
                continue
            for c in children:
                if c.name == slug and (marker is None or (c / marker).exists()):
                    return c
            nxt += children
        level = nxt
    return None


def _candidates(slug: str, owner: str | None = None) -> list:
    """Where Kaggle mounts an attached dataset (or competition) `slug`, in both input layouts."""
    root = kaggle_input()
    new = [root / "datasets" / owner / slug] if owner else []
    return [root / slug, root / "competitions" / slug, *new]


def dataset_dir(slug: str, owner: str | None = None, marker: str | None = None) -> Path:
    """An attached Kaggle dataset (or competition) folder, under either input layout."""
    root = kaggle_input()
    candidates = _candidates(slug, owner)
    for c in candidates:
        if c.is_dir() and (marker is None or (c / marker).exists()):
            return c
    found = _search(root, slug, marker)
    if found is None:
        raise FileNotFoundError(
            f"dataset {slug!r} is not attached: no {slug}/ under {root} "
            f"(checked {', '.join(str(c) for c in candidates)} and a search)"
        )
    return found


def dataset_file_ref(name: str):
    """'OWNER/DATASET/FILE' (a table of another Kaggle dataset, e.g. "xhlulu/cpc-codes/titles.csv")
    -> (owner, dataset, file); None for any other name (a file beside the competition's)."""
    parts = str(name).split("/")
    return tuple(parts) if len(parts) == 3 and all(parts) else None


def dataset_file(owner: str, slug: str, file: str, beside=None) -> Path:
    """FILE of the Kaggle dataset OWNER/SLUG, looked up in one order: beside the competition's files
    (the folder `beside`, where a user may have put it), the dataset attached under the Kaggle input
    (either layout, then a search), then data/<slug>/ at the project root. Not found: a
    FileNotFoundError of one line naming every place looked and the command that downloads it."""
    looked = [Path(beside) / file] if beside is not None else []
    if looked and looked[0].is_file():
        return looked[0]
    try:
        return dataset_dir(slug, owner, marker=file) / file
    except FileNotFoundError:
        looked += [c / file for c in _candidates(slug, owner)]
    local = project_root() / "data" / slug
    if (local / file).is_file():
        return local / file
    *first, last = map(str, looked)
    places = [*first, f"{last} (and a search of {kaggle_input()})", str(local / file)]
    raise FileNotFoundError(
        f"{file} of Kaggle dataset {owner}/{slug} not found (looked in {', '.join(places)}): download it with "
        f"`kaggle datasets download -d {owner}/{slug} -p {local} --unzip`, or attach {owner}/{slug} to the notebook"
    )


def competition_dir(data_dir: str | None = None, slug: str = COMPETITION) -> Path:
    """The folder with a competition's train and test files, looked up in one order everywhere
    (CLI, demo, notebooks, tests, benchmarks): `data_dir` if given, $COMMONLIT_DATA (CommonLit
    Readability's), data/<slug>/ then (CommonLit) data/ at the project root (where `make data
    COMPETITION=slug` downloads), then the competition attached under the Kaggle input."""
    if data_dir:
        path = Path(data_dir)
        if not path.is_dir():
            raise FileNotFoundError(f"data folder not found: {path}")
        return path
    tried = []
    env = os.environ.get("COMMONLIT_DATA") if slug == COMPETITION else None
    if env:
        if not Path(env).is_dir():
            raise FileNotFoundError(f"COMMONLIT_DATA={env}: folder not found")
        return Path(env)
    root = project_root() / "data"
    for local in [root / slug] + ([root] if slug == COMPETITION else []):
        if local.is_dir() and any(p.suffix == ".csv" for p in local.iterdir()):
            return local
        tried.append(f"{local}/")
    if detect() == "kaggle" or kaggle_input().is_dir():
        try:
            found = dataset_dir(slug)
            if any(found.glob("*.csv")):
                return found
        except FileNotFoundError:
            pass
        tried.append(f"{kaggle_input()}/")
    where = "$COMMONLIT_DATA, " if slug == COMPETITION else ""
    raise FileNotFoundError(
        f"{slug} data not found (looked in {where}{', '.join(tried)}): run "
        f"`make data COMPETITION={slug}` (Kaggle credentials needed), place its CSVs in "
        f"data/{slug}/ (see data/README.md), or pass the folder (--data / data_dir)"
        + (", or set COMMONLIT_DATA to it" if slug == COMPETITION else "")
    )


def working_dir(name: str = "kaggle-text-kit") -> Path:
    """Where outputs go: /kaggle/working on Kaggle; Google Drive on Colab when mounted (so a
    disconnect loses nothing), else /content; locally the project root (runs/ lands in one place
    whether a notebook or the CLI wrote it)."""
    env = detect()
    if env == "kaggle":
        path = Path(os.environ.get("KAGGLE_WORKING_ROOT", KAGGLE_WORKING))
    elif env == "colab":
        drive = Path("/content/drive/MyDrive")
        path = drive / name if drive.is_dir() else Path("/content") / name
        old = path.parent / "commonlit-kit"  # the folder's name before the kit served any competition
        if name == "kaggle-text-kit" and old.is_dir() and not path.exists():
            path = old
    else:  # the checkout's root, from a notebook (run in notebooks/) as from the shell
        path = project_root()
    path.mkdir(parents=True, exist_ok=True)
    return path


def runs_dir(runs_dir: str = "", models_dataset: str = "") -> Path:
    """Where run folders live: `runs_dir` if given; on Kaggle the attached models dataset when
    named; else working_dir() / "runs"."""
    if runs_dir:
        return Path(runs_dir)
    if detect() == "kaggle" and models_dataset:
        return dataset_dir(models_dataset)
    return working_dir() / "runs"


def output_dir(out_dir: str = "", preferred=None) -> Path:
    """Where a notebook writes: `out_dir` if given, else `preferred` when writable (e.g. beside
    the runs), else working_dir() (attached Kaggle datasets are read-only)."""
    if out_dir:
        path = Path(out_dir)
    elif preferred is not None and os.access(preferred, os.W_OK):
        path = Path(preferred)
    else:
        path = working_dir()
    path.mkdir(parents=True, exist_ok=True)
    return path


def versions(*packages: str) -> dict:
    """The versions a result was made with: the kit, torch, transformers, then `packages` (import
    names, e.g. "accelerate"), then Python."""
    import importlib

    from . import __version__

    found = {"kit": __version__}
    for name in ("torch", "transformers", *packages):
        found[name] = importlib.import_module(name).__version__
    return {**found, "python": sys.version.split()[0]}
