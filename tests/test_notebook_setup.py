"""Copies that nothing else keeps equal: the notebooks' setup cell (the same cell in every kit
notebook, in both its .py and its .ipynb form), and the test suite's own shape (no test module
imports another: shared helpers live in tests/helpers.py, shared fixtures in tests/conftest.py; every
test module marks `versions` the tests whose outcome can depend on the versions of transformers,
accelerate, kaggle or peft, or is named in NOT_VERSIONED)."""

import ast
import json
from collections import Counter

import pytest
from conftest import ROOT

NB = ROOT / "notebooks"
NOTEBOOKS = sorted(p.stem for p in NB.glob("0*_*.py"))

# The setup cell is the first code cell after the parameters cell: it finds the kit (attached
# Kaggle dataset, Colab install or local checkout) and imports utils. Recognised by this line:
KIT_LOOKUP = 'kaggle_input = Path(os.environ.get("KAGGLE_INPUT_ROOT", "/kaggle/input"))'
# Notebooks whose setup cell is the shared cell followed by lines of their own (after a blank line).
EXTENDED = {"01_eda": "then installs the pinned textstat from the kit's wheels (utils.wheels)"}
# Notebooks with no setup cell at all: none today (a new one without it must be named here).
WITHOUT_SETUP: dict = {}


def cells_of_py(path) -> list:
    """(kind, tags, text) of each cell of a jupytext py:percent file, the text as written."""
    cells, header, body = [], None, []
    for line in path.read_text().splitlines() + ["# %%"]:
        if line.startswith("# %%"):
            if header is not None:
                kind = "markdown" if "[markdown]" in header else "code"
                tags = ("parameters",) if "parameters" in header else ()
                cells.append((kind, tags, "\n".join(body).strip("\n")))
            header, body = line, []
        elif header is not None:
            body.append(line)
    return cells


def cells_of_ipynb(path) -> list:
    nb = json.loads(path.read_text())
    return [(c["cell_type"], tuple(c.get("metadata", {}).get("tags", ())), "".join(c["source"]).strip("\n"))
            for c in nb["cells"]]


def setup_cell(cells):
    """The first code cell after the parameters cell, if it looks up the kit; else None."""
    params = next(i for i, (kind, tags, _) in enumerate(cells) if "parameters" in tags)
    code = next((text for kind, _, text in cells[params + 1:] if kind == "code"), None)
    return code if code is not None and KIT_LOOKUP in code else None


def all_setup_cells() -> dict:
    """{'02_train.py': cell text, '02_train.ipynb': ...} of every notebook not in WITHOUT_SETUP."""
    found = {}
    for name in NOTEBOOKS:
        for suffix, read in ((".py", cells_of_py), (".ipynb", cells_of_ipynb)):
            path = NB / f"{name}{suffix}"
            assert path.is_file(), f"{path.name} is missing (the notebooks are paired py:percent/ipynb)"
            cell = setup_cell(read(path))
            if name in WITHOUT_SETUP:
                assert cell is None, f"{path.name} has a setup cell now: remove it from WITHOUT_SETUP"
            else:
                assert cell is not None, (f"{path.name}: no setup cell (the first code cell after the "
                                          f"parameters cell, with {KIT_LOOKUP!r}); if on purpose, name it in "
                                          "WITHOUT_SETUP")
                found[path.name] = cell
    return found


def test_the_notebooks_are_found():
    assert len(NOTEBOOKS) >= 4, NOTEBOOKS
    assert not set(EXTENDED) - set(NOTEBOOKS) and not set(WITHOUT_SETUP) - set(NOTEBOOKS)


def test_every_notebook_has_the_same_setup_cell():
    """Byte-identical in every notebook and both forms (EXTENDED ones: as their first lines)."""
    cells = all_setup_cells()
    plain = {f: c for f, c in cells.items() if f.split(".")[0] not in EXTENDED}
    assert len(plain) >= 2, "fewer than two notebooks share the setup cell: nothing to compare"
    shared, _ = Counter(plain.values()).most_common(1)[0]
    differ = {}
    for f, cell in cells.items():
        if f.split(".")[0] in EXTENDED:
            ok = cell.startswith(shared + "\n\n") and len(cell) > len(shared) + 2
        else:
            ok = cell == shared
        if not ok:
            ours, theirs = cell.splitlines(), shared.splitlines()
            i = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
            differ[f] = (f"line {i + 1}: {ours[i] if i < len(ours) else '<end>'!r}, "
                         f"the others': {theirs[i] if i < len(theirs) else '<end>'!r}")
    assert not differ, "setup cell differs from the other notebooks' in " + "; ".join(
        f"{f} ({why})" for f, why in sorted(differ.items()))


@pytest.mark.parametrize("name", sorted(EXTENDED))
def test_an_extended_setup_cell_adds_lines_after_the_shared_ones(name):
    cells = all_setup_cells()
    py, ipynb = cells[f"{name}.py"], cells[f"{name}.ipynb"]
    assert py == ipynb, f"{name}: the .py and .ipynb setup cells differ"


