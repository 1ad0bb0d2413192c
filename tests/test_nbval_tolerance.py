"""The notebook check's numeric tolerance (`.ci/nbval_tolerance.py`).

CI re-executes every chapter with nbval. The plugin lets a number printed with two decimals move
by a few units of its last digit (another CPU rounds float sums differently) and fails on
anything larger or on any change of the text around the numbers. The last two tests run nbval
for real on a small notebook: last-bit noise passes, a wrong number fails.
"""

from __future__ import annotations

import doctest
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / ".ci" / "nbval_tolerance.py"


def _load():
    spec = importlib.util.spec_from_file_location("nbval_tolerance", PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tol = _load()


def test_doctests_of_the_plugin():
    failures, tried = doctest.testmod(tol, verbose=False)
    assert tried >= 5 and failures == 0


@pytest.mark.parametrize(
    "ref, new",
    [
        ("csfcube all/map 40.02 [33.8, 46.0]", "csfcube all/map 40.01 [33.8, 46.0]"),  # last digit
        ("background  52.52", "background  52.49"),  # three units of the last decimal
        ("trained    10.00\nuntrained   9.99", "trained    9.99\nuntrained  10.00"),  # width changes
        ("background_label  2,173   1,403", "background_label  2,172   1,404"),  # one flipped label
        ("loss 1.7582", "loss 1.7583"),
        ("diff 0.00 [-2.58, 2.18]", "diff -0.00 [-2.58, 2.18]"),
        ("cosine 1.2e-07", "cosine 1.5e-07"),
    ],
)
def test_last_bit_noise_passes(ref, new):
    assert tol.texts_match(ref, new)


@pytest.mark.parametrize(
    "ref, new",
    [
        ("csfcube all/map 40.02", "csfcube all/map 40.12"),  # a tenth of a point is a real change
        ("MAP 39.40", "MAP 39.50"),
        ("2,173 sentences", "2,183 sentences"),
        ("positives (4, 3, 1)", "positives (4, 3, 2)"),  # shapes and small counts are exact
        ("436 optimizer steps", "437 optimizer steps"),
        ("mean pooling 41.68", "mean pooling 41.68 41.68"),  # one more number
        ("verdict: within noise", "verdict: better"),  # words are exact
        ("fold1_test 38.62", "fold2_test 38.62"),  # digits inside names are words
        ("0.508", "0.514"),
    ],
)
def test_real_changes_fail(ref, new):
    assert not tol.texts_match(ref, new)


def test_tolerant_text_is_what_nbval_compares():
    a, b = tol.TolerantText("MAP 40.02"), tol.TolerantText("MAP 40.01")
    assert not (a != b) and a == b
    assert tol.TolerantText("MAP 40.02") != "MAP 40.52"


def _notebook(path: Path, printed: str, stored: str) -> None:
    """A one-cell notebook that prints ``printed`` but stores ``stored`` as its output."""
    nb = {
        "cells": [{
            "cell_type": "code", "execution_count": 1, "id": "c1", "metadata": {},
            "source": [f"print({printed!r})"],
            "outputs": [{"name": "stdout", "output_type": "stream", "text": [stored + "\n"]}],
        }],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb), encoding="utf-8")


def _nbval(path: Path, exact: bool) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / ".ci"), "NBVAL_EXACT": "1" if exact else "0"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env",
         "-p", "nbval_tolerance", str(path)],
        cwd=path.parent, env=env, capture_output=True, text=True, timeout=300,
    )


@pytest.mark.slow
def test_nbval_with_the_plugin_passes_noise_and_fails_a_wrong_number(tmp_path):
    pytest.importorskip("nbval")
    noisy = tmp_path / "noisy.ipynb"
    _notebook(noisy, printed="aggregated MAP 40.01, labels 2,172 / 1,404", stored="aggregated MAP 40.02, labels 2,173 / 1,403")
    assert _nbval(noisy, exact=True).returncode != 0  # plain nbval refuses last-bit noise ...
    assert _nbval(noisy, exact=False).returncode == 0  # ... the plugin accepts it
    wrong = tmp_path / "wrong.ipynb"
    _notebook(wrong, printed="aggregated MAP 40.32, labels 2,173 / 1,403", stored="aggregated MAP 40.02, labels 2,173 / 1,403")
    result = _nbval(wrong, exact=False)
    assert result.returncode != 0, result.stdout
    assert "40.02" in result.stdout and "40.32" in result.stdout  # the report shows both numbers
