"""The search commands of ``python -m unifar``: ``encode``, ``index``, ``search``, ``explain``.

::

    unifar encode papers.jsonl --model minilm --out my-index     # resumable, in chunks
    unifar index my-index [--backend exact|flat|ivf|hnsw|auto]
    unifar search my-index "how do retrievers use citation graphs?" -k 10
    unifar search my-index --like PAPER_ID --facet method --hybrid 0.25 --json
    unifar explain my-index "citation graphs for retrieval" PAPER_ID
    unifar serve my-index                     # a search page on http://127.0.0.1:8765/

:func:`add_search_parsers` adds them to the main parser; :func:`run_search_command` runs one.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["SEARCH_COMMANDS", "add_search_parsers", "run_search_command"]

SEARCH_COMMANDS = ("encode", "index", "search", "explain", "serve")
_FACETS = ("all", "background", "method", "result", "bg", "mt", "rs")


def _encode_parser(sub: Any) -> None:
    en = sub.add_parser(
        "encode",
        help="encode your papers (facet embeddings + sentence labels)",
        description="Encode a corpus of papers with UniFAR into DIR, in chunks: "
        "run the same command again to continue an interrupted run.",
    )
    en.add_argument(
        "corpus",
        metavar="CORPUS",
        help="JSONL, CSV or Parquet; rows with id, title "
        "and abstract (or sentences, optionally with labels)",
    )
    en.add_argument(
        "--model",
        required=True,
        metavar="M",
        help="UniFAR checkpoint folder, or a "
        "base encoder (minilm, mpnet, hub id: an untrained UniFAR on it)",
    )
    en.add_argument("--out", required=True, metavar="DIR", help="the index folder to write")
    en.add_argument(
        "--labeller",
        metavar="DIR",
        help="sentence labeller folder for rows without labels (default: the shipped one, a "
        "linear head over frozen MiniLM; the book's chapter 2 makes a fine-tuned, more accurate "
        "one in artifacts/ch02/default/labeller)",
    )
    en.add_argument(
        "--no-labels",
        action="store_true",
        help="no sentence labels: dense search and BM25 over title + abstract only (no facet BM25)",
    )
    en.add_argument(
        "--allow-title-only",
        action="store_true",
        help="encode rows without abstract from their title (default: an error)",
    )
    en.add_argument(
        "--chunk-size",
        type=int,
        default=1000,
        metavar="N",
        help="papers per saved chunk (default 1000)",
    )
    en.add_argument("--batch-size", type=int, default=32, metavar="N", help="default 32")
    en.add_argument("--device", help="torch device (default: cuda when available, else cpu)")
    en.add_argument(
        "--bf16",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="bf16 autocast (default: on CUDA)",
    )
    en.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an encoding of another corpus or model in DIR",
    )
    en.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    en.set_defaults(subparser=en)


def add_search_parsers(sub: Any) -> None:
    """Add ``encode``, ``index``, ``search`` and ``explain`` to the subcommands ``sub``."""
    _encode_parser(sub)
    ix = sub.add_parser(
        "index",
        help="build the search index of an encoded folder",
        description="Build vector indexes (each facet and their diagonal mean) "
        "and BM25 (title + abstract and each facet) in DIR/index.",
    )
    ix.add_argument("dir", metavar="DIR", help="folder written by `unifar encode`")
    ix.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "exact", "flat", "ivf", "hnsw"],
        help="exact: matrix product; flat/ivf/hnsw: FAISS; auto (default): exact "
        "below 500k papers, else ivf",
    )
    ix.add_argument("--nlist", type=int, metavar="N", help="ivf: cells (default sqrt(N))")
    ix.add_argument("--nprobe", type=int, default=32, metavar="N", help="ivf: cells searched (32)")
    ix.add_argument("--hnsw-m", type=int, default=32, metavar="N", help="hnsw: graph degree (32)")
    ix.add_argument("--ef-search", type=int, default=128, metavar="N", help="hnsw: breadth (128)")
    ix.set_defaults(subparser=ix)

    se = sub.add_parser(
        "search",
        help="search an index with a question or a paper",
        description="Question -> papers (mean over facets of cos(question facet, "
        "paper facet)), or --like PAPER_ID -> papers, per facet or all.",
    )
    se.add_argument("dir", metavar="DIR", help="folder written by `unifar encode` + `unifar index`")
    se.add_argument("query", nargs="?", metavar="QUESTION", help="the question (omit with --like)")
    se.add_argument("--like", metavar="PAPER_ID", help="papers like this indexed paper")
    se.add_argument(
        "--facet",
        default="all",
        choices=_FACETS,
        help="rank by one facet's similarity, or all (their mean; default)",
    )
    se.add_argument(
        "--hybrid",
        type=float,
        metavar="W",
        help="rerank the --depth best by z(dense) + W z(BM25), the weight as in every "
        "chapter (0.25: the mining teacher's, chosen on CSFCube fold1_dev)",
    )
    se.add_argument(
        "--depth",
        type=int,
        default=100,
        metavar="N",
        help="--hybrid: dense candidates reranked (default 100)",
    )
    _common(se)
    ex = sub.add_parser(
        "explain",
        help="why a paper matches a query",
        description="The 3 x 3 facet similarity matrix, the sentences each facet "
        "attends to most and the BM25 terms that matched.",
    )
    ex.add_argument("dir", metavar="DIR", help="folder written by `unifar encode` + `unifar index`")
    ex.add_argument("query", metavar="QUERY", help="a question, or with --like a paper id")
    ex.add_argument("doc_id", metavar="DOC_ID", help="the paper to explain")
    ex.add_argument("--like", action="store_true", help="QUERY is an indexed paper's id")
    ex.add_argument("--top", type=int, default=3, metavar="N", help="sentences per facet (3)")
    _common(ex, k=False)
    sv = sub.add_parser(
        "serve",
        help="a local search page over an index (model and index loaded once)",
        description="Serve a search page: a question or 'papers like this one', per facet, "
        "results with their three facet scores, and for a result the facet similarity "
        "heatmap, the sentences each facet attends to and the BM25 terms that matched.",
    )
    sv.add_argument("dir", metavar="DIR", help="folder written by `unifar encode` + `unifar index`")
    sv.add_argument("--host", default="127.0.0.1",
                    help="address to bind (default 127.0.0.1: this machine only)")
    sv.add_argument("--port", type=int, default=8765, metavar="N", help="port (default 8765)")
    _common(sv, k=False, json_output=False)


def _common(p: argparse.ArgumentParser, k: bool = True, json_output: bool = True) -> None:
    if k:
        p.add_argument("-k", type=int, default=10, metavar="K", help="results (default 10)")
    if json_output:
        p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.add_argument(
        "--model",
        metavar="M",
        help="query encoder (default: the model the index was built with; another one is refused)",
    )
    p.add_argument("--device", help="torch device for the query encoder (default: cuda or cpu)")
    p.set_defaults(subparser=p)


def _encode(args: argparse.Namespace) -> None:
    from ..files import display_path
    from .corpus import read_corpus
    from .encode import encode_corpus, load_labeller
    from .models import load_model, model_spec

    corpus = read_corpus(args.corpus, allow_title_only=args.allow_title_only)
    if args.no_labels:
        for d in corpus.documents:
            d["labels"] = None
    unlabelled = sum(d["labels"] is None for d in corpus.documents)
    labeller = load_labeller(args.labeller) if unlabelled and not args.no_labels else None
    model = load_model(args.model, args.device)
    m = encode_corpus(
        corpus,
        model,
        args.out,
        spec=model_spec(args.model),
        labeller=labeller,
        chunk_size=args.chunk_size,
        batch_size=args.batch_size,
        bf16=args.bf16,
        progress=not args.no_progress,
        overwrite=args.overwrite,
    )
    c, rate = m["counts"], m["last_run"]["documents_per_second"]
    print(
        f"encoded {c['documents']} papers ({c['sentences']} sentences; labels: "
        f"{m['labels']['source']}) into {display_path(args.out)}: {len(m['chunks'])} chunks"
        + (" (already complete)" if m.get("already_complete") else f", {rate} papers/s")
    )
    print(f"next: python -m unifar index {display_path(args.out)}")


def _index(args: argparse.Namespace) -> None:
    import time

    from .corpus_index import Index

    for name in ("nlist", "nprobe", "hnsw_m", "ef_search"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be positive, got {value}")
    t0 = time.perf_counter()
    idx = Index.from_encoding(args.dir)
    idx.build(
        args.backend,
        nlist=args.nlist,
        nprobe=args.nprobe,
        hnsw_m=args.hnsw_m,
        ef_search=args.ef_search,
    )
    path = idx.save_index(args.dir)
    print(
        f"indexed {len(idx)} papers ({idx.backend}; BM25: {', '.join(idx.bm25)}) in "
        f"{time.perf_counter() - t0:.1f} s -> {path}"
    )


def _search(args: argparse.Namespace) -> Any:
    from .corpus_index import Index, check_search_options

    check_search_options(args.k, args.hybrid, args.depth, names=("-k", "--hybrid", "--depth"))
    if (args.query is None) == (args.like is None):
        raise ValueError("give a QUESTION or --like PAPER_ID (one of them)")
    if args.query is not None and not args.query.strip():
        raise ValueError("QUESTION is empty: give a question, or --like PAPER_ID")
    idx = Index.load(args.dir, model=args.model, device=args.device)
    if args.like is not None:
        idx.position(args.like, "--like")  # an unknown id, named with its option
    hits = idx.search(
        args.query, like=args.like, facet=args.facet, k=args.k, hybrid=args.hybrid, depth=args.depth
    )
    if args.json:
        print(
            json.dumps(
                {
                    "query": args.query,
                    "like": args.like,
                    "facet": args.facet,
                    "k": args.k,
                    "hybrid": args.hybrid,
                    "results": [h.to_dict() for h in hits],
                },
                indent=2,
            )
        )
        return hits
    what = f"papers like {args.like}" if args.like else repr(args.query)
    print(f"{what}, facet {args.facet}" + (f", hybrid {args.hybrid:g}" if args.hybrid else ""))
    for h in hits:
        title = h.title if len(h.title) <= 70 else h.title[:67] + "..."
        print(f"{h.rank:>3}  {h.score:>8.4f}  {h.id:<16} {title}")
    return hits


def _explain(args: argparse.Namespace) -> Any:
    from .explain import format_explanation
    from .corpus_index import Index

    if args.top < 1:
        raise ValueError(f"--top must be at least 1, got {args.top}")
    if not args.query.strip():
        raise ValueError("QUERY is empty: give a question (or a paper id with --like)")
    idx = Index.load(args.dir, model=args.model, device=args.device)
    query, like = (None, args.query) if args.like else (args.query, None)
    ex = idx.explain(query, args.doc_id, like=like, top=args.top)
    print(json.dumps(ex, indent=2) if args.json else format_explanation(ex))
    return ex


def _serve(args: argparse.Namespace) -> None:
    from .serve import serve

    if not 0 <= args.port <= 65535:
        raise ValueError(f"--port must be between 0 and 65535, got {args.port}")
    serve(args.dir, host=args.host, port=args.port, model=args.model, device=args.device)


def run_search_command(args: argparse.Namespace) -> Any:
    """Run the search command ``args.command`` (errors are raised for ``main`` to report)."""
    handler = {"encode": _encode, "index": _index, "search": _search, "explain": _explain,
               "serve": _serve}
    try:
        return handler[args.command](args)
    except FileExistsError as err:
        raise ValueError(str(err)) from None
