"""How long does a search take: a cold `unifar search` call, against a warm `unifar serve` query?

A 10,000-paper index on disk: CSFCube's abstracts (real titles and sentences with their shipped
labels, so BM25 has real text), repeated with new ids up to ``--papers``, and random unit facet
embeddings of MiniLM's width (the time of an exact search does not depend on the vectors'
content; encoding 10,000 papers would take the CPU about ten minutes). The query encoder is the
real untrained UniFAR on the shipped MiniLM.

* cold: ``python -m unifar search DIR QUESTION --json`` as a new process (imports, the index's
  checks, loading the model, encoding the question, searching), the first call (every file
  hashed) and later ones (files unchanged since: their digests are not recomputed);
* the import of the command line alone (``python -c "import unifar.cli"``);
* warm: the page's JSON endpoint (``/api/search``) of ``unifar serve``'s app, in process:
  new questions (each encoded), the same question again (its embedding memoised), ``--like``
  queries, and a hybrid rerank.

    .venv/bin/python benchmarks/search_latency.py          # -> results/search/latency.json

Prints a table; the goal (issue 33): a warm query under 100 ms on a 10,000-paper index.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from unifar.files import REPO, write_json
from unifar.runtime import run_facts

CSFCUBE = REPO / "data" / "csfcube" / "abstracts-csfcube-preds.jsonl"
QUESTIONS = [
    "predicting support in congressional debates", "contrastive learning of sentence embeddings",
    "convolutional networks for sentence classification", "active learning to reduce annotation cost",
    "dependency parsing with neural networks", "word embeddings from co-occurrence statistics",
    "machine translation with attention", "detecting sarcasm in social media",
    "question answering over knowledge bases", "summarising scientific articles",
]


def build_index(folder: Path, n: int, seed: int) -> None:
    """The synthetic index of the module docstring, saved by :meth:`Index.save`."""
    from unifar.facets import CSFCUBE_LABEL_TO_FACET
    from unifar.search.corpus_index import Index
    from unifar.search.models import load_model, model_facts

    rows = [json.loads(x) for x in CSFCUBE.read_text(encoding="utf-8").splitlines()]
    docs = []
    for i in range(n):
        r = rows[i % len(rows)]
        docs.append({"id": f"{r['paper_id']}-{i // len(rows)}", "title": r["title"],
                     "sentences": r["abstract"],
                     "labels": [CSFCUBE_LABEL_TO_FACET.get(x) for x in r["pred_labels"]]})
    model = load_model("minilm")
    g = torch.Generator().manual_seed(seed)
    emb = torch.nn.functional.normalize(torch.randn(n, 3, model.hidden_size, generator=g), dim=-1)
    index = Index(model)
    index.documents, index.embeddings = docs, emb
    index.facts, index.label_source = model_facts(model, "minilm"), "corpus"
    index.build("exact").save(folder)


def timed_cli(folder: Path, question: str) -> float:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "unifar", "search", str(folder), question, "-k", "10",
                           "--json"], capture_output=True, text=True, cwd=REPO)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return seconds


def warm(folder: Path, repeats: int) -> dict[str, list[float]]:
    from unifar.search.corpus_index import Index
    from unifar.search.serve import create_app

    index = Index.load(folder)
    client = create_app(index).test_client()
    ids = [d["id"] for d in index.documents[:repeats]]
    client.get("/api/search?q=warm+up")  # the first question loads the query encoder
    cases = {
        "new question": [f"/api/search?q={q.replace(' ', '+')}+{k}" for k in range(repeats // 10 + 1)
                         for q in QUESTIONS][:repeats],
        "same question again": ["/api/search?q=contrastive+learning"] * repeats,
        "papers like one (--like)": [f"/api/search?like={i}&facet=method" for i in ids],
        "hybrid 0.25 (10 questions, each 3 times)": [f"/api/search?q={q.replace(' ', '+')}+x&hybrid=0.25"
                                      for q in QUESTIONS * (repeats // len(QUESTIONS) + 1)][:repeats],
    }
    out = {}
    for name, urls in cases.items():
        ms = []
        for url in urls:
            t0 = time.perf_counter()
            page = client.get(url)
            ms.append((time.perf_counter() - t0) * 1000)
            assert page.status_code == 200, page.get_data(as_text=True)[:500]
        out[name] = ms
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--papers", type=int, default=10_000)
    ap.add_argument("--cold-runs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=30, help="warm queries per case")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="results/search/latency.json")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "index"
        t0 = time.perf_counter()
        build_index(folder, args.papers, args.seed)
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import unifar.cli"], check=True, cwd=REPO)
        import_s = time.perf_counter() - t0
        cold_first = timed_cli(folder, QUESTIONS[0])
        time.sleep(2.5)  # files written within 2 s of their hashing are hashed again (racy rule)
        timed_cli(folder, QUESTIONS[1])
        cold = [timed_cli(folder, q) for q in QUESTIONS[2 : 2 + args.cold_runs]]
        warm_ms = warm(folder, args.repeats)
        index_bytes = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    summary = {name: {"median_ms": round(statistics.median(v), 1), "p90_ms": round(sorted(v)[int(0.9 * len(v))], 1),
                      "n": len(v)} for name, v in warm_ms.items()}
    out = {"what": "latency of unifar search (cold CLI process) and of a warm unifar serve query (measured here)",
           "papers": args.papers, "index_bytes": index_bytes, "build_seconds": round(build_s, 1),
           "import_unifar_cli_seconds": round(import_s, 2),
           "cold_cli_seconds": {"first call (files hashed)": round(cold_first, 2),
                                "later calls, median": round(statistics.median(cold), 2)},
           "warm": summary, "goal_warm_ms": 100, "run": run_facts(started)}
    print(f"{args.papers} papers, index {index_bytes / 1e6:.0f} MB (built in {build_s:.0f} s)")
    print(f"import unifar.cli: {import_s:.2f} s; cold `unifar search`: first {cold_first:.2f} s, "
          f"then {statistics.median(cold):.2f} s (median of {len(cold)})")
    print(f"{'warm query (unifar serve)':<34} {'median ms':>10} {'p90 ms':>8}")
    for name, s in summary.items():
        print(f"{name:<34} {s['median_ms']:>10.1f} {s['p90_ms']:>8.1f}")
    print(f"wrote {write_json(args.out, out)}")
    return out


if __name__ == "__main__":
    main()
