"""Write the book's API reference (``book/api/``) and its part of ``_toc.yml`` from the package tree.

Every module of ``unifar`` gets one page (Sphinx autodoc of its docstrings); every subpackage an
index page listing its modules; ``book/api/index.md`` groups the top-level modules and
subpackages by the stage of the paper they serve (:data:`GROUPS`). Run it after adding, moving or
deleting a module; ``tests/test_api_pages.py`` fails while the pages are out of date.

    python .ci/api_pages.py            # write the pages and the TOC entries
    python .ci/api_pages.py --check    # exit 1 and name what is stale
"""

from __future__ import annotations

import argparse
import pkgutil
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "book" / "api"
TOC = ROOT / "_toc.yml"

#: index sections: (heading, top-level modules or subpackages, in reading order)
GROUPS: list[tuple[str, list[str]]] = [
    ("The model and its training (paper sections 3 and 4.2)",
     ["config", "text", "base_models", "pooling", "batching", "attention", "model", "scoring", "losses", "objective", "caching",
      "frozen_base", "training_data", "optim", "checkpoints", "training_log", "training_run", "distributed", "train"]),
    ("Retrieval and evaluation (paper section 5)", ["evaluation"]),
    ("Ablations (paper section 6)", ["ablation"]),
    ("Searching a corpus of papers", ["search"]),
    ("Related methods: FLeW and multi-objective bi-encoders",
     ["bi_encoder", "bi_encoder_losses", "flew", "multi_objective"]),
    ("Dataset loaders, the FTU format and the leakage guard", ["datasets"]),
    ("Training-data construction (paper section 4.1)", ["construction"]),
    ("Sentence embeddings of rhetorical function (SciToricsBERT) and the facet labellers", ["rhetoric"]),
    ("The book: chapters, reported numbers and figures", ["book", "paper", "summary", "plots"]),
    ("Shared foundations and the command line", ["facets", "runtime", "typecheck", "files", "cli"]),
]
INTRO = """# API reference

This part documents the Python library `unifar` that the chapters run. Each page is
generated from the docstrings of one module, so it always matches the code in the repository.
Every function, class and method has an anchor named by its full dotted path, for example
{py:func}`unifar.losses.info_nce` or {py:class}`unifar.model.UniFAR`. The source of each module
is one click away through the `[source]` links. The pages are written by `.ci/api_pages.py`.

```{eval-rst}
.. automodule:: unifar

.. py:currentmodule:: None
```

The package re-exports {py:class}`~unifar.model.UniFAR` and {py:class}`~unifar.encoding.FacetEncoding`
(documented in {py:mod}`unifar.model`) and {py:class}`~unifar.config.UniFARConfig` and
{py:data}`~unifar.config.ABLATIONS` (documented in {py:mod}`unifar.config`), so
`from unifar import UniFAR, UniFARConfig` works. `python -m unifar` runs the command line of
{py:mod}`unifar.cli`.
"""


def tree() -> tuple[list[str], dict[str, list[str]]]:
    """Top-level module and subpackage names, and each subpackage's module names (sorted)."""
    sys.path.insert(0, str(ROOT))
    top, subs = [], {}
    for info in pkgutil.iter_modules([str(ROOT / "unifar")]):
        if info.name.startswith("_"):
            continue
        top.append(info.name)
        if info.ispkg:
            subs[info.name] = sorted(i.name for i in pkgutil.iter_modules([str(ROOT / "unifar" / info.name)])
                                     if not i.name.startswith("_"))
    return sorted(top), subs


def module_page(dotted: str) -> str:
    return (f"# `{dotted}`\n\n```{{eval-rst}}\n.. automodule:: {dotted}\n   :members:\n"
            "   :show-inheritance:\n```\n")


def package_page(pkg: str, modules: list[str]) -> str:
    listing = "\n".join(f"   unifar.{pkg}.{m}" for m in modules)
    return (f"# `unifar.{pkg}`\n\n```{{eval-rst}}\n.. automodule:: unifar.{pkg}\n\n.. py:currentmodule:: None\n```\n\n"
            f"## Modules\n\n```{{eval-rst}}\n.. autosummary::\n\n{listing}\n```\n")


def grouped(top: list[str]) -> list[tuple[str, list[str]]]:
    known = [(h, [m for m in mods if m in top]) for h, mods in GROUPS]
    listed = {m for _, mods in known for m in mods}
    other = [m for m in top if m not in listed]
    return [(h, mods) for h, mods in known if mods] + ([("Other modules", other)] if other else [])


def pages() -> dict[Path, str]:
    """Every page of the reference, by path."""
    top, subs = tree()
    out: dict[Path, str] = {}
    body = [INTRO]
    for heading, mods in grouped(top):
        names = "\n".join(f"   unifar.{m}" for m in mods)
        body.append(f"\n## {heading}\n\n```{{eval-rst}}\n.. autosummary::\n\n{names}\n```\n")
    out[API / "index.md"] = "".join(body)
    for m in top:
        if m in subs:
            out[API / m / "index.md"] = package_page(m, subs[m])
            for s in subs[m]:
                out[API / m / f"{s}.md"] = module_page(f"unifar.{m}.{s}")
        else:
            out[API / f"{m}.md"] = module_page(f"unifar.{m}")
    return out


def toc_block() -> str:
    """The ``sections:`` of ``book/api/index`` in ``_toc.yml`` (reading order of the index)."""
    top, subs = tree()
    lines = []
    for _, mods in grouped(top):
        for m in mods:
            if m in subs:
                lines.append(f"          - file: book/api/{m}/index")
                lines.append("            sections:")
                lines += [f"              - file: book/api/{m}/{s}" for s in subs[m]]
            else:
                lines.append(f"          - file: book/api/{m}")
    return "\n".join(lines) + "\n"


TOC_PATTERN = re.compile(r"(      - file: book/api/index\n        sections:\n)((?:          .*\n)+)")


def toc_text() -> str:
    text = TOC.read_text(encoding="utf-8")
    if not TOC_PATTERN.search(text):
        raise SystemExit(f"{TOC}: no 'book/api/index' entry with sections found")
    return TOC_PATTERN.sub(lambda m: m.group(1) + toc_block(), text, count=1)


def stale() -> list[str]:
    """Paths whose content differs from what this script writes, and pages of deleted modules."""
    want = pages()
    out = [str(p.relative_to(ROOT)) for p, t in want.items() if not p.is_file() or p.read_text(encoding="utf-8") != t]
    out += [f"{p.relative_to(ROOT)} (no such module)" for p in API.rglob("*.md") if p not in want]
    if toc_text() != TOC.read_text(encoding="utf-8"):
        out.append("_toc.yml")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only say what is stale (exit 1 if anything is)")
    args = ap.parse_args()
    if args.check:
        bad = stale()
        for b in bad:
            print(f"stale: {b}")
        return 1 if bad else 0
    want = pages()
    for p in API.rglob("*.md"):
        if p not in want:
            p.unlink()
    for p, t in want.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(t, encoding="utf-8")
    for d in sorted(API.rglob("*"), reverse=True):
        if d.is_dir() and not any(d.iterdir()):
            d.rmdir()
    TOC.write_text(toc_text(), encoding="utf-8")
    print(f"wrote {len(want)} pages under {API.relative_to(ROOT)} and the TOC entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
