"""One home per concept, pinned: the task names are spelled only where tasks are described
(utils/competition.py) and where model outputs are defined (utils/objective.py); a run folder's
file names only in utils/runs.py (and a fold folder's kit_config.json and config.json in utils/files.py,
the bottom of the import graph); no
function in utils over 100 lines.

    python tests/test_homes.py [ROOT]   # the counts per module, for any checkout
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TASK_NAMES = {"regression", "multi_regression", "binary", "multiclass", "ordinal", "classification"}
RUN_FILES = ("oof.csv", "folds.csv", "metrics.json", "history.json", "blend.json", "config.json")


def _strings(tree: ast.AST):
    """Every string constant in code (f-string parts too), docstrings left out."""
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.value


def counts(root: Path = ROOT) -> dict:
    """{module: (task-name strings, run-file-name strings)} over utils/*.py, and the functions
    over 100 lines [(module.function, lines)]."""
    per, long = {}, []
    for path in sorted((root / "utils").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        strings = list(_strings(tree))
        tasks = sum(s in TASK_NAMES for s in strings)
        files = sum(any(f in s for f in RUN_FILES) for s in strings)
        if tasks or files:
            per[path.stem] = (tasks, files)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > 100:
                    long.append((f"{path.stem}.{node.name}", n))
    return {"modules": per, "long": long}


def test_task_names_live_in_the_description_and_the_objective():
    where = {m for m, (tasks, _) in counts()["modules"].items() if tasks}
    assert where <= {"competition", "infer", "objective"}, where  # infer: init's guess of a task


def test_run_file_names_live_in_the_run_home():
    where = {m for m, (_, files) in counts()["modules"].items() if files}
    assert where <= {"runs", "files"}, where


def test_no_function_over_100_lines():
    assert counts()["long"] == []


def test_the_counter_sees_what_it_counts(tmp_path):
    # The counts above cannot pass by counting nothing: a module that spells them is seen.
    (tmp_path / "utils").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(101))
    (tmp_path / "utils" / "m.py").write_text(
        f'"""oof.csv in a docstring is not counted"""\nA = "classification"\nB = f"{{1}}/oof.csv"\n'
        f"def f():\n{body}\n")
    c = counts(tmp_path)
    assert c["modules"] == {"m": (1, 1)} and c["long"] == [("m.f", 102)]


if __name__ == "__main__":
    c = counts(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT)
    total = Counter()
    print(f"{'module':12s} {'task names':>10s} {'run files':>10s}")
    for m, (t, f) in c["modules"].items():
        print(f"{m:12s} {t:10d} {f:10d}")
        total.update(tasks=t, files=f)
    tasks_in = sum(1 for t, _ in c["modules"].values() if t)
    files_in = sum(1 for _, f in c["modules"].values() if f)
    print(f"task names: {total['tasks']} in {tasks_in} modules; run file names: {total['files']} in "
          f"{files_in} modules; functions over 100 lines: {', '.join(f'{n} ({k})' for n, k in c['long']) or 'none'}")


def test_the_start_of_a_training_fold_never_asks_a_module_back_up(tmp_path, tiny_bert):
    """From run_cv to the fold's first forward, every call goes down the import graph: the config and
    the competition's objective are handed down, never asked back from a higher module."""
    from conftest import tiny_frame
    from helpers import cfg_for, import_floors, utils_calls

    from utils.train import run_cv

    tiny_frame(20).to_csv(tmp_path / "train.csv", index=False)
    cfg = cfg_for(tmp_path / "train.csv", tmp_path / "run", tiny_bert, epochs=1, only_folds=(0,), max_steps=1)
    first_forward = lambda frame: frame.f_code.co_name == "forward" and "shapes" in frame.f_code.co_filename  # noqa: E731
    metrics, calls = utils_calls(lambda: run_cv(cfg), until=first_forward)
    floors = import_floors()
    assert np.isfinite(metrics["cv"]) and len(calls) > 50  # the walk was recorded, up to the first forward
    assert not [c for c in calls if floors[c.callee] > floors[c.caller]], calls
