"""The transcription of a paper's table: :class:`Table`, and the parser of numbers as printed.

The tables of :mod:`unifar.paper` are typed as the papers print them (``"66.70"``, ``".616"``,
``"217,806"``, ``"+5.6%"``); the functions here turn those strings into numbers while keeping the
printed form and the number of decimals.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

__all__ = ["Table", "MISSING", "parse_number", "printed_decimals", "build_table", "values_of", "typed_forms",
           "UNIFAR", "SCITORICSBERT", "FLEW", "MULTI_OBJECTIVE"]

UNIFAR = "UniFAR (Dou et al., 2026)"
SCITORICSBERT = "SciToricsBERT (Sugimoto and Aizawa, 2022)"
FLEW = "FLeW (Dou et al., 2025)"
MULTI_OBJECTIVE = "Multi-objective dense retrieval (Parisot and Zavrel, 2022)"

MISSING = "—"  # a cell left out of a table body: not legible in the paper's text


@dataclass(frozen=True)
class Table:
    """One table of one paper, transcribed cell by cell.

    ``rows`` maps a row name (the system or field as printed) to ``{column: number}``; integers
    printed without decimals are stored as ``int``. ``printed`` holds the same cells as the paper
    prints them, ``decimals`` the number of printed decimals per column. ``missing`` lists the
    ``(row, column)`` cells left out because the text does not show them (see ``notes``).
    """

    paper: str
    label: str
    caption: str
    rows: dict[str, dict[str, float]]
    decimals: dict[str, int]
    printed: dict[str, dict[str, str]] = field(default_factory=dict)
    missing: frozenset[tuple[str, str]] = frozenset()
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)
    notes: str = ""

    @property
    def columns(self) -> tuple[str, ...]:
        """The column names in the paper's order."""
        return tuple(self.decimals)

    def value(self, row: str, column: str) -> float:
        """The reported number in ``row``, ``column``; a KeyError names the known ones.

        >>> from unifar.paper import UNIFAR_TABLE8
        >>> UNIFAR_TABLE8.value("UniFAR-SciBERT", "Recall@10")
        44.89
        """
        if row not in self.rows:
            raise KeyError(f"{self.paper}, {self.label}: no row {row!r}; known rows: {list(self.rows)}")
        if column not in self.decimals:
            raise KeyError(f"{self.paper}, {self.label}: no column {column!r}; known columns: {list(self.columns)}")
        if (row, column) in self.missing:
            raise KeyError(f"{self.paper}, {self.label}: cell ({row!r}, {column!r}) is not legible in the paper "
                           f"and was left out ({self.notes})")
        return self.rows[row][column]

    def frame(self) -> Any:
        """The table as a pandas DataFrame (rows x columns in the paper's order; NaN where missing)."""
        import pandas as pd

        return pd.DataFrame.from_dict(self.rows, orient="index").reindex(columns=list(self.columns))


# --- transcription helpers: the table bodies below are the paper's printed strings -----------------

WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}


def parse_number(text: str) -> int | float:
    """The value of a number as printed: "217,806", ".616", "2e-5", "+5.6%", "2.16M", "4:1", "five".

    Percent signs are dropped (the value stays in percent); k / M multiply by 10^3 / 10^6;
    "a × 10^-b" and "10^-b" are powers of ten; "a:b" is the ratio a / b.

    >>> parse_number("3,002,908"), parse_number(".616"), parse_number("2e-5"), parse_number("-1.8%"), parse_number("2.16M")
    (3002908, 0.616, 2e-05, -1.8, 2160000)
    """
    s = text.strip().replace("−", "-")
    if s in WORDS:
        return WORDS[s]
    m = re.fullmatch(r"(?:(\d+(?:\.\d+)?) × )?10\^(-?\d+)", s)
    if m:
        return float(Decimal(m.group(1) or "1") * Decimal(10) ** int(m.group(2)))
    if ":" in s:
        a, b = s.split(":")
        return int(a) / int(b)
    s = s.rstrip("%").lstrip("+").replace(",", "")
    scale = {"k": 3, "K": 3, "M": 6}.get(s[-1:], 0)
    if scale:
        s = s[:-1]
    d = Decimal(s) * Decimal(10) ** scale
    if "." not in s and "e" not in s.lower() or (scale and d == d.to_integral_value()):
        return int(d)
    return float(d)


def printed_decimals(text: str) -> int:
    """Decimals printed in a number: ``printed_decimals("66.70%") == 2``."""
    s = text.rstrip("%")
    return len(s.split(".")[1]) if "." in s else 0


def build_table(paper: str, label: str, caption: str, columns: tuple[str, ...], body: str, *,
           groups: dict[str, tuple[str, ...]] | None = None, notes: str = "") -> Table:
    """Build a :class:`Table` from lines ``row name | cell cell ...`` (cells as printed)."""
    rows: dict[str, dict[str, float]] = {}
    printed: dict[str, dict[str, str]] = {}
    decimals: dict[str, int] = {}
    missing: set[tuple[str, str]] = set()
    for line in body.strip().splitlines():
        name, _, cells = line.partition("|")
        name, cells_list = name.strip(), cells.split()
        if len(cells_list) != len(columns) or name in rows:
            raise ValueError(f"{paper} {label}: row {name!r} has {len(cells_list)} cells for {len(columns)} columns")
        rows[name], printed[name] = {}, {}
        for col, cell in zip(columns, cells_list):
            if cell == MISSING:
                missing.add((name, col))
                continue
            rows[name][col], printed[name][col] = parse_number(cell), cell
            if decimals.setdefault(col, printed_decimals(cell)) != printed_decimals(cell):
                raise ValueError(f"{paper} {label}: column {col!r} mixes decimals ({cell!r})")
    return Table(paper=paper, label=label, caption=caption, rows=rows,
                 decimals={c: decimals[c] for c in columns}, printed=printed,
                 missing=frozenset(missing), groups=dict(groups or {}), notes=notes)


def values_of(printed: dict[str, str]) -> dict[str, int | float]:
    """The numbers of a dict of printed strings (facts, hyper-parameters)."""
    return {k: parse_number(v) for k, v in printed.items()}


def typed_forms(text: str) -> set[str]:
    """The ways a printed number may be typed: as printed, without sign / percent / separators."""
    s = text.strip()
    out = {s}
    if s in WORDS:
        out.add(str(WORDS[s]))
        return out
    if "^" in s:  # "2 × 10^-5", "10^-8"
        v = parse_number(s)
        out |= {f"{v:.0e}".replace("e-0", "e-"), f"{v:.0e}"}
        return out
    if re.fullmatch(r"\d+e-\d+", s):  # "2e-5"
        out.add(f"{float(s):.0e}")
        return out
    if ":" in s:
        return out
    bare = s.rstrip("%")
    out.add(bare)
    for v in (bare, bare.lstrip("+-")):
        out.add(v)
        if v.startswith("."):
            out.add("0" + v)
        if v[:1] in "+-" and v[1:2] == ".":
            out.add(v[0] + "0" + v[1:])
    if s.endswith("%"):
        out.add(bare.lstrip("+") + " %")
    plain = bare.lstrip("+-").replace(",", "")
    if plain[-1:] in ("k", "K", "M"):
        out.add(plain[:-1])
        value = parse_number(plain)
        out |= {str(value), f"{value:,}"}
    elif re.fullmatch(r"\d+", plain):
        out |= {plain, f"{int(plain):,}"}
    return out
