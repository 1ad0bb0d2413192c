"""The library's layout rules (issue "The library, second edition"): small modules, short functions,
dataset loaders that load no model code, benchmarks that use only public names."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted((ROOT / "unifar").rglob("*.py"))
MAX_MODULE_LINES = 420
MAX_FUNCTION_LINES = 80


def test_no_module_is_long():
    long = {m.relative_to(ROOT).as_posix(): n for m in MODULES
            if (n := len(m.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"split these modules (over {MAX_MODULE_LINES} lines): {long}"


def test_no_function_is_long():
    long = {}
    for m in MODULES:
        for node in ast.walk(ast.parse(m.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"{m.relative_to(ROOT).as_posix()}:{node.name}"
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[key] = n
    assert not long, f"split these functions (over {MAX_FUNCTION_LINES} lines): {long}"


@pytest.mark.parametrize("package", ["datasets", "evaluation.csfcube", "evaluation.metrics", "cli", "paper", "facets"])
def test_loaders_and_the_csfcube_protocol_load_no_model_code(package):
    code = (f"import sys, unifar.{package}; "
            "bad = [m for m in ('torch', 'transformers', 'unifar.model', 'unifar.rhetoric') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    if package == "datasets":
        code = code.replace("import sys, unifar.datasets;", "import sys, pkgutil, importlib, unifar.datasets; "
                            "[importlib.import_module('unifar.datasets.' + i.name) for i in "
                            "pkgutil.iter_modules(unifar.datasets.__path__)];")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, f"unifar.{package} imports {out.stdout.strip()} {out.stderr[-500:]}"


def test_benchmarks_import_no_private_name():
    bad = []
    for script in sorted((ROOT / "benchmarks").rglob("*.py")):
        for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("unifar"):
                bad += [f"{script.relative_to(ROOT)}: {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
    assert not bad, f"make these public or stop using them: {bad}"
