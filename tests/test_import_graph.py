"""The package's import graph (issue "The library, third pass"), walked from the source:

* no import cycles between modules, counting the imports inside functions too (a cycle held
  together by a function-level import is still a cycle: it just fails later, at call time), and
  none between the subpackages (``construction`` and ``evaluation`` do not import each other);
* a package-internal import sits inside a function only to keep a light module light: the module
  importing it loads none of :data:`HEAVY` at import time and the module imported does. The two
  command-line dispatchers are the exception: each sub-command imports what it runs, so that
  ``unifar search`` does not pay for training code;
* what the graph calls light really is light: importing each such module in a fresh interpreter
  loads none of :data:`HEAVY`.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections import defaultdict
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: third-party libraries that are slow to import (PyTorch and what sits on it, the data-frame and
#: plotting stacks) or optional (the web server, HTTP): what a lazy import may defer
HEAVY = frozenset({"torch", "transformers", "safetensors", "pandas", "datasets", "pytorch_metric_learning",
                   "seaborn", "sklearn", "scipy", "matplotlib", "faiss", "bm25s", "werkzeug", "requests",
                   "snowballstemmer"})
#: modules whose functions import per sub-command on purpose (start-up time of the CLI)
DISPATCHERS = frozenset({"unifar.cli", "unifar.search.cli"})


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted((ROOT / "unifar").rglob("*.py"))}


def _lazy_names() -> dict[str, dict[str, str]]:
    """``{package: {name: module}}`` from the packages' ``_LAZY`` tables (``from unifar import
    UniFAR`` imports ``unifar.model`` through the package's ``__getattr__``)."""
    out = {}
    for name, path in MODULES.items():
        if path.name == "__init__.py":
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "_LAZY" for t in node.targets):
                    out[name] = {k: f"{name}.{v}" for k, v in ast.literal_eval(node.value).items()}
    return out


LAZY = _lazy_names()


@cache
def _imports(module: str) -> tuple[tuple[str, ...], tuple[tuple[tuple[str, ...], int], ...], bool]:
    """(package modules imported at module level, (package modules, line) of each import statement
    inside a function, whether a :data:`HEAVY` library is imported at module level). Imports under
    ``if TYPE_CHECKING:`` are not run and do not count."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip |= {id(n) for n in ast.walk(node)}
    in_function = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_function |= {id(n) for n in ast.walk(node)}
    top, inner, heavy = set(), [], False
    for node in ast.walk(tree):
        if id(node) in skip or not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:  # from PKG import a, b: PKG, PKG.a, PKG.b and the modules of PKG's lazy names
            pkg = node.module or ""
            if node.level:
                base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                pkg = ".".join(base[: len(base) - node.level + 1] + ([pkg] if pkg else []))
            names = [pkg] + [f"{pkg}.{a.name}" for a in node.names] + \
                [LAZY[pkg][a.name] for a in node.names if a.name in LAZY.get(pkg, {})]
        ours = sorted({n for n in names if n in MODULES})
        if id(node) in in_function:
            if ours:
                inner.append((tuple(ours), node.lineno))
        else:
            top |= set(ours)
            heavy |= any(n.split(".")[0] in HEAVY for n in names)
    return tuple(sorted(top)), tuple(inner), heavy


@cache
def is_heavy(module: str) -> bool:
    """Whether importing ``module`` loads a :data:`HEAVY` library (through its module-level
    imports, its packages' ``__init__`` included)."""
    seen, todo = set(), [module]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        top, _, heavy = _imports(m)
        if heavy:
            return True
        parents = [".".join(m.split(".")[:i]) for i in range(1, m.count(".") + 1)]
        todo += [t for t in [*top, *parents] if t in MODULES]
    return False


def _graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports, at module level or inside functions."""
    graph = defaultdict(set)
    for m in MODULES:
        top, inner, _ = _imports(m)
        graph[m] |= set(top) | {t for targets, _ in inner for t in targets}
        graph[m] -= {p for p in MODULES if m.startswith(p + ".") or p == m}  # a module's own packages
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_the_import_graph_has_no_cycle():
    cycles = _cycles(_graph())
    assert not cycles, f"these modules import each other (at module level or inside functions): {cycles}"


def test_no_two_packages_import_each_other():
    """``unifar.construction`` may use ``unifar.evaluation`` (mining ranks with its retrievers) or
    the other way round, not both: the packages form layers (datasets < rhetoric < evaluation <
    construction, search)."""
    def package(m: str) -> str:
        return ".".join(m.split(".")[:2])

    packages = defaultdict(set)
    for m, targets in _graph().items():
        packages[package(m)] |= {package(t) for t in targets if package(t) not in (package(m), "unifar")}
    cycles = _cycles(packages)
    assert not cycles, f"these packages import each other: {cycles}"


def test_function_level_imports_only_keep_a_light_module_light():
    bad = []
    for m in MODULES:
        if m in DISPATCHERS:
            continue
        for targets, line in _imports(m)[1]:
            if is_heavy(m) or not any(is_heavy(t) for t in targets):
                why = "the module is heavy anyway" if is_heavy(m) else f"{targets[-1]} loads nothing heavy"
                bad.append(f"{MODULES[m].relative_to(ROOT)}:{line} imports {targets[-1]} ({why})")
    assert not bad, "move these imports to the top of their module:\n" + "\n".join(bad)


def test_light_modules_load_no_heavy_library():
    light = sorted(m for m in MODULES if not is_heavy(m) and m != "unifar.__main__")
    assert "unifar.cli" in light and "unifar.evaluation.csfcube" in light
    code = (
        "import importlib, json, sys\n"
        f"heavy = {sorted(HEAVY)!r}\n"
        "out = {}\n"
        f"for m in {light!r}:\n"
        "    importlib.import_module(m)\n"
        "    out[m] = [h for h in heavy if h in sys.modules]\n"
        "    if out[m]: break\n"
        "print(json.dumps(out))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-2000:]
    loaded = {m: h for m, h in json.loads(res.stdout).items() if h}
    assert not loaded, f"these modules are light by their imports but load heavy libraries: {loaded}"
