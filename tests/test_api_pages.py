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
