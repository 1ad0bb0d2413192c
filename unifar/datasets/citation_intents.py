"""Citation-intent sentences (SciCite, ACL-ARC, MultiCite) as ``datasets.Dataset`` records
``{id, text, intent, raw_label, source, split}`` plus ``citing_paper_id``, ``cited_paper_id``
and ``section_name`` (``None`` in the SciBERT copies, which dropped them).

``intent`` is the scheme's label mapped onto the facets (``None`` where no facet fits); the
original label stays in ``raw_label``. Mappings, one line of reason each:

* SciCite: background / method / result are the facets themselves (FLeW's and UniFAR's
  facet partition comes from this scheme).
* ACL-ARC (Jurgens et al., 2018): Background, Motivation, Future -> background (context and
  open problems the citing paper builds on); Uses, Extends -> method (the cited work's method
  is used or extended); CompareOrContrast -> result (comparison with the cited work's results,
  SciCite's "result comparison").
* MultiCite (Lauscher et al., 2022): background, motivation, future_work -> background;
  uses, extends -> method; similarities, differences -> result (same reasons as ACL-ARC, whose
  scheme MultiCite refines). A multi-label instance gets a facet only when all its labels map
  to the same facet, else ``None``.

Files: SciCite and ACL-ARC as in the SciBERT repository (``{train,dev,test}.txt``, one JSON
object ``{text, label, metadata}`` per line) or the official releases (``.jsonl``;
SciCite's ``string``/``label``/``unique_id``/``citingPaperId``/``citedPaperId``/
``sectionName``, ACL-ARC's ``text``/``intent``/``unique_id``/``citing_paper_id``/
``cited_paper_id``/``section_name``). MultiCite: ``classification_<variant>/{train,dev,test}.json``
(JSON arrays of ``{id, x, y}``, ``y`` space-separated labels, ``x`` with ``<cite>...</cite>``
around the target mention; where upstream gives ``x`` as a list of strings they are joined
with spaces).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import datasets
from datasets import Value

from unifar.facets import ACL_ARC_TO_FACET, MULTICITE_TO_FACET, SCICITE_TO_FACET
from unifar.datasets.readers import iter_jsonl, read_json, resolve_dir
from unifar.datasets.readers import splits as _splits
from unifar.datasets.schema import intents_to_dataset, make_intent

__all__ = [
    "load_scicite",
    "load_acl_arc",
    "load_multicite",
    "multicite_intent",
]


_EXTRA = {"citing_paper_id": Value("string"), "cited_paper_id": Value("string"), "section_name": Value("string")}


def _opt_str(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _load_jsonl_intents(
    root: Path, split: str | None, source: str, mapping: dict[str, str | None],
    text_keys: tuple[str, ...], label_keys: tuple[str, ...],
) -> datasets.Dataset:
    records = []
    for sp in _splits(split):
        file = next((root / f"{sp}{ext}" for ext in (".txt", ".jsonl") if (root / f"{sp}{ext}").is_file()), None)
        if file is None:
            raise FileNotFoundError(f"{source}: neither {sp}.txt nor {sp}.jsonl found in {root}")
        for lineno, rec in iter_jsonl(file):
            where = f"{file}:{lineno}"
            text = next((rec[k] for k in text_keys if isinstance(rec.get(k), str)), None)
            label = next((rec[k] for k in label_keys if isinstance(rec.get(k), str)), None)
            if text is None or label is None:
                raise ValueError(f"{where}: needs a text field {text_keys} and a label field {label_keys}")
            if label not in mapping:
                raise ValueError(f"{where}: unknown label {label!r}; expected one of {sorted(mapping)}")
            rid = _opt_str(rec.get("unique_id")) or f"{sp}-{lineno}"
            records.append(
                make_intent(
                    rid, text, mapping[label], label, source=source, split=sp, where=where,
                    citing_paper_id=_opt_str(rec.get("citingPaperId", rec.get("citing_paper_id"))),
                    cited_paper_id=_opt_str(rec.get("citedPaperId", rec.get("cited_paper_id"))),
                    section_name=_opt_str(rec.get("sectionName", rec.get("section_name"))),
                )
            )
    return intents_to_dataset(records, _EXTRA)


def load_scicite(path: str | Path | None = None, split: str | None = None) -> datasets.Dataset:
    """SciCite (Cohan et al., 2019): 10,097 citation sentences in the SciBERT copy (default ``data/scicite``)."""
    return _load_jsonl_intents(resolve_dir(path, "scicite"), split, "scicite", SCICITE_TO_FACET,
                               ("text", "string"), ("label",))


def load_acl_arc(path: str | Path | None = None, split: str | None = None) -> datasets.Dataset:
    """ACL-ARC citation functions (Jurgens et al., 2018): 1,941 sentences in the SciBERT copy (default ``data/acl_arc``)."""
    return _load_jsonl_intents(resolve_dir(path, "acl_arc"), split, "acl_arc", ACL_ARC_TO_FACET,
                               ("text", "cleaned_cite_text"), ("label", "intent"))


def multicite_intent(labels: list[str]) -> str | None:
    """The facet of a (possibly multi-label) MultiCite instance, ``None`` when its labels disagree.

    >>> multicite_intent(["uses", "extends"]), multicite_intent(["similarities", "uses"])
    ('method', None)
    """
    facets = {MULTICITE_TO_FACET[x] for x in labels}
    return facets.pop() if len(facets) == 1 else None


def load_multicite(
    path: str | Path | None = None,
    split: str | None = None,
    variant: str = "gold_context",
    remove_cite_tags: bool = False,
) -> datasets.Dataset:
    """MultiCite classification splits (default ``data/multicite``, variant ``gold_context``).

    ``path`` is the folder holding ``classification_<variant>/`` (or that folder itself).
    ``raw_label`` keeps the space-separated upstream labels; ``remove_cite_tags`` strips the
    ``<cite>``/``</cite>`` markers from the text.
    """
    root = resolve_dir(path, "multicite")
    sub = root / f"classification_{variant}"
    folder = sub if sub.is_dir() else root
    records = []
    for sp in _splits(split):
        file = folder / f"{sp}.json"
        data = read_json(file)
        if not isinstance(data, list):
            raise ValueError(f"{file}: expected a JSON array of {{id, x, y}} objects")
        for n, rec in enumerate(data, start=1):
            where = f"{file}: item {n}"
            if not isinstance(rec, dict):
                raise ValueError(f"{where}: expected an object {{id, x, y}}")
            x = rec.get("x")
            if isinstance(x, list) and all(isinstance(part, str) for part in x):
                x = " ".join(x)  # upstream quirk: 53 gold-context items hold a list of strings
            if not isinstance(x, str) or not all(isinstance(rec.get(k), str) for k in ("id", "y")):
                raise ValueError(f"{where}: expected string fields 'id', 'x' (or a list of strings) and 'y'")
            labels = rec["y"].split()
            unknown = sorted(set(labels) - set(MULTICITE_TO_FACET))
            if not labels or unknown:
                raise ValueError(f"{where}: unknown or missing labels {unknown or rec['y']!r}; expected {sorted(MULTICITE_TO_FACET)}")
            text = x.replace("<cite>", "").replace("</cite>", "") if remove_cite_tags else x
            records.append(
                make_intent(
                    rec["id"], text, multicite_intent(labels), rec["y"], source="multicite", split=sp, where=where,
                    citing_paper_id=None, cited_paper_id=None, section_name=None,
                )
            )
    return intents_to_dataset(records, _EXTRA)
