"""What does labelling cost `unifar encode`: no labels, a labeller with its own pass, or the
in-context labeller that reads the encoding pass?

``unifar encode`` labels the sentences of papers given without labels, for facet BM25. Three
ways, on the same CSFCube papers (titles and sentences, their shipped labels dropped), the same
untrained UniFAR on the shipped MiniLM, one process, ``encode_corpus`` into a fresh folder:

* ``none``: ``--no-labels`` (dense search and whole-text BM25 only);
* ``sentence``: a :class:`~unifar.rhetoric.labeller.FacetLabeller` (a linear head over each
  sentence embedded alone by the frozen MiniLM at 64 tokens: a second pass over every sentence);
  the head is fitted here on CSAbstruct train (its weights do not change the time);
* ``in-context``: the shipped labeller (:class:`~unifar.rhetoric.context_labeller.InContextLabeller`),
  labels from the sentence states of the pass that encodes the papers.

Each is run ``--repeats`` times (the first of all runs warms the caches and is discarded); the
table gives papers/s and the labeller's share of the encoding time, ``1 - t(none) / t(labeller)``
(issue 32's goal: at most 20 %)::

    .venv/bin/python benchmarks/labeller_cost.py          # -> results/search/labeller_cost.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from unifar.files import REPO, write_json
from unifar.runtime import run_facts


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--papers", type=int, default=300, help="CSFCube papers encoded per run")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=str(REPO / "results" / "search" / "labeller_cost.json"))
    args = ap.parse_args(argv)

    import torch

    from unifar.rhetoric.labeller import FacetLabeller
    from unifar.rhetoric.labeller_data import csabstruct_training_documents
    from unifar.datasets.labelled_abstracts import load_csfcube_documents
    from unifar.rhetoric.encoder import SentenceEncoder
    from unifar.search.corpus import read_corpus
    from unifar.search.encode import encode_corpus, load_labeller
    from unifar.search.models import load_model

    started = time.perf_counter()
    torch.manual_seed(0)
    papers = [{"id": d["id"], "title": d["title"], "sentences": d["sentences"]}
              for d in list(load_csfcube_documents(REPO / "data" / "csfcube"))[: args.papers]]
    model = load_model("minilm")
    train, _ = csabstruct_training_documents(("train",), path=REPO / "data" / "csabstruct")
    labellers = {"none": None,
                 "sentence": FacetLabeller(SentenceEncoder.from_name("minilm", max_length=64)).fit(train),
                 "in-context": load_labeller(None)}
    seconds: dict[str, list[float]] = {name: [] for name in labellers}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "papers.jsonl"
        path.write_text("".join(json.dumps(p) + "\n" for p in papers), encoding="utf-8")
        corpus = read_corpus(path)
        encode_corpus(corpus, model, Path(tmp) / "warm", progress=False)  # warm-up, discarded
        for r in range(args.repeats):
            for name, labeller in labellers.items():
                t0 = time.perf_counter()
                encode_corpus(corpus, model, Path(tmp) / f"{name}-{r}", labeller=labeller, progress=False)
                seconds[name].append(time.perf_counter() - t0)
    best = {name: min(s) for name, s in seconds.items()}
    rows = {name: {"seconds": [round(x, 2) for x in s], "papers_per_second": round(args.papers / best[name], 2),
                   "labeller_share": round(1 - best["none"] / best[name], 3) if name != "none" else 0.0}
            for name, s in seconds.items()}
    out = {"what": "unifar encode on CSFCube papers (untrained UniFAR on MiniLM, CPU): papers/s "
                   "(best of the repeats) and the labeller's share of the encoding time",
           "config": {"papers": args.papers, "repeats": args.repeats, "threads": torch.get_num_threads(),
                      "median_seconds": {n: round(statistics.median(s), 2) for n, s in seconds.items()}},
           "runs": rows, **run_facts(started)}
    write_json(args.out, out)
    print(f"{'labels':<12} {'papers/s':>9} {'labeller share':>15}")
    for name, row in rows.items():
        print(f"{name:<12} {row['papers_per_second']:9.2f} {row['labeller_share']:15.1%}")
    print(f"wrote {args.out}")
    return out


if __name__ == "__main__":
    main()
