"""nbval plugin: compare notebook outputs with a stated numeric tolerance.

nbval compares every (sanitised) output of a re-executed cell with the stored one as a string.
Bit-exact float equality across CPUs is not something this book can promise: another
instruction set (AVX-512 instead of AVX2, another BLAS path) rounds sums differently in the
last bit, and a number printed with two decimals can then move by one unit. This plugin keeps
nbval's comparison and replaces only its final string equality by :func:`texts_match`:

* the text *between* numbers must be equal after collapsing runs of white space (so a column
  that gets one character wider or narrower still matches, a changed word does not);
* both texts must hold the same count of numbers, and each pair must satisfy
  ``|a - b| <= max(REL_TOL * max(|a|, |b|), ULP_TOL * 10**-d)`` where ``d`` is the number of
  decimals printed (the larger of the two). Integers (``d = 0``) get the relative part only, so
  that shapes, counts of a few items and indices stay exact while a count of thousands may move
  by one or two (a near-tie decision that flips).

The tolerances are stated once here and in the book's introduction: ``REL_TOL = 1e-3`` and
``ULP_TOL = 5`` units of the last printed decimal. ``results/ci/isa_check.json`` records the
largest deviation measured when the notebooks were re-executed with the CPU kernels forced onto
another instruction set. Anything larger fails, e.g. 39.40 -> 39.50 or 2,173 -> 2,183.

Use: ``PYTHONPATH=.ci pytest --nbval -p nbval_tolerance ...`` (``.ci/run`` does).
``NBVAL_EXACT=1`` switches the tolerance off (plain nbval). ``NBVAL_DEVIATIONS=FILE`` appends one
JSON line per pair of printed numbers that differ (reference, new, decimals, and the difference
as a fraction of the tolerance), which ``benchmarks/isa_check.py`` summarises.
"""

from __future__ import annotations

import json
import math
import os
import re

REL_TOL = 1e-3
ULP_TOL = 5

# A number as notebooks print it: optional sign, digits with optional thousands separators
# (groups of exactly three), optional decimals, optional exponent. Not preceded by a letter or
# digit, so that names like "fold1_test", "l2" or hashes like "5a00920" keep their digits in
# the text part and must match exactly.
_NUMBER = re.compile(
    r"(?<![\w.])(?P<num>[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<dec>\d+))?(?:[eE][-+]?\d+)?)(?![\w])"
)
_SPACE = re.compile(r"\s+")


def split_numbers(text: str) -> tuple[list[str], list[tuple[float, int]]]:
    """Split ``text`` into its non-numeric parts and its numbers ``(value, decimals)``.

    >>> split_numbers("MAP 40.02 [33.8, 46.0], n = 2,172")
    (['MAP ', ' [', ', ', '], n = ', ''], [(40.02, 2), (33.8, 1), (46.0, 1), (2172.0, 0)])
    """
    parts: list[str] = []
    numbers: list[tuple[float, int]] = []
    last = 0
    for m in _NUMBER.finditer(text):
        parts.append(text[last : m.start()])
        raw = m.group("num")
        dec = m.group("dec")
        exp = re.search(r"[eE]([-+]?\d+)$", raw)
        decimals = len(dec or "") - (int(exp.group(1)) if exp else 0)
        numbers.append((float(raw.replace(",", "")), max(decimals, 0)))
        last = m.end()
    parts.append(text[last:])
    return parts, numbers


def numbers_match(a: tuple[float, int], b: tuple[float, int], rel_tol: float = REL_TOL,
                  ulp_tol: float = ULP_TOL) -> bool:
    """Whether two printed numbers agree within the tolerance (see the module docstring).

    >>> numbers_match((40.02, 2), (40.01, 2)), numbers_match((39.40, 2), (39.50, 2))
    (True, False)
    >>> numbers_match((2173, 0), (2172, 0)), numbers_match((4, 0), (5, 0))
    (True, False)
    """
    (x, dx), (y, dy) = a, b
    if x == y:
        return True
    if math.isnan(x) or math.isnan(y):
        return False
    decimals = max(dx, dy)
    tol = rel_tol * max(abs(x), abs(y))
    if decimals > 0:
        tol = max(tol, ulp_tol * 10.0 ** -decimals)
    return abs(x - y) <= tol * (1 + 1e-9)


def texts_match(ref: str, new: str, rel_tol: float = REL_TOL, ulp_tol: float = ULP_TOL) -> bool:
    """Whether ``new`` equals ``ref`` up to white-space runs and number tolerance.

    >>> texts_match("unifar  40.02  [33.8, 46.0]", "unifar 40.01 [33.7, 46.0]")
    True
    >>> texts_match("unifar 40.02", "unifar 41.02"), texts_match("trained 40.02", "untrained 40.02")
    (False, False)
    """
    if ref == new:
        return True
    ref_parts, ref_nums = split_numbers(ref)
    new_parts, new_nums = split_numbers(new)
    if len(ref_nums) != len(new_nums):
        return False
    if [_SPACE.sub(" ", p) for p in ref_parts] != [_SPACE.sub(" ", p) for p in new_parts]:
        return False
    ok = all(numbers_match(a, b, rel_tol, ulp_tol) for a, b in zip(ref_nums, new_nums))
    log = os.environ.get("NBVAL_DEVIATIONS")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            for (x, dx), (y, dy) in zip(ref_nums, new_nums):
                if x != y:
                    d = max(dx, dy)
                    tol = max(rel_tol * max(abs(x), abs(y)), ulp_tol * 10.0 ** -d if d else 0.0)
                    fh.write(json.dumps({"ref": x, "new": y, "decimals": d, "of_tolerance": abs(x - y) / tol if tol else None,
                                         "passed": numbers_match((x, dx), (y, dy), rel_tol, ulp_tol)}) + "\n")
    return ok


class TolerantText(str):
    """A ``str`` whose ``==`` and ``!=`` are :func:`texts_match` (nbval compares with ``!=``)."""

    __hash__ = str.__hash__

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return texts_match(str(self), str(other))
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq


def pytest_configure(config) -> None:  # noqa: ANN001 (pytest's hook signature)
    """Wrap nbval's per-output sanitiser so the strings it returns compare with tolerance."""
    if os.environ.get("NBVAL_EXACT") == "1":
        return
    from nbval.plugin import IPyNbCell

    if getattr(IPyNbCell.sanitize, "_unifar_tolerant", False):
        return
    plain = IPyNbCell.sanitize

    def sanitize(self, s):  # noqa: ANN001, ANN202
        out = plain(self, s)
        return TolerantText(out) if isinstance(out, str) else out

    sanitize._unifar_tolerant = True  # type: ignore[attr-defined]
    IPyNbCell.sanitize = sanitize