# ----------------------------------------------------------------------------- the suite's shape


def imported_test_modules(path) -> list:
    """(line, module) of every import of a test module in `path`: `import test_x`, `from test_x
    import ...`, `from tests.test_x import ...`, `from tests import test_x`, import_module('test_x')."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [base] + [f"{base}.{a.name}".lstrip(".") for a in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
              in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            names = [node.args[0].value]
        for name in names:
            parts = name.split(".")
            if parts[0] == "tests":
                parts = parts[1:]
            if parts and parts[0].startswith("test_"):
                found.append((node.lineno, name))
                break
    return sorted(found)


def test_no_test_module_imports_another_test_module():
    offenders = [f"{p.name}:{line} imports {mod}" for p in sorted((ROOT / "tests").glob("*.py"))
                 for line, mod in imported_test_modules(p)]
    assert not offenders, ("move what is shared into tests/helpers.py (functions) or tests/conftest.py "
                           "(fixtures): " + "; ".join(offenders))


def test_the_import_check_sees_every_form(tmp_path):
    src = tmp_path / "t.py"
    src.write_text("import test_a\nfrom test_b import x\nfrom tests.test_c import y\nfrom tests import test_d\n"
                   "def f():\n    from test_e import z\n    importlib.import_module('test_f')\n"
                   "from . import test_g\nimport helpers\nfrom conftest import ROOT\nfrom utils import test_tools\n")
    assert [m for _, m in imported_test_modules(src)] == [
        "test_a", "test_b", "tests.test_c", "tests.test_d", "test_e", "test_f", "test_g"]


# Test modules none of whose tests is marked `versions` (pyproject.toml), so that `make test-tf4`
# (the floor leg: -m "versions and not integration") skips them; the Makefile says why. A new
# module is marked (pytestmark = pytest.mark.versions, or on its tests) or named here.
# Kit logic over trained runs, whose calls into transformers and accelerate are those test_train,
# test_model, test_decoders and test_reliability make at the floors: run once, on today's versions.
OVER_RUNS = "kit logic over runs trained through the calls the marked training tests make"
NOT_VERSIONED = {
    "test_competition": "descriptions, metrics and init's inference: pandas and scikit-learn",
    "test_competition_split": "descriptions, tables, metrics of one's own: pandas",
    "test_homes": "where names live in the source (ast)",
    "test_bench_records": "the bench scripts' recorded command lines and result rows: plain Python",
    "test_ranking_defects": "the ranking family's input checks and messages: pandas, and runs of test_ranking's "
                            "shapes, whose training there is marked",
    "test_imports": "the kit's import graph, read from the source (ast)",
    "test_joins": "joined tables and where they are found: pandas",
    "test_notebook_setup": "notebook cells and the test suite's shape",
    "test_notebooks": "the notebooks only call utils, whose versioned paths the marked tests cover",
    "test_pooling": "pooling layers: torch only",
    "test_wheels": "textstat's wheels installed offline",
    "test_blend_members": f"blend members and their identities: {OVER_RUNS}",
    "test_competition_runs": f"every competition shape end to end: {OVER_RUNS}",
    "test_honesty": f"fold k's labels never reach fold k: {OVER_RUNS}",
    "test_predict_ensemble": f"prediction and blending of saved runs: {OVER_RUNS}",
    "test_pseudo": f"pseudo-labels and students: {OVER_RUNS}",
    "test_distil": f"distilled students and their teachers' signal: {OVER_RUNS}",
    "test_init_shapes": f"init's inference on tables of 2025's shapes (pandas) and the bar a run prints: {OVER_RUNS}",
    "test_tune": f"Optuna studies (optuna has no floor): {OVER_RUNS}",
    "test_kaggle": f"bundles and offline kernels (the kaggle CLI at its floor: test_kaggle_cli): {OVER_RUNS}",
    "test_gpu_bench": f"the benchmark's arms through the kit's own loop: {OVER_RUNS}",
}


def marks_versions(path) -> bool:
    """Whether a module marks itself or any of its tests `versions` (pytest.mark.versions)."""
    return any(isinstance(node, ast.Attribute) and node.attr == "versions"
               and ast.unparse(node.value) == "pytest.mark"
               for node in ast.walk(ast.parse(path.read_text())))


def test_every_test_module_says_whether_it_depends_on_the_versions():
    modules = {p.stem: marks_versions(p) for p in (ROOT / "tests").glob("test_*.py")}
    unsaid = sorted(m for m, marked in modules.items() if not marked and m not in NOT_VERSIONED)
    assert not unsaid, (f"{unsaid}: mark the tests whose outcome can depend on the versions of transformers, "
                        "accelerate, kaggle or peft with @pytest.mark.versions (the floor leg runs them), or name "
                        "the module in NOT_VERSIONED with why")
    both = sorted(m for m, marked in modules.items() if marked and m in NOT_VERSIONED)
    assert not both, f"{both}: marked `versions` and named in NOT_VERSIONED"
    assert not set(NOT_VERSIONED) - set(modules), set(NOT_VERSIONED) - set(modules)
