"""Every chapter can be handed out: learning goals, graded exercises, worked solutions that run.

The format, which the book's chapters share (see any chapter's last cells):

* the chapter's second markdown cell (or its first, after the title) holds
  ``**After this chapter you will be able to**`` and 3-6 bullets;
* a ``## Exercises`` heading, then one ``### <stars> <title>`` heading per exercise (3-5 of
  them; the book numbers them), ``★`` (read the chapter, one library call), ``★★`` (a small
  experiment) or ``★★★`` (an open question, a full-profile run or a GPU), in non-decreasing
  order, each in a markdown cell of its own (``tests/test_book_pages.py`` limits a cell's prose);
* under each, one ``:::{dropdown} Solution`` block with a worked solution; the ``python`` code
  fences inside it run here, in order, in one namespace per exercise, from the repository root.

Solutions are written at a size that runs in seconds (a comment in the code says what to change
for the real experiment), so that CI runs every one of them and none can rot: this is the
"small profile" of the exercises. They may read ``data/`` and the shipped encoders, never
``artifacts/`` (CI runs the tests before any chapter has written it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

GOALS = "**After this chapter you will be able to**"
HEADING = re.compile(r"^### (★{1,3}) (.+)$", re.M)
DROPDOWN = re.compile(r"^:::\{dropdown\} Solution\s*$(.*?)^:::\s*$", re.M | re.S)
PYTHON = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)


@dataclass
class Exercise:
    chapter: str
    number: int
    stars: int
    title: str
    text: str
    solution: str | None

    @property
    def code(self) -> list[str]:
        return [block for block in PYTHON.findall(self.solution or "")]


def markdown_cells(nb: Path) -> list[str]:
    cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def exercises(nb: Path) -> list[Exercise]:
    """The exercises of a chapter: everything from its ``## Exercises`` heading on."""
    md = markdown_cells(nb)
    start = [i for i, text in enumerate(md) if re.search(r"^## Exercises\s*$", text, re.M)]
    if len(start) != 1:
        return []
    text = "\n\n".join(md[start[0]:])
    text = text[re.search(r"^## Exercises\s*$", text, re.M).end():]
    heads = list(HEADING.finditer(text))
    out = []
    for k, head in enumerate(heads):
        body = text[head.end(): heads[k + 1].start() if k + 1 < len(heads) else len(text)]
        solutions = DROPDOWN.findall(body)
        out.append(Exercise(nb.stem, k + 1, len(head.group(1)), head.group(2).strip(),
                            body, solutions[0] if len(solutions) == 1 else None))
    return out


def all_solutions_with_code() -> list[Exercise]:
    return [ex for nb in CHAPTERS for ex in exercises(nb) if ex.code]


@pytest.mark.parametrize("nb", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_opens_with_learning_goals(nb: Path) -> None:
    md = markdown_cells(nb)
    head = [text for text in md[:2] if GOALS in text]
    assert head, f"{nb.name}: no '{GOALS}' in its first two markdown cells"
    goals = head[0].split(GOALS, 1)[1]
    bullets = re.findall(r"^[*-] \S", goals.split("\n\n**", 1)[0], re.M)
    assert 3 <= len(bullets) <= 6, f"{nb.name}: {len(bullets)} learning goals (want 3-6)"


@pytest.mark.parametrize("nb", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_ends_with_graded_exercises_and_solutions(nb: Path) -> None:
    found = exercises(nb)
    assert 3 <= len(found) <= 5, f"{nb.name}: {len(found)} exercises (want 3-5 '### ★ ...')"
    stars = [ex.stars for ex in found]
    assert stars == sorted(stars), f"{nb.name}: difficulties {stars} are not in increasing order"
    assert len(set(stars)) >= 2, f"{nb.name}: all exercises have difficulty {stars[0]}"
    for ex in found:
        assert ex.solution is not None, (
            f"{nb.name}, exercise {ex.number}: want exactly one ':::{{dropdown}} Solution' block")
        assert len(ex.solution.split()) >= 25, (
            f"{nb.name}, exercise {ex.number}: the solution is not worked ({ex.solution!r})")
    assert any(ex.code for ex in found), f"{nb.name}: no solution runs code"


def test_exercise_parser_reads_the_format(tmp_path: Path) -> None:
    """The parser finds headings, stars, the dropdown and its code (a format it must refuse too)."""
    cell = ("## Exercises\n\nintro\n\n### ★ Count\n\nHow many?\n\n:::{dropdown} Solution\n"
            "Because.\n\n```python\nx = 1\n```\n\n```python\nassert x == 1\n```\n:::\n\n"
            "### ★★★ Open\n\nWhy?\n\n:::{dropdown} Hint\nno solution\n:::\n")
    nb = {"cells": [{"cell_type": "markdown", "source": [cell], "metadata": {}}]}
    path = tmp_path / "99_format.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    one, two = exercises(path)
    assert (one.number, one.stars, one.title) == (1, 1, "Count")
    assert one.code == ["x = 1\n", "assert x == 1\n"]
    assert (two.number, two.stars, two.solution) == (2, 3, None)


@pytest.mark.slow
@pytest.mark.parametrize("ex", all_solutions_with_code(),
                         ids=lambda ex: f"{ex.chapter[:2]}-{ex.number}")
def test_solution_runs(ex: Exercise, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each solution's code runs as printed (its asserts check what its prose claims)."""
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(ROOT)
    namespace: dict = {"__name__": "__exercise__"}
    for k, block in enumerate(ex.code):
        exec(compile(block, f"<{ex.chapter} exercise {ex.number}, code block {k + 1}>", "exec"),
             namespace)
    import matplotlib.pyplot as plt

    plt.close("all")
