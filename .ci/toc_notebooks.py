"""Print the notebooks of _toc.yml in TOC order, one path per line (relative to the repository).

    python .ci/toc_notebooks.py [NAME ...]

With names (a stem, a file name or a path), only those notebooks, still in TOC order; an
unknown name is an error that lists the known ones. Used by .ci/run and .ci/build-book.
"""

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def toc_notebooks(root: Path = ROOT) -> list[str]:
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    files: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            for key in ("root", "file"):
                if isinstance(node.get(key), str):
                    files.append(node[key])
            for key in ("parts", "chapters", "sections"):
                for child in node.get(key) or []:
                    walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(toc)
    notebooks: list[str] = []
    for f in files:
        p = Path(f)
        p = p if p.suffix == ".ipynb" else p.with_suffix(".ipynb")
        if (root / p).exists() and p.as_posix() not in notebooks:
            notebooks.append(p.as_posix())
    return notebooks


def main(wanted: list[str]) -> None:
    notebooks = toc_notebooks()
    if wanted:
        chosen = []
        for w in wanted:
            stem = Path(w).name.removesuffix(".ipynb")
            hits = [nb for nb in notebooks if Path(nb).stem == stem]
            if not hits:
                sys.exit(f"{w!r} is not a notebook of _toc.yml; known: {[Path(n).stem for n in notebooks]}")
            chosen += [h for h in hits if h not in chosen]
        notebooks = [nb for nb in notebooks if nb in chosen]  # keep TOC order
    print("\n".join(notebooks))


if __name__ == "__main__":
    main(sys.argv[1:])
