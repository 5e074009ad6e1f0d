"""The shape of the package: layers that import only downwards, short functions, one name per
module, private names kept private, and a repository that reads nothing outside itself.

The import graph counts every import a reader follows, those made inside functions included,
and importing ``a.b.c`` counts as importing the packages ``a.b`` and ``a`` whose ``__init__``
runs first (within its own package a module's parent is already running, so that edge is not
counted).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mlacalc"
#: code a program writes, not a person (:mod:`mlacalc.cost.formulas.codegen`)
GENERATED = {PACKAGE / "cost" / "_generated.py"}
LONGEST_FUNCTION = 150


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            out[".".join(parts[:-1])] = (path, True)
        else:
            out[".".join(parts)] = (path, False)
    return out


def _targets(name: str, is_pkg: bool, node: ast.AST, modules: dict) -> list[str]:
    """The package modules an import statement loads (the deepest existing module of each)."""
    if isinstance(node, ast.Import):
        found = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = name.split(".")[: None if is_pkg else -1]
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join(parts + ([base] if base else []))
        found = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
    out = []
    for target in found:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target.split(".")[0] == "mlacalc":
            out.append(target)
    return out


@cache
def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (anywhere in its body), parents included."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in modules.items():
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _targets(name, is_pkg, node, modules):
                    parts = target.split(".")
                    for i in range(1, len(parts) + 1):
                        up = ".".join(parts[:i])
                        if up in modules and not name.startswith(up + ".") and up != name:
                            edges.add(up)
        graph[name] = edges
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circles():
    circles = _circles(import_graph())
    assert not circles, "import circles (deferred imports counted):\n" + "\n".join(
        " <-> ".join(c) for c in circles
    )


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _circles(graph) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def _functions(paths):
    for path in paths:
        if path in GENERATED:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield path, node


def test_no_function_over_150_lines():
    paths = [*PACKAGE.rglob("*.py"), *(ROOT / "appviews").rglob("*.py"), ROOT / "app.py"]
    long = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)"
        for path, node in _functions(paths)
        if (n := node.end_lineno - node.lineno + 1) > LONGEST_FUNCTION
    ]
    assert not long, f"functions over {LONGEST_FUNCTION} lines:\n" + "\n".join(long)


def test_one_name_per_module():
    names = Counter(p.stem for p in PACKAGE.rglob("*.py") if p.stem != "__init__")
    twice = sorted(n for n, c in names.items() if c > 1)
    assert not twice, f"module names used twice in the package: {twice}"


def test_private_names_stay_in_their_module():
    """No module imports another module's ``_private`` name (the package's own private
    modules, such as ``models.hf._translate`` or ``cost._generated``, are imported whole or by
    their public names)."""
    crossing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mlacalc"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    is_module = (PACKAGE.parent / (full.replace(".", "/") + ".py")).exists()
                    if alias.name.startswith("_") and not is_module:
                        crossing.append(f"{path.relative_to(ROOT)}:{node.lineno} {full}")
    assert not crossing, "private names imported across modules:\n" + "\n".join(crossing)


_OUTSIDE = re.compile(r"\.\./shared|/work/|parents\[2\]|\.parent\.parent\.parent")


def test_nothing_is_read_from_outside_the_checkout():
    """The product, its tests and benchmarks name no path beside or above the repository."""
    paths = [
        *PACKAGE.rglob("*.py"),
        *(ROOT / "tests").rglob("*.py"),
        *(ROOT / "benchmarks").rglob("*.py"),
        *(ROOT / "appviews").rglob("*.py"),
        ROOT / "app.py",
        ROOT / "conftest.py",
    ]
    here = Path(__file__).resolve()
    hits = [
        f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
        for path in paths
        if path.resolve() != here
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if _OUTSIDE.search(line)
    ]
    assert not hits, "paths outside the checkout:\n" + "\n".join(hits)


def _deferred_imports(tree: ast.Module):
    """Import statements inside functions (a module's top level, and its top-level ``if`` and
    ``try`` blocks, are not deferred), with the statement list each stands in."""
    for holder in ast.walk(tree):
        if isinstance(holder, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for block in ast.walk(holder):
                for name in ("body", "orelse", "finalbody"):
                    stmts = getattr(block, name, None)
                    if isinstance(stmts, list):
                        for i, stmt in enumerate(stmts):
                            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                                yield stmts, i


def test_every_deferred_import_says_why():
    """An import inside a function stays only where it keeps start-up light or an optional
    extra optional (numpy, sympy, pyarrow, scipy, PyTorch), and a ``# deferred:`` comment
    above it (or above the imports it is grouped with, or its ``try``) says which."""
    unexplained = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text().splitlines()
        for stmts, i in _deferred_imports(ast.parse("\n".join(lines))):
            while i > 0 and isinstance(stmts[i - 1], (ast.Import, ast.ImportFrom)):
                i -= 1
            first = stmts[i].lineno - 1
            near = lines[max(0, first - 3) : first + 1]
            if not any("deferred:" in line for line in near):
                unexplained.append(f"{path.relative_to(ROOT)}:{stmts[i].lineno}")
    assert not unexplained, "imports inside functions without a '# deferred:' reason:\n" + (
        "\n".join(unexplained)
    )
