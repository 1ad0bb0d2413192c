"""Numbers reported in the papers (never measured here): the book's single source for them.

The book never types a paper's reported number into prose or notebook code; it takes it from
this module. Every table cell is kept twice: as a number (``Table.rows``) and as the string the
paper prints (``Table.printed``: ``"66.70"``, ``".616"``, ``"3,002,908"``, ``"+5.6%"``), so the
number of printed decimals (``Table.decimals``, per column) is never lost. The facts and
hyper-parameters quoted in prose are dicts of numbers, each with its printed form in
:data:`PRINTED`. Percent metrics are stored in percent, as the papers print them (MAP 34.23
means 34.23 %); SciToricsBERT's P@1 / MAP@R and the multi-objective paper's ndcg@10 are
fractions (``.616``, ``0.270``), as printed there.

>>> reported("unifar/table2", "SPECTER", "aggregated MAP")
34.23
>>> UNIFAR_TABLE2.printed["SPECTER"]["background NDCG%20"], UNIFAR_TABLE2.decimals["background NDCG%20"]
('66.70', 2)
>>> SCITORICSBERT_TABLE4.printed["SciToricsBERT (Softmax loss)"]["CS P@1"]
'.616'
>>> UNIFAR_FACTS["ftus"], PRINTED["unifar/facts"]["ftus"]
(217806, '217,806')
>>> UNIFAR_HYPERPARAMETERS["lr_aggregation"], PRINTED["unifar/hyperparameters"]["lr_aggregation"]
(5e-05, '5e-5')

What is here, and where it is in which paper (the papers are read as plain text; page numbers
are not given where the text does not print them):

**UniFAR** (Dou et al., 2026, arXiv 2602.23766), the paper the book reproduces.

* :data:`UNIFAR_TABLE1` -- table 1 (section 5.2): DORIS-MAE q-doc, 14 systems x (Query, Aspect,
  Subquery_2) x (Recall@5, MAP, R-Precision). Row "UniFAR-X (Ours)" is stored as "UniFAR-X".
* :data:`UNIFAR_TABLE2` -- table 2 (section 5.2): CSFCube doc-doc, 14 systems x (background,
  method, result, aggregated) x (MAP, NDCG%20; the paper prints "nDCG%20").
* :data:`UNIFAR_TABLE3` -- table 3 (section 6): the ablation of UniFAR-SciBERT, MAP only, 8 rows
  x (DORIS-MAE Query, Aspect, Subquery_2; CSFCube background, method, result, aggregated).
* :data:`UNIFAR_APPENDIX_B` -- appendix B, table 4: documents and questions per scientific field
  (19 fields). The paper prints no totals row.
* :data:`UNIFAR_TABLE7` -- appendix D, table 7: benchmark statistics (queries per level,
  candidates).
* :data:`UNIFAR_TABLE8` -- appendix E, table 8: LitSearch q-doc, 5 systems x Recall, MRR, MAP,
  nDCG at 5, 10, 20.
* :data:`UNIFAR_FACTS` -- appendix B and the table-5 prompt: 217,806 FTUs, 7,428,874
  facet-labelled documents, 3 questions per query document, 25-50 words per question.
* :data:`UNIFAR_HYPERPARAMETERS` -- appendix A: tau 0.08, lambda 0.3 -> 0.5, learning rates
  2e-5 (base model and shared facet anchors) / 5e-5 (other aggregation modules) / 3e-6 (MPNet),
  batch 4, gradient accumulation 4, 2 epochs, 5% linear warm-up, four 24 GB GPUs.

**SciToricsBERT** (Sugimoto and Aizawa, 2022), rhetorical sentence embeddings.

* :data:`SCITORICSBERT_TABLE2` -- table 2 (section 4.1): evaluation data sets (sentences,
  labels); CSAbstruct 1,349 sentences, 5 labels.
* :data:`SCITORICSBERT_TABLE3` -- table 3 (section 4.2): P@1 / MAP@R on the CF-labeled sentence
  data set (Introduction, Methods, Results, Discussion, Avg.).
* :data:`SCITORICSBERT_TABLE4` -- table 4 (section 4.2): P@1 / MAP@R on CSAbstruct ("CS") and
  PubMed-RCT ("PubMed"). The header prints "MAP"; the caption says MAP@R, the column names here
  say MAP@R.
* :data:`SCITORICSBERT_HYPERPARAMETERS` -- table 6 (the bulleted values) and appendix B / section
  4.1: margins, scales, temperatures, Adam 2e-5, batch 64, PK batches, at most five epochs.
* :data:`SCITORICSBERT_SEARCH_GRID` -- table 6: every value the hyper-parameter search tried.
* :data:`SCITORICSBERT_FACTS` -- sections 1, 3.2, 3.3, 4.1: CFS3 (100,016 sentences, 77 labels),
  768-dimensional [CLS] embeddings, five seeds, 4:1 train/validation split.

**FLeW** (Dou et al., 2025, arXiv 2509.07531). FLeW reports **no CSFCube results**: its tables are
SciRepEval (table 1), MDCR (table 2) and an ablation on SciRepEval (table 3). The CSFCube row
"FLeW-bg/mt/rs" exists only in UniFAR's table 2.

* ``FLEW_TABLES["table 1"]`` -- section 4.3: SciRepEval, 6 systems x 19 tasks, the four format
  averages and the total average.
* ``FLEW_TABLES["table 2"]`` -- section 4.3: MDCR citation recommendation, 19 fields + Avg x 6
  systems x (MAP, Recall@5).
* ``FLEW_TABLES["table 3"]`` -- section 4.4: the ablation on SciRepEval, same columns as table 1.
* :data:`FLEW_FACTS`, :data:`FLEW_HYPERPARAMETERS` -- sections 3.2, 3.3, 4.1, 4.3.

**Multi-objective dense retrieval** (Parisot and Zavrel, 2022).

* ``MULTI_OBJECTIVE_TABLES["table 1"]`` -- section 1 / 5: single objective vs multi-objective;
  its relative-improvement rows are ``MULTI_OBJECTIVE_TABLES["table 1 (relative improvements)"]``.
* ``MULTI_OBJECTIVE_TABLES["table 2"]`` -- section 5: the combination strategies.
* ``MULTI_OBJECTIVE_TABLES["table 3"]`` -- section 5: independent cropping + fine-tuning.
* ``MULTI_OBJECTIVE_TABLES["table 4"]`` -- section 5: fine-tuning on InPars.
* :data:`MULTI_OBJECTIVE_FACTS`, :data:`MULTI_OBJECTIVE_HYPERPARAMETERS` -- sections 4.1-4.3, 6.

Ambiguities, unreadable cells and where the papers disagree with themselves (nothing below is
guessed into a table):

* UniFAR table 2, CoSentBERT: the aggregated NDCG%20 (50.68) is printed equal to its result
  NDCG%20 (50.68); the query-weighted mean of its facets (16/17/17 queries, table 7) is 50.02.
  Kept as printed. Aggregated is in general not an exact function of the facet columns (the
  protocol averages two test folds): the weighted mean agrees within 0.1 for most rows, but
  differs by 0.88 (SPECTER-2 MAP), 0.94 / 0.36 (FLeW-bg/mt/rs) and 0.71 (OSRetriever MAP).
* UniFAR section 5.2 prose says UniFAR-MPNet improves "+1.13 MAP on the Query level" over MPNet;
  table 1 gives 41.47 - 40.94 = 0.53 MAP, and +1.13 is the Query *Recall@5* gain (16.08 - 14.95).
  The table is stored as printed.
* UniFAR appendix E prose: "nDCG@20 +1.51"; table 8's best baseline at nDCG@20 is SPECTER-2
  (30.68), a margin of 1.36; +1.51 is the margin over FLeW (30.53). Recall@20 +3.03 matches.
* UniFAR table 4 (appendix B): the documents column sums to 8,784,021 and the questions column to
  308,975, while the text gives 7,428,874 documents and 217,806 FTUs (one question triple per
  FTU); fields presumably overlap (a document can have several fields), the paper does not say.
  The header "# Questions (x3)" is read as "query documents, each with 3 questions"; whether the
  printed count must be multiplied by 3 is not stated. No totals row is printed, none is stored.
* UniFAR table 7 prints each benchmark's candidate count once for all its levels (a merged
  cell); here it is repeated on every level's row.
* UniFAR appendix A gives 3e-6 "for MPNet" without saying which parameter groups it replaces
  (base only, or also anchors and the aggregation modules): stored as ``lr_mpnet`` only.
* FLeW table 1: the "Total AVG" column is legible only for FLeW (60.81); the other five rows'
  cells are missing from the text and are left out (:attr:`Table.missing`). SPECTER-2's total
  (60.21) is printed in table 3 (row "- w/o Structural") and in the prose ("+0.60").
* FLeW table 1 prints shorter task headers than table 3 ("Author", "Citation", "PRX",
  "Biomics"); both tables use table 3's names here ("Same Author", "HighInf Citation",
  "SciDocs PRX", "Biomimicry"; "NFC-orpus" is hyphenated NFCorpus).
* FLeW section 4.1 prints the learning rate as "lambda = 2^-5" (0.03125), surely meaning 2e-5
  ("following [4, 13]"); left out. "2.16M triplets" does not say whether per facet or in all;
  stored as printed (``triplets``).
* SciToricsBERT table 2 gives 1,349 CSAbstruct sentences (5 labels) as "dataset statistics"; the
  paper does not say these are CSAbstruct's *test* split. Row names: the paper prints "base" as
  a subscript (BERT_base); stored as "BERT-base avg." etc. Its model name is printed in small
  capitals (SCITORICSBERT); stored as "SciToricsBERT (<loss> loss)".
* Multi-objective table 1 prints the relative improvements with a sign and a percent sign
  ("+5.6%"); they are stored in percent (5.6) in their own table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

__all__ = [
    "Table",
    "UNIFAR",
    "SCITORICSBERT",
    "FLEW",
    "MULTI_OBJECTIVE",
    "UNIFAR_TABLE1",
    "UNIFAR_TABLE2",
    "UNIFAR_TABLE3",
    "UNIFAR_APPENDIX_B",
    "UNIFAR_TABLE7",
    "UNIFAR_TABLE8",
    "UNIFAR_FACTS",
    "UNIFAR_HYPERPARAMETERS",
    "SCITORICSBERT_TABLE2",
    "SCITORICSBERT_TABLE3",
    "SCITORICSBERT_TABLE4",
    "SCITORICSBERT_HYPERPARAMETERS",
    "SCITORICSBERT_SEARCH_GRID",
    "SCITORICSBERT_FACTS",
    "FLEW_TABLES",
    "FLEW_FACTS",
    "FLEW_HYPERPARAMETERS",
    "MULTI_OBJECTIVE_TABLES",
    "MULTI_OBJECTIVE_FACTS",
    "MULTI_OBJECTIVE_HYPERPARAMETERS",
    "TABLES",
    "PRINTED",
    "reported",
    "all_reported_numbers",
]

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

_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}


def _number(text: str) -> int | float:
    """The value of a number as printed: "217,806", ".616", "2e-5", "+5.6%", "2.16M", "4:1", "five".

    Percent signs are dropped (the value stays in percent); k / M multiply by 10^3 / 10^6;
    "a × 10^-b" and "10^-b" are powers of ten; "a:b" is the ratio a / b.

    >>> _number("3,002,908"), _number(".616"), _number("2e-5"), _number("-1.8%"), _number("2.16M")
    (3002908, 0.616, 2e-05, -1.8, 2160000)
    """
    s = text.strip().replace("−", "-")
    if s in _WORDS:
        return _WORDS[s]
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


def _decimals(text: str) -> int:
    s = text.rstrip("%")
    return len(s.split(".")[1]) if "." in s else 0


def _table(paper: str, label: str, caption: str, columns: tuple[str, ...], body: str, *,
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
            rows[name][col], printed[name][col] = _number(cell), cell
            if decimals.setdefault(col, _decimals(cell)) != _decimals(cell):
                raise ValueError(f"{paper} {label}: column {col!r} mixes decimals ({cell!r})")
    return Table(paper=paper, label=label, caption=caption, rows=rows,
                 decimals={c: decimals[c] for c in columns}, printed=printed,
                 missing=frozenset(missing), groups=dict(groups or {}), notes=notes)


# --- UniFAR ---------------------------------------------------------------------------------------

_DORIS_COLUMNS = tuple(f"{level} {metric}" for level in ("Query", "Aspect", "Subquery_2")
                       for metric in ("Recall@5", "MAP", "R-Precision"))

#: UniFAR table 1 (section 5.2): DORIS-MAE q-doc results, percent.
UNIFAR_TABLE1 = _table(
    UNIFAR, "table 1",
    "DORIS-MAE (q-doc) at the Query, Aspect and Subquery_2 levels: Recall@5, MAP, R-Precision (percent)",
    _DORIS_COLUMNS,
    """
    SciBERT           | 5.13 20.34 17.13 5.41 21.66 18.50 2.43 21.23 17.56
    SciBERT-ID        | 12.86 31.50 27.54 8.88 26.53 22.56 9.41 42.19 39.28
    SPECTER           | 13.34 35.75 32.66 11.56 31.39 28.43 10.51 38.27 35.40
    SciNCL            | 13.21 36.10 31.38 12.69 35.43 30.75 10.75 47.48 43.71
    SPECTER-2         | 14.50 37.12 33.41 12.97 35.77 31.30 11.14 47.26 43.73
    TSAspire          | 14.26 37.00 33.81 14.30 37.31 33.63 13.15 45.85 41.46
    OTAspire          | 13.34 36.70 33.63 14.45 36.09 32.53 12.56 45.53 40.60
    FLeW              | 14.42 38.72 32.71 14.24 37.56 33.28 11.43 47.66 44.01
    UniFAR-SciBERT    | 15.04 39.03 34.01 14.58 37.82 33.86 11.25 48.01 44.25
    Contriever        | 11.90 33.44 28.70 11.15 29.91 26.57 9.49 43.07 40.15
    OSRetriever       | 13.02 36.96 30.88 12.29 32.54 29.09 11.22 47.13 43.37
    UniFAR-Contriever | 16.06 37.52 33.98 13.75 35.41 31.39 11.35 47.38 44.10
    MPNet             | 14.95 40.94 35.06 13.87 37.13 33.77 12.19 48.35 44.31
    UniFAR-MPNet      | 16.08 41.47 37.13 15.68 37.77 34.05 12.42 49.55 45.85
    """,
    groups={
        "SciBERT": ("SciBERT", "SciBERT-ID", "SPECTER", "SciNCL", "SPECTER-2", "TSAspire", "OTAspire", "FLeW",
                    "UniFAR-SciBERT"),
        "Contriever": ("Contriever", "OSRetriever", "UniFAR-Contriever"),
        "MPNet": ("MPNet", "UniFAR-MPNet"),
    },
    notes="-ID: further trained in the benchmark domain. Prose: UniFAR-MPNet '+1.13 MAP on the Query level' "
          "matches the Recall@5 gain (16.08 - 14.95), not MAP (0.53).",
)

_CSFCUBE_COLUMNS = tuple(f"{facet} {metric}" for facet in ("background", "method", "result", "aggregated")
                         for metric in ("MAP", "NDCG%20"))

#: UniFAR table 2 (section 5.2): CSFCube doc-doc results, percent.
UNIFAR_TABLE2 = _table(
    UNIFAR, "table 2",
    "CSFCube (doc-doc) per facet and aggregated: MAP and NDCG%20 (percent)",
    _CSFCUBE_COLUMNS,
    """
    SciBERT             | 25.89 44.99 19.23 34.41 23.06 42.06 22.63 40.33
    CoSentBERT          | 35.78 61.27 19.27 38.77 32.15 50.68 28.95 50.68
    SPECTER             | 43.95 66.70 22.44 37.41 36.79 56.67 34.23 53.28
    SciNCL              | 49.64 70.02 27.14 46.61 41.83 61.70 39.37 59.24
    SPECTER-2           | 50.79 70.92 27.19 47.28 39.65 63.73 39.86 60.42
    TS+OTAspire-SPECTER | 51.79 70.99 26.68 47.60 43.06 64.82 40.26 60.86
    FaBle-SPECTER       | 42.66 67.38 25.98 44.97 38.60 58.10 35.60 56.60
    FLeW-bg/mt/rs       | 50.93 71.09 23.76 44.37 39.03 62.37 38.01 59.98
    UniFAR-SciBERT      | 51.91 72.55 25.76 47.72 43.19 64.88 39.97 61.27
    Contriever          | 43.17 65.64 23.11 41.35 38.45 62.41 34.74 56.25
    OSRetriever         | 47.18 69.64 23.86 44.35 35.77 61.55 36.08 58.39
    UniFAR-Contriever   | 47.29 69.90 24.71 45.06 38.96 63.44 36.83 58.81
    MPNet               | 50.68 72.30 27.58 47.32 42.81 65.42 40.03 61.46
    UniFAR-MPNet        | 50.88 72.36 27.65 47.42 47.48 66.97 41.90 62.08
    """,
    groups={
        "SciBERT": ("SciBERT", "CoSentBERT", "SPECTER", "SciNCL", "SPECTER-2", "TS+OTAspire-SPECTER",
                    "FaBle-SPECTER", "FLeW-bg/mt/rs", "UniFAR-SciBERT"),
        "Contriever": ("Contriever", "OSRetriever", "UniFAR-Contriever"),
        "MPNet": ("MPNet", "UniFAR-MPNet"),
    },
    notes="-SPECTER: trained from SPECTER's initialisation; FLeW-bg/mt/rs: three facet encoders of FLeW. "
          "CoSentBERT's aggregated NDCG%20 is printed equal to its result NDCG%20 (50.68).",
)

#: UniFAR table 3 (section 6): ablation of UniFAR-SciBERT, MAP (percent).
UNIFAR_TABLE3 = _table(
    UNIFAR, "table 3",
    "Ablation of UniFAR-SciBERT: MAP (percent) on DORIS-MAE (q-doc) levels and CSFCube (doc-doc) facets",
    ("DORIS-MAE Query MAP", "DORIS-MAE Aspect MAP", "DORIS-MAE Subquery_2 MAP", "CSFCube background MAP",
     "CSFCube method MAP", "CSFCube result MAP", "CSFCube aggregated MAP"),
    """
    UniFAR (full)  | 39.03 37.82 48.01 51.91 25.76 43.19 39.97
    w/o MHA_sent   | 38.90 37.79 47.69 50.65 25.23 41.63 38.76
    w/o MHA_tok    | 37.96 37.11 46.95 51.11 24.76 42.59 38.94
    Freeze A_facet | 38.06 37.75 47.88 51.79 25.37 40.96 39.13
    w/o A_facet    | 36.93 34.66 47.13 51.42 24.85 41.66 38.78
    w/o E_input    | 37.74 37.37 47.78 50.83 25.59 41.12 38.81
    w/o L_KL       | 36.86 35.18 45.08 49.41 23.75 42.26 38.07
    w/o L_QD       | 38.57 37.66 47.01 51.59 25.27 43.08 39.62
    """,
    notes="The full row equals UniFAR-SciBERT's MAP cells of tables 1 and 2.",
)

#: UniFAR appendix B, table 4: training-corpus fields (counts).
UNIFAR_APPENDIX_B = _table(
    UNIFAR, "appendix B, table 4",
    "Scientific fields of the training corpus (FTUs): number of documents and of questions (x3: three facets "
    "per query document); counts",
    ("# Documents", "# Questions (×3)"),
    """
    Medicine              | 3,002,908 101,065
    Computer Science      | 1,538,273 77,079
    Biology               | 1,158,449 38,820
    Psychology            | 494,617 14,017
    Chemistry             | 400,837 10,400
    Physics               | 384,276 9,904
    Mathematics           | 371,410 16,852
    Engineering           | 310,521 10,280
    Materials Science     | 251,316 7,624
    Economics             | 201,989 8,253
    Business              | 168,263 4,328
    Environmental Science | 107,915 2,570
    Geology               | 100,061 2,003
    Geography             | 93,067 1,514
    Sociology             | 91,846 1,604
    Political Science     | 74,960 2,470
    Art                   | 12,470 59
    Philosophy            | 11,572 24
    History               | 9,271 109
    """,
    notes="No totals row is printed. The columns sum to 8,784,021 and 308,975, not to the text's 7,428,874 "
          "documents and 217,806 FTUs (fields presumably overlap; not stated).",
)

#: UniFAR appendix D, table 7: benchmark statistics (counts).
UNIFAR_TABLE7 = _table(
    UNIFAR, "appendix D, table 7",
    "Benchmark statistics per evaluated level: number of queries and of candidate documents; counts",
    ("# Queries", "# Candidates"),
    """
    DORIS-MAE Query      | 100 363,133
    DORIS-MAE Aspect     | 100 363,133
    DORIS-MAE Subquery_2 | 1,003 363,133
    CSFCube background   | 16 4,207
    CSFCube method       | 17 4,207
    CSFCube result       | 17 4,207
    LitSearch            | 597 64,183
    """,
    notes="The candidate count is printed once per benchmark (a merged cell) and repeated here on every level.",
)

#: UniFAR appendix E, table 8: LitSearch q-doc results, percent.
UNIFAR_TABLE8 = _table(
    UNIFAR, "appendix E, table 8",
    "LitSearch (q-doc): Recall, MRR, MAP and nDCG at cutoffs 5, 10, 20 (percent)",
    tuple(f"{metric}@{k}" for metric in ("Recall", "MRR", "MAP", "nDCG") for k in (5, 10, 20)),
    """
    SPECTER        | 22.78 30.15 36.85 15.88 16.85 17.33 15.48 16.40 16.87 17.27 19.55 21.24
    SciNCL         | 28.81 37.02 44.05 20.56 21.69 22.20 19.78 20.86 21.36 21.99 24.59 26.36
    SPECTER-2      | 34.67 44.22 52.09 23.60 24.93 25.46 22.62 23.97 24.50 25.53 28.70 30.68
    FLeW           | 34.17 44.70 52.58 23.67 24.16 24.72 22.61 23.53 24.09 25.36 28.53 30.53
    UniFAR-SciBERT | 35.14 44.89 55.61 23.94 25.17 25.93 23.49 24.71 25.47 25.99 29.29 32.04
    """,
    notes="Prose 'nDCG@20 +1.51' is the margin over FLeW (30.53); over the best baseline (SPECTER-2, 30.68) "
          "it is 1.36.",
)

#: UniFAR facts quoted in prose (appendix B) and in the question prompt (appendix C, table 5).
_UNIFAR_FACTS_PRINTED = {
    "ftus": "217,806",                       # appendix B
    "facet_labelled_documents": "7,428,874",  # appendix B ("facet-labeled documents")
    "questions_per_query_document": "3",     # appendix B: "3 facets for each query document"
    "question_words_min": "25",              # table 5 prompt: "between 25–50 words"
    "question_words_max": "50",
}

#: UniFAR appendix A (implementation details). ``lr_base`` / ``lr_anchors`` are for SciBERT and
#: Contriever; ``lr_mpnet`` is "a smaller learning rate" for MPNet (groups not stated).
_UNIFAR_HYPERPARAMETERS_PRINTED = {
    "temperature": "0.08",
    "kl_lambda_start": "0.3",
    "kl_lambda_end": "0.5",
    "lr_base": "2e-5",
    "lr_anchors": "2e-5",
    "lr_aggregation": "5e-5",
    "lr_mpnet": "3e-6",
    "batch_size": "4",
    "grad_accumulation": "4",
    "epochs": "2",
    "warmup_percent": "5%",
    "gpus": "four",
    "gpu_memory_gb": "24",
}

# --- SciToricsBERT --------------------------------------------------------------------------------

#: SciToricsBERT table 2 (section 4.1): evaluation data sets (counts).
SCITORICSBERT_TABLE2 = _table(
    SCITORICSBERT, "table 2",
    "Evaluation data sets: number of sentences and of labels; counts",
    ("#sentences", "#labels"),
    """
    CF-labeled Introduction | 773 11
    CF-labeled Methods      | 468 6
    CF-labeled Results      | 521 6
    CF-labeled Discussion   | 781 9
    CSAbstruct              | 1,349 5
    PubMed-RCT              | 30,135 5
    """,
    notes="The paper does not say that CSAbstruct's 1,349 sentences are its test split.",
)

_SECTIONS = ("Introduction", "Methods", "Results", "Discussion", "Avg.")

#: SciToricsBERT table 3 (section 4.2): CF-labeled sentence retrieval, fractions.
SCITORICSBERT_TABLE3 = _table(
    SCITORICSBERT, "table 3",
    "Sentence retrieval on the CF-labeled sentence data set per section: P@1 and MAP@R (fractions, printed .xxx)",
    tuple(f"{s} {m}" for s in _SECTIONS for m in ("P@1", "MAP@R")),
    """
    GloVe avg.                   | .391 .073 .462 .089 .484 .125 .325 .058 .415 .086
    BERT-base avg.               | .523 .099 .434 .099 .511 .140 .361 .063 .457 .100
    RoBERTa-base avg.            | .507 .106 .451 .102 .557 .152 .392 .068 .477 .107
    SciBERT avg.                 | .604 .151 .526 .117 .612 .156 .483 .093 .556 .129
    PubMedBERT avg.              | .547 .134 .521 .108 .570 .140 .435 .078 .518 .115
    SRoBERTa-base                | .422 .099 .325 .075 .501 .148 .335 .072 .396 .099
    SimCSE-RoBERTa-base          | .551 .165 .429 .095 .511 .162 .403 .088 .474 .128
    SciToricsBERT (Softmax loss) | .857 .537 .765 .375 .866 .501 .741 .334 .807 .437
    SciToricsBERT (Triplet loss) | .858 .514 .776 .368 .855 .494 .734 .329 .806 .426
    SciToricsBERT (ArcFace loss) | .840 .513 .741 .378 .845 .462 .708 .301 .783 .414
    SciToricsBERT (MS loss)      | .829 .485 .721 .354 .832 .475 .684 .314 .767 .407
    SciToricsBERT (NT-Xent loss) | .839 .511 .741 .385 .838 .494 .708 .312 .781 .425
    """,
    notes="The header prints 'MAP' (MAP@R per the caption) and 'base' as a subscript (BERT_base).",
)

#: SciToricsBERT table 4 (section 4.2): CSAbstruct ("CS") and PubMed-RCT ("PubMed"), fractions.
SCITORICSBERT_TABLE4 = _table(
    SCITORICSBERT, "table 4",
    "Sentence retrieval on CSAbstruct (CS) and PubMed-RCT (PubMed): P@1 and MAP@R (fractions, printed .xxx)",
    ("CS P@1", "CS MAP@R", "PubMed P@1", "PubMed MAP@R"),
    """
    GloVe avg.                   | .445 .124 .627 .167
    BERT avg.                    | .553 .166 .681 .196
    RoBERTa avg.                 | .523 .159 .681 .185
    SciBERT avg.                 | .563 .169 .700 .204
    PubMedBERT avg.              | .553 .169 .694 .213
    SRoBERTa                     | .480 .136 .566 .143
    SimCSE-RoBERTa               | .529 .164 .646 .187
    SciToricsBERT (Softmax loss) | .616 .226 .761 .325
    SciToricsBERT (Triplet loss) | .599 .214 .760 .324
    SciToricsBERT (ArcFace loss) | .576 .205 .748 .307
    SciToricsBERT (MS loss)      | .583 .191 .739 .300
    SciToricsBERT (NT-Xent loss) | .591 .216 .752 .324
    """,
    notes="The header prints 'MAP' (MAP@R per the caption); SciToricsBERT rows are SciBERT fine-tuned on CFS3, "
          "mean of five seeds.",
)

#: SciToricsBERT table 6 (bulleted values), appendix B and section 4.1.
_SCITORICSBERT_HYPERPARAMETERS_PRINTED = {
    "triplet_margin": "0.05",
    "arcface_margin": "0.5",
    "arcface_scale": "16",
    "ms_alpha": "2",
    "ms_beta": "40",
    "ms_lambda": "0.75",
    "ntxent_temperature": "0.1",
    "learning_rate": "2e-5",      # Adam, appendix B
    "batch_size": "64",
    "pk_p_softmax_arcface": "64",  # P = 64, K = 1 for Softmax and ArcFace losses
    "pk_k_softmax_arcface": "1",
    "pk_p_others": "8",            # P = 8, K = 8 for the others
    "pk_k_others": "8",
    "max_epochs": "five",          # section 4.1: "The maximum number of epochs is set to five."
}

#: SciToricsBERT table 6: every value tried by the hyper-parameter search (bulleted ones above).
_SCITORICSBERT_SEARCH_GRID_PRINTED = {
    "triplet_margin": ("0.025", "0.05", "0.1", "0.2", "0.4"),
    "arcface_margin": ("0.1", "0.3", "0.5"),
    "arcface_scale": ("16", "32", "64"),
    "ms_alpha": ("1", "2"),
    "ms_beta": ("30", "40", "50"),
    "ms_lambda": ("0.5", "0.75", "1.0"),
    "ntxent_temperature": ("0.0125", "0.025", "0.05", "0.1", "0.2"),
}

#: SciToricsBERT facts (sections 1, 3.2, 3.3, 4.1, table 2).
_SCITORICSBERT_FACTS_PRINTED = {
    "cfs3_sentences": "100,016",
    "cfs3_labels": "77",
    "academic_phrasebank_classes": "80",    # "three classes are assigned to no sentence"
    "ngram_n": "5",                          # footnote 4
    "cf_labeled_labels": "32",               # section 4.1: "(32 labels total)"
    "csabstruct_sentences": "1,349",         # table 2
    "csabstruct_labels": "5",
    "pubmed_rct_sentences": "30,135",
    "pubmed_rct_labels": "5",
    "embedding_dim": "768",                  # [CLS] of the last layer, section 3.3
    "seeds": "five",                         # "average results from five trained models"
    "train_validation_ratio": "4:1",
}

# --- FLeW -----------------------------------------------------------------------------------------

_SCIREPEVAL_COLUMNS = (
    "Relish", "Reviewer", "Same Author", "HighInf Citation", "SciDocs PRX", "[PRX] Avg",
    "Review Score", "Max H-index", "Tweet Mentions", "Citation Count", "Pub Year", "[RGN] Avg",
    "NFCorpus", "TREC Covid", "Search", "[QRY] Avg",
    "Biomimicry", "DRSM", "MeSH", "FoS", "SciDocs MAG", "SciDocs MeSH", "[CLF] Avg",
    "Total AVG",
)
_SCIREPEVAL_METRICS = ("metrics: Relish nDCG, Reviewer Avg. P, Same Author MAP, HighInf Citation MAP, SciDocs PRX "
                       "nDCG; regression Kendall's tau; query tasks nDCG; Biomimicry and DRSM weighted F1, other "
                       "classification F1 (all x100)")

_FLEW_TABLE1 = _table(
    FLEW, "table 1",
    "SciRepEval, 19 tasks in four formats, format averages and total average; " + _SCIREPEVAL_METRICS,
    _SCIREPEVAL_COLUMNS,
    """
    SciBERT   | 82.81 41.68 79.48 33.72 76.15 62.77 20.26 12.38 22.18 39.16 27.71 24.34 53.34 79.73 71.49 68.19 50.00 64.01 76.71 42.67 79.50 79.97 65.48 —
    SPECTER   | 90.07 45.16 86.53 42.89 93.98 71.73 17.35 12.52 24.19 33.21 25.96 22.65 64.90 86.53 73.25 74.89 51.22 66.16 85.46 43.00 79.75 87.80 68.90 —
    SciNCL    | 90.67 45.40 87.47 43.39 95.01 72.39 18.87 13.45 25.79 34.61 28.99 24.34 70.85 87.67 73.46 77.33 50.22 65.10 86.17 43.53 81.11 89.13 69.21 —
    SPECTER-2 | 91.63 45.42 87.00 44.96 94.87 72.78 20.63 12.76 27.11 38.33 33.65 26.50 72.03 89.46 73.76 78.42 50.53 62.96 86.76 42.16 81.03 89.00 68.74 —
    SFR-2_R   | 88.36 45.56 82.09 39.52 87.10 68.53 11.18 8.31 14.09 36.24 31.23 20.21 67.76 86.97 70.89 75.21 47.33 63.40 81.96 38.52 78.63 86.68 66.09 —
    FLeW      | 92.15 45.70 87.03 45.50 94.46 72.97 20.93 15.09 27.01 39.21 33.90 27.23 72.64 89.14 74.13 78.64 50.25 65.41 87.17 44.61 81.71 89.39 69.76 60.81
    """,
    notes="'Total AVG' is legible only for FLeW (60.81); SPECTER-2's (60.21) is in table 3. Table 1 prints the "
          "headers 'Author', 'Citation', 'PRX', 'Biomics' (table 3: Same Author, HighInf Citation, SciDocs PRX, "
          "Biomimicry). Row 'FLeW(ours)' is stored as 'FLeW'.",
)

_FLEW_TABLE2 = _table(
    FLEW, "table 2",
    "MDCR citation recommendation across 19 fields: MAP and Recall@5 per system (percent)",
    tuple(f"{system} {metric}" for metric in ("MAP", "Recall@5")
          for system in ("BM25", "SciBERT", "SPECTER", "SciNCL", "SPECTER-2", "FLeW")),
    """
    Art                   | 38.2 22.4 34.1 34.7 43.4 43.7 32.3 16.6 28.8 29.2 37.8 37.5
    Biology               | 38.3 20.4 34.6 36.8 39.9 43.5 33.6 14.0 30.0 32.3 33.3 37.8
    Business              | 28.1 19.1 27.5 28.5 35.0 35.1 22.5 13.1 21.8 24.6 30.5 30.0
    Chemistry             | 38.0 20.0 33.7 36.5 39.7 43.0 32.6 13.7 29.3 31.5 33.5 38.2
    Computer Science      | 34.8 19.5 35.6 37.2 38.5 39.9 30.5 12.8 30.4 32.2 33.4 36.2
    Economics             | 30.5 21.5 27.3 28.3 33.7 34.7 26.0 15.4 21.9 23.2 28.5 29.7
    Engineering           | 34.6 20.5 31.3 34.2 35.4 39.2 29.3 13.9 27.3 28.0 30.3 33.2
    Environmental Science | 31.6 21.3 30.1 31.5 35.0 37.2 26.2 15.1 24.2 25.5 27.9 32.0
    Geography             | 31.8 21.9 26.4 29.5 37.1 40.1 27.8 16.7 22.2 23.8 31.8 35.0
    Geology               | 33.1 19.5 24.8 25.7 33.4 35.2 28.0 13.9 20.0 19.9 27.7 29.1
    History               | 38.1 20.9 27.1 30.9 41.9 43.2 32.9 15.3 20.6 23.9 34.7 37.6
    Materials Science     | 36.1 22.2 34.1 35.8 39.7 40.6 30.7 15.5 28.2 29.6 34.0 35.4
    Mathematics           | 35.3 22.8 34.2 34.9 40.8 41.2 28.3 18.3 28.9 30.1 34.2 35.0
    Medicine              | 38.6 22.0 41.4 42.7 43.8 46.3 32.5 16.4 36.3 36.5 39.0 41.6
    Philosophy            | 30.2 19.2 27.1 29.9 37.2 36.6 25.7 13.3 21.1 23.5 32.0 31.5
    Physics               | 35.1 23.9 30.8 34.5 37.6 38.4 30.2 18.2 26.3 30.3 32.5 34.5
    Political Science     | 28.6 19.4 24.2 26.4 35.7 35.3 23.1 14.0 18.0 21.7 31.6 30.1
    Psychology            | 32.5 20.3 32.3 34.2 38.8 40.5 28.9 16.2 28.1 30.5 33.2 36.1
    Sociology             | 26.8 20.2 25.2 26.7 34.6 34.8 20.5 15.8 20.5 21.9 29.8 30.2
    Avg                   | 33.7 20.9 30.6 32.6 38.0 39.4 28.5 15.2 25.5 27.3 32.4 34.2
    """,
    notes="Rows are fields, columns '<system> <metric>'; the paper prints system names split over lines "
          "('Sci BERT', 'SPEC TER-2', 'FLeW (ours)').",
)

_FLEW_TABLE3 = _table(
    FLEW, "table 3",
    "Ablation on SciRepEval: facet encoders with / without textual splitting, FLeW without textual splitting "
    "or structural sampling (= SPECTER-2); " + _SCIREPEVAL_METRICS,
    _SCIREPEVAL_COLUMNS,
    """
    FLeW-bg (+ w/ Textual)  | 92.10 45.02 86.54 45.45 93.64 72.55 19.05 12.26 26.20 36.98 31.36 25.17 71.63 88.99 73.69 78.10 48.02 64.14 86.71 41.31 81.04 87.70 68.15 59.57
    FLeW-mt (+ w/ Textual)  | 90.68 44.96 86.38 43.96 93.41 71.88 19.19 12.95 26.70 38.46 32.13 25.89 68.06 87.51 73.34 76.30 48.92 64.28 85.68 43.35 80.95 88.43 68.60 59.44
    FLeW-rs (+ w/ Textual)  | 89.82 45.14 85.53 42.17 93.30 71.19 20.79 14.83 26.13 36.70 32.76 26.24 67.31 85.23 73.02 75.19 49.53 62.06 85.39 42.39 80.90 88.32 68.10 59.02
    FLeW-bg (- w/o Textual) | 91.99 44.79 85.99 45.41 93.21 72.28 18.91 13.24 25.34 37.16 30.58 25.05 71.65 88.64 73.68 77.99 47.82 62.44 86.19 42.01 80.35 88.72 67.92 59.37
    FLeW-mt (- w/o Textual) | 90.50 45.49 86.00 43.95 93.14 71.82 18.80 13.82 26.17 35.11 33.62 25.50 68.87 86.59 73.12 76.19 48.74 64.26 86.37 41.14 80.80 89.01 68.39 59.24
    FLeW-rs (- w/o Textual) | 89.47 44.86 84.66 41.57 92.71 70.65 17.27 13.82 27.42 35.42 31.71 25.13 68.82 85.25 72.65 75.57 46.59 59.96 84.52 43.62 79.83 87.48 67.00 58.30
    FLeW                    | 92.15 45.70 87.03 45.50 94.46 72.97 20.93 15.09 27.01 39.21 33.90 27.23 72.64 89.14 74.13 78.64 50.25 65.41 87.17 44.61 81.71 89.39 69.76 60.81
    FLeW - w/o Textual      | 92.09 45.82 86.65 45.60 94.22 72.88 20.23 14.78 27.57 38.60 34.16 27.07 72.89 88.79 74.00 78.56 49.81 64.47 86.83 44.55 81.57 89.83 69.51 60.66
    FLeW - w/o Structural   | 91.63 45.42 87.00 44.96 94.87 72.78 20.63 12.76 27.11 38.33 33.65 26.50 72.03 89.46 73.76 78.42 50.53 62.96 86.76 42.16 81.03 89.00 68.74 60.21
    """,
    notes="'- w/o Structural' is SPECTER-2 (the paper says so), equal to its table-1 row.",
)

#: FLeW's tables, keyed by label. FLeW reports no CSFCube numbers.
FLEW_TABLES: dict[str, Table] = {t.label: t for t in (_FLEW_TABLE1, _FLEW_TABLE2, _FLEW_TABLE3)}

#: FLeW training data and evaluation scope (sections 3.2, 4.1, 4.3).
_FLEW_FACTS_PRINTED = {
    "query_papers": "216k",
    "triplets": "2.16M",                    # not stated whether per facet or in all
    "metadata_background": "2.95M",         # "2.95M, 2.81M and 2.94M metadata ... respectively"
    "metadata_method": "2.81M",
    "metadata_result": "2.94M",
    "splitter_training_papers": "12k",      # GPT-4o outputs used to instruction-tune the splitter
    "scirepeval_tasks": "19",
    "mdcr_fields": "19",
    "tasks_best": "13",                     # best in 13 of 19 tasks (section 4.3)
    "tasks_second_best": "4",               # second best in 4 of the remaining 6
}

#: FLeW pre-training (sections 3.3, 4.1). The learning rate is printed "2^-5" and left out.
_FLEW_HYPERPARAMETERS_PRINTED = {
    "triplet_margin": "1",
    "batch_size": "10",
    "epochs": "2",
    "gpus": "2",
    "gpu_memory_gb": "24",
}

# --- Multi-objective dense retrieval --------------------------------------------------------------

_MO_COLUMNS = ("BEIR subset", "SciDocs", "ICLR2022")
_MO_METRICS = ("BEIR subset: mean ndcg@10 of 5 tasks; SciDocs: mean over its tasks (x100); ICLR2022: "
               "ndcg@10 (doc2doc)")

_MO_TABLE1 = _table(
    MULTI_OBJECTIVE, "table 1",
    "Single objective vs multi-objective training; " + _MO_METRICS,
    _MO_COLUMNS,
    """
    MS MARCO          | 0.270 68.72 0.260
    SPECTER           | 0.207 79.75 0.407
    ICrop+context2doc | 0.285 78.29 0.450
    AllObj-Alt        | 0.278 79.44 0.424
    """,
    groups={"Single objective": ("MS MARCO", "SPECTER"), "Multi-objective": ("ICrop+context2doc", "AllObj-Alt")},
)

_MO_TABLE1_DELTAS = _table(
    MULTI_OBJECTIVE, "table 1 (relative improvements)",
    "Table 1's ∆ rows: relative improvement (percent) of a multi-objective model over a single-objective one",
    _MO_COLUMNS,
    """
    ICrop+context2doc ∆MS MARCO | +5.6% +13.9% +73.1%
    ICrop+context2doc ∆SPECTER  | +37.7% -1.8% +10.6%
    AllObj-Alt ∆MS MARCO        | +3.0% +15.6% +63.1%
    AllObj-Alt ∆SPECTER         | +34.3% -0.4% +4.2%
    """,
)

_MO_TABLE2 = _table(
    MULTI_OBJECTIVE, "table 2",
    "Combination strategies (in-batch mixing, alternating batches, fine-tuning in each direction); " + _MO_METRICS,
    _MO_COLUMNS,
    """
    (1) MS MARCO, (2) ICrop.: in batch mix   | 0.269 74.93 0.342
    (1) MS MARCO, (2) ICrop.: alternate      | 0.282 74.51 0.341
    (1) MS MARCO, (2) ICrop.: finetune 1 → 2 | 0.262 74.27 0.343
    (1) MS MARCO, (2) ICrop.: finetune 2 → 1 | 0.324 75.09 0.396
    (1) SPECTER, (2) MS MARCO: in batch mix   | 0.230 78.90 0.396
    (1) SPECTER, (2) MS MARCO: alternate      | 0.258 79.25 0.381
    (1) SPECTER, (2) MS MARCO: finetune 1 → 2 | 0.307 75.08 0.330
    (1) SPECTER, (2) MS MARCO: finetune 2 → 1 | 0.265 78.91 0.419
    (1) SPECTER, (2) ICrop.: in batch mix   | 0.127 78.85 0.413
    (1) SPECTER, (2) ICrop.: alternate      | 0.239 78.57 0.384
    (1) SPECTER, (2) ICrop.: finetune 1 → 2 | 0.242 75.78 0.375
    (1) SPECTER, (2) ICrop.: finetune 2 → 1 | 0.248 79.40 0.471
    MS MARCO, SPECTER, ICrop.: in batch mix | 0.244 77.78 0.389
    MS MARCO, SPECTER, ICrop.: alternate    | 0.278 79.44 0.424
    """,
    groups={"2 objectives": tuple(f"{pair}: {how}" for pair in ("(1) MS MARCO, (2) ICrop.", "(1) SPECTER, (2) MS MARCO",
                                                                    "(1) SPECTER, (2) ICrop.")
                                  for how in ("in batch mix", "alternate", "finetune 1 → 2", "finetune 2 → 1")),
            "3 objectives": ("MS MARCO, SPECTER, ICrop.: in batch mix", "MS MARCO, SPECTER, ICrop.: alternate")},
)

_MO_TABLE3 = _table(
    MULTI_OBJECTIVE, "table 3",
    "Single objective vs independent cropping (ICrop) pre-training + fine-tuning on the target objective; "
    + _MO_METRICS,
    _MO_COLUMNS,
    """
    ICrop.                       | 0.244 74.93 0.370
    MS MARCO                     | 0.270 68.72 0.260
    ICrop. + MS MARCO            | 0.324 75.09 0.396
    SPECTER                      | 0.207 79.75 0.407
    ICrop. + SPECTER             | 0.248 79.40 0.471
    unarXiv doc2doc              | 0.170 75.42 0.378
    ICrop. + unarXiv doc2doc     | 0.251 78.19 0.467
    unarXiv context2doc          | 0.252 75.08 0.379
    ICrop. + unarXiv context2doc | 0.285 78.29 0.450
    """,
)

_MO_TABLE4 = _table(
    MULTI_OBJECTIVE, "table 4",
    "Fine-tuning on InPars synthetic data (the first three rows: single objective); " + _MO_METRICS,
    _MO_COLUMNS,
    """
    Baselines: MSMARCO            | 0.270 68.72 0.260
    Baselines: SPECTER            | 0.207 79.75 0.407
    Baselines: ICrop.             | 0.244 74.93 0.370
    Finetuning on InPars: MSMARCO | 0.300 69.70 0.248
    Finetuning on InPars: SPECTER | 0.304 74.88 0.300
    Finetuning on InPars: ICrop   | 0.313 75.12 0.341
    """,
    notes="Row names keep the paper's spellings 'MSMARCO' and 'ICrop' (no dot) in this table.",
)

#: The multi-objective paper's tables, keyed by label.
MULTI_OBJECTIVE_TABLES: dict[str, Table] = {
    t.label: t for t in (_MO_TABLE1, _MO_TABLE1_DELTAS, _MO_TABLE2, _MO_TABLE3, _MO_TABLE4)
}

#: Multi-objective paper: data and benchmark sizes (sections 4.1, 4.2, 5, 6).
_MULTI_OBJECTIVE_FACTS_PRINTED = {
    "specter_training_triplets": "684,100",
    "specter_validation_triplets": "145,375",
    "unarxiv_contexts": "343,578",
    "unarxiv_papers": "300,736",
    "unarxiv_context_words": "29.8",
    "unarxiv_document_words": "152.5",
    "unarxiv_doc2doc_triplets": "456,766",
    "beir_tasks": "15",
    "beir_selected_tasks": "5",
    "iclr2022_papers": "1094",
    "iclr2022_queries": "40",
    "iclr2022_retrieved_per_model": "10",
    "iclr2022_annotators": "4",
    "iclr2022_judgements": "1,844",
    "iclr2022_relevant": "358",
    "iclr2022_very_relevant": "83",
    "max_relative_improvement_percent": "73%",
    "minilm_parameters_millions": "22.7",
    "bert_parameters_millions": "345",
}

#: Multi-objective paper: training details (section 4.3).
_MULTI_OBJECTIVE_HYPERPARAMETERS_PRINTED = {
    "max_steps": "200,000",
    "patience": "2",
    "batch_triplets": "16",
    "grad_accumulation": "2",
    "learning_rate": "2 × 10^-5",
    "adam_epsilon": "10^-8",
    "finetune_learning_rate": "10^-5",
    "finetune_epochs": "1",
}

# --- registries -----------------------------------------------------------------------------------

#: Every dict of facts / hyper-parameters as the papers print it, keyed "<paper>/<name>".
PRINTED: dict[str, dict[str, str]] = {
    "unifar/facts": _UNIFAR_FACTS_PRINTED,
    "unifar/hyperparameters": _UNIFAR_HYPERPARAMETERS_PRINTED,
    "scitoricsbert/facts": _SCITORICSBERT_FACTS_PRINTED,
    "scitoricsbert/hyperparameters": _SCITORICSBERT_HYPERPARAMETERS_PRINTED,
    "flew/facts": _FLEW_FACTS_PRINTED,
    "flew/hyperparameters": _FLEW_HYPERPARAMETERS_PRINTED,
    "multiobjective/facts": _MULTI_OBJECTIVE_FACTS_PRINTED,
    "multiobjective/hyperparameters": _MULTI_OBJECTIVE_HYPERPARAMETERS_PRINTED,
}


def _values(printed: dict[str, str]) -> dict[str, int | float]:
    return {k: _number(v) for k, v in printed.items()}


UNIFAR_FACTS: dict[str, float] = _values(_UNIFAR_FACTS_PRINTED)
UNIFAR_HYPERPARAMETERS: dict[str, float | int] = _values(_UNIFAR_HYPERPARAMETERS_PRINTED)
SCITORICSBERT_FACTS: dict[str, float] = _values(_SCITORICSBERT_FACTS_PRINTED)
SCITORICSBERT_HYPERPARAMETERS: dict[str, float | int] = _values(_SCITORICSBERT_HYPERPARAMETERS_PRINTED)
SCITORICSBERT_SEARCH_GRID: dict[str, tuple[float, ...]] = {
    k: tuple(_number(v) for v in vs) for k, vs in _SCITORICSBERT_SEARCH_GRID_PRINTED.items()
}
FLEW_FACTS: dict[str, float] = _values(_FLEW_FACTS_PRINTED)
FLEW_HYPERPARAMETERS: dict[str, float | int] = _values(_FLEW_HYPERPARAMETERS_PRINTED)
MULTI_OBJECTIVE_FACTS: dict[str, float] = _values(_MULTI_OBJECTIVE_FACTS_PRINTED)
MULTI_OBJECTIVE_HYPERPARAMETERS: dict[str, float | int] = _values(_MULTI_OBJECTIVE_HYPERPARAMETERS_PRINTED)

#: Every table above, keyed "<paper>/<table>".
TABLES: dict[str, Table] = {
    "unifar/table1": UNIFAR_TABLE1,
    "unifar/table2": UNIFAR_TABLE2,
    "unifar/table3": UNIFAR_TABLE3,
    "unifar/table4": UNIFAR_APPENDIX_B,
    "unifar/table7": UNIFAR_TABLE7,
    "unifar/table8": UNIFAR_TABLE8,
    "scitoricsbert/table2": SCITORICSBERT_TABLE2,
    "scitoricsbert/table3": SCITORICSBERT_TABLE3,
    "scitoricsbert/table4": SCITORICSBERT_TABLE4,
    "flew/table1": _FLEW_TABLE1,
    "flew/table2": _FLEW_TABLE2,
    "flew/table3": _FLEW_TABLE3,
    "multiobjective/table1": _MO_TABLE1,
    "multiobjective/table1-deltas": _MO_TABLE1_DELTAS,
    "multiobjective/table2": _MO_TABLE2,
    "multiobjective/table3": _MO_TABLE3,
    "multiobjective/table4": _MO_TABLE4,
}


def reported(key: str, row: str, column: str) -> float:
    """``TABLES[key].value(row, column)``; a KeyError names the known tables, rows or columns.

    >>> reported("unifar/table1", "UniFAR-MPNet", "Query MAP")
    41.47
    >>> reported("scitoricsbert/table4", "SciBERT avg.", "CS MAP@R")
    0.169
    """
    if key not in TABLES:
        raise KeyError(f"no table {key!r}; known tables: {list(TABLES)}")
    return TABLES[key].value(row, column)


def _forms(text: str) -> set[str]:
    """The ways a printed number may be typed: as printed, without sign / percent / separators."""
    s = text.strip()
    out = {s}
    if s in _WORDS:
        out.add(str(_WORDS[s]))
        return out
    if "^" in s:  # "2 × 10^-5", "10^-8"
        v = _number(s)
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
        value = _number(plain)
        out |= {str(value), f"{value:,}"}
    elif re.fullmatch(r"\d+", plain):
        out |= {plain, f"{int(plain):,}"}
    return out


def all_reported_numbers() -> set[str]:
    """Every number of every table, fact and hyper-parameter dict, in the forms it may be typed.

    Each printed string is kept as printed ("41.90", ".616", "2e-5", "217,806", "+5.6%", "2.16M")
    together with its plain variants: integers with and without thousands separators ("217806"),
    leading-dot values with a leading zero ("0.616"), signed or percent values without the sign
    or the percent sign ("5.6"), k / M counts written out ("216,000"), exponents as Python prints
    them ("2e-05"). Small integers (2, 4, 5 ...) are included, because hyper-parameters are.

    >>> numbers = all_reported_numbers()
    >>> {"41.90", "34.23", "217,806", "217806", ".616", "0.616", "2e-5", "0.08"} <= numbers
    True
    """
    printed: list[str] = []
    for table in TABLES.values():
        for cells in table.printed.values():
            printed.extend(cells.values())
    for values in PRINTED.values():
        printed.extend(values.values())
    for grid in _SCITORICSBERT_SEARCH_GRID_PRINTED.values():
        printed.extend(grid)
    out: set[str] = set()
    for s in printed:
        out |= _forms(s)
    return out
