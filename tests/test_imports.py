"""The kit's import graph, built from the source: no circles (so every arrow points down a floor),
and a kit import inside a function only where it keeps a light module light, said beside it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "utils"


def kit_imports(path: Path) -> list:
    """[(module imported, line, inside a function)] of a module's imports of the kit's own modules,
    wherever they stand (a script-only `if __name__ == "__main__":` block counts too)."""
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    tree = ast.parse(path.read_text())
    in_function = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_function |= {id(n) for n in ast.walk(node) if n is not node}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "utils":
            names = [node.module.split(".")[1]] if "." in node.module else [a.name for a in node.names]
        else:
            continue
        found += [(n, node.lineno, id(node) in in_function) for n in names if n in modules]
    return found


def import_graph() -> dict:
    """{module: the kit modules it imports}, every import counted (top level and inside functions)."""
    return {p.stem: {m for m, _, _ in kit_imports(p)} for p in sorted(PACKAGE.glob("*.py"))}


def cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1 or c[0] in graph.get(c[0], ())]


def floors(graph: dict) -> dict:
    """{module: its floor}: 0 for a module that imports no kit module, else one above the highest
    floor it imports (the graph must have no cycle)."""
    memo: dict = {}

    def floor(m):
        if m not in memo:
            memo[m] = 1 + max((floor(d) for d in graph[m]), default=-1)
        return memo[m]

    return {m: floor(m) for m in graph}


def test_cycle_finder_finds_a_circle_and_floors_count_up():
    # The checker itself, on a graph with a circle and on one without.
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}}) == [["a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert floors({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"c"}}) == {"a": 2, "b": 1, "c": 0, "d": 1}


def test_the_kit_has_no_import_circle():
    graph = import_graph()
    assert "train" in graph and "competition" in graph["train"]  # the graph is read, not empty
    found = cycles(graph)
    assert not found, f"import circles: {found} (move the shared names down, to a module both import)"
    # Every arrow points down: a module's floor is above each module it imports.
    level = floors(graph)
    bad = [(m, d) for m, deps in graph.items() for d in deps if level[d] >= level[m]]
    assert not bad, bad


def test_each_import_inside_a_function_says_why():
    # A kit import inside a function is allowed where it keeps a module light (tests/
    # test_light_imports.py, utils.kaggle without torch): a comment on its line says which.
    unexplained = []
    for path in sorted(PACKAGE.glob("*.py")):
        lines = path.read_text().splitlines()
        for module, line, inside in kit_imports(path):
            if inside and "#" not in lines[line - 1]:
                unexplained.append(f"{path.name}:{line} imports {module}")
    assert not unexplained, unexplained
