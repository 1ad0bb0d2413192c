"""The API reference has one page per module of the package, in the TOC (``.ci/api_pages.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_api_pages_match_the_package():
    out = subprocess.run([sys.executable, str(ROOT / ".ci" / "api_pages.py"), "--check"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, f"run `python .ci/api_pages.py`:\n{out.stdout}{out.stderr}"


def _docstrings(tree):
    import ast

    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield getattr(node, "name", "<module>"), doc


def test_docstring_math_is_restructuredtext():
    """Docstrings are reStructuredText on the API pages: ``$...$`` is not math there, and its
    backslashes are eaten (``\\frac`` showed as ``frac``); equations use ``.. math::`` or
    ``:math:```...``."""
    import ast
    import re

    dollar = re.compile(r"\$\$|(?<![\w$])\$[^$\s][^$]*\$(?![\w$])")
    found = [f"{path.relative_to(ROOT)}: {name}" for path in sorted((ROOT / "unifar").rglob("*.py"))
             for name, doc in _docstrings(ast.parse(path.read_text(encoding="utf-8")))
             if dollar.search(re.sub(r"``.*?``", "", doc, flags=re.S))]
    assert not found, f"docstrings with $-math (use .. math:: or :math:): {found}"
