"""The three facets and every dataset's label -> facet mapping, in one place.

UniFAR represents a document by one embedding per facet: background (why), method (how) and
result (what was found), CSFCube's facets (paper section 3). Each labelled corpus names its
sentence roles differently; the tables below map them onto the three facets (``None``: the role
has no facet and the sentence is not used as facet evidence).

>>> FACETS
('background', 'method', 'result')
>>> normalise_facet("RS"), facet_of_csfcube_label("objective_label")
('result', 'background')
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "FACETS",
    "FACET_SHORT",
    "FACET_ALIASES",
    "normalise_facet",
    "CSFCUBE_LABEL_TO_FACET",
    "facet_of_csfcube_label",
    "CSABSTRUCT_TO_FACET",
    "NICTA_TO_FACET",
    "SCICITE_TO_FACET",
    "ACL_ARC_TO_FACET",
    "MULTICITE_TO_FACET",
]

#: the facets in the paper's order (bg, mt, rs); models, FTUs and metrics index facets in this order
FACETS: tuple[str, ...] = ("background", "method", "result")
#: the paper's abbreviations, used in plot labels
FACET_SHORT: dict[str, str] = {"background": "bg", "method": "mt", "result": "rs"}
#: spellings accepted in FTU files and on the command line
FACET_ALIASES: dict[str, str] = {
    "bg": "background", "background": "background",
    "mt": "method", "method": "method", "methods": "method",
    "rs": "result", "result": "result", "results": "result",
}


def normalise_facet(facet: Any) -> str:
    """``"bg"``/``"Method"``/``"results"`` -> ``"background"``/``"method"``/``"result"``.

    >>> normalise_facet("RS"), normalise_facet("method")
    ('result', 'method')
    """
    key = str(facet).strip().lower()
    if key not in FACET_ALIASES:
        raise ValueError(f"unknown facet {facet!r}; expected one of {FACETS} (or bg, mt, rs)")
    return FACET_ALIASES[key]


#: CSFCube's sentence labels (``other_label`` has no facet)
CSFCUBE_LABEL_TO_FACET: dict[str, str] = {
    "background_label": "background",
    "objective_label": "background",
    "method_label": "method",
    "result_label": "result",
}


def facet_of_csfcube_label(label: str) -> str | None:
    """Facet of a CSFCube sentence label, or ``None`` for ``other_label``.

    >>> facet_of_csfcube_label("objective_label"), facet_of_csfcube_label("other_label")
    ('background', None)
    """
    return CSFCUBE_LABEL_TO_FACET.get(label)


#: CSAbstruct label -> facet (CSFCube's convention; ``other`` has no facet).
CSABSTRUCT_TO_FACET: dict[str, str | None] = {
    "background": "background",
    "objective": "background",
    "method": "method",
    "result": "result",
    "other": None,
}

#: NICTA-PIBOSO sentence role -> facet (the reasons are in :mod:`unifar.datasets.labelled_abstracts`).
NICTA_TO_FACET: dict[str, str | None] = {
    "background": "background",
    "population": "method",
    "intervention": "method",
    "study design": "method",
    "outcome": "result",
    "other": None,
}

#: citation intent -> facet of the cited paper that the citing sentence talks about
SCICITE_TO_FACET: dict[str, str | None] = {"background": "background", "method": "method", "result": "result"}
ACL_ARC_TO_FACET: dict[str, str | None] = {
    "Background": "background",
    "Motivation": "background",
    "Future": "background",
    "Uses": "method",
    "Extends": "method",
    "CompareOrContrast": "result",
}
MULTICITE_TO_FACET: dict[str, str | None] = {
    "background": "background",
    "motivation": "background",
    "future_work": "background",
    "uses": "method",
    "extends": "method",
    "similarities": "result",
    "differences": "result",
}
