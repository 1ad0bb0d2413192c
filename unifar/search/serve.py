"""``unifar serve DIR``: a local search page over an index, with the model and index loaded once.

Pages (server-rendered HTML, no JavaScript; :file:`templates/search.html`):

* ``/?q=QUESTION`` or ``/?like=PAPER_ID`` (with ``facet``, ``k``, ``hybrid``): the results, each
  with its score and its three facet scores ``cos(q_f, d_f)`` (the diagonal of the facet
  similarity matrix, :func:`unifar.scoring.facet_similarity`);
* ``/explain?doc=ID&q=...`` (or ``&like=ID``): the 3 x 3 facet similarity matrix as a heatmap, the
  paper's sentences shaded by the attention of each facet, and the BM25 terms that matched
  (:func:`unifar.search.explain.explain`);
* ``/api/search`` and ``/api/explain``: the same as JSON.

A bad request (an unknown facet or paper, a ``k`` that is not a whole number, a ``hybrid`` that is
not a finite number >= 0) is answered 400 or 404 with the reason, never a traceback. The server
binds to 127.0.0.1 unless told otherwise: it is for one user on their own machine.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import torch

from ..facets import FACETS
from ..scoring import facet_similarity
from .corpus_index import Index

if TYPE_CHECKING:
    from collections.abc import Mapping

    from flask import Flask

__all__ = ["create_app", "serve"]

_DEFAULT_K = 10


class BadRequest(ValueError):
    """A request the page cannot answer; ``status`` is its HTTP code."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _number(args: Mapping[str, str], name: str, kind: type, default: Any) -> Any:
    raw = args.get(name, "").strip()
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise BadRequest(f"{name} must be {what}, got {raw!r}") from None


def _request(args: Mapping[str, str]) -> dict[str, Any]:
    """The search parameters of a query string; missing ones take their defaults."""
    q, like = args.get("q", "").strip() or None, args.get("like", "").strip() or None
    facet = args.get("facet", "all").strip().lower() or "all"
    if facet != "all" and facet not in FACETS:
        raise BadRequest(f"facet must be all, {', '.join(FACETS)}; got {facet!r}")
    return {"q": q, "like": like, "facet": facet, "k": _number(args, "k", int, _DEFAULT_K),
            "hybrid": _number(args, "hybrid", float, None)}


class _Searcher:
    """The loaded index plus a small memo of question embeddings (a repeated query, or its
    explain view, is not encoded again)."""

    def __init__(self, index: Index, memo: int = 256) -> None:
        self.index = index
        self._memo: OrderedDict[str, torch.Tensor] = OrderedDict()
        self._size = memo

    def embedding(self, q: str | None, like: str | None) -> torch.Tensor:
        if like is not None or q is None:
            return self.index.query_embedding(q, like)
        if q not in self._memo:
            self._memo[q] = self.index.query_embedding(q, None)
            if len(self._memo) > self._size:
                self._memo.popitem(last=False)
        self._memo.move_to_end(q)
        return self._memo[q]

    def search(self, r: dict[str, Any]) -> list[dict[str, Any]]:
        if r["q"] is None and r["like"] is None:
            return []
        if r["like"] is not None:
            self.position(r["like"])
        qe = self.embedding(r["q"], r["like"])
        hits = self.index.search(r["q"], like=r["like"], facet=r["facet"], k=r["k"],
                                 hybrid=r["hybrid"], embedding=qe)
        rows = torch.as_tensor([self.index.position(h.id) for h in hits], dtype=torch.long)
        diag = facet_similarity(qe[None], self.index.embeddings[rows])[0].diagonal(dim1=-2, dim2=-1)
        return [{**h.to_dict(), "facets": dict(zip(FACETS, (round(float(x), 4) for x in d)))}
                for h, d in zip(hits, diag)]

    def explain(self, r: dict[str, Any], doc: str) -> dict[str, Any]:
        if r["q"] is None and r["like"] is None:
            raise BadRequest("give a question (q=...) or a paper (like=...) to explain against")
        self.position(doc)
        if r["like"] is not None:
            self.position(r["like"])
        ex = self.index.explain(r["q"], doc, like=r["like"], top=10_000)  # every sentence
        units: dict[int, dict[str, Any]] = {}
        for f in FACETS:
            for u in ex["attention"][f]:
                units.setdefault(u["unit"], {"text": u["text"], "title": u["title"]})[f] = u["weight"]
        ex["units"] = [units[i] for i in sorted(units)]
        labels = iter(self.index.documents[self.position(doc)]["labels"] or [])
        for u in ex["units"]:  # the sentences' labels, in order (the title has none)
            u["label"] = None if u["title"] else next(labels, None)
        return ex

    def position(self, paper_id: str) -> int:
        try:
            return self.index.position(paper_id, "paper")
        except KeyError as err:
            raise BadRequest(err.args[0], 404) from None


def create_app(index: Index) -> Flask:
    """The Flask application over a loaded :class:`~unifar.search.corpus_index.Index`."""
    from flask import Flask, jsonify, render_template, request

    app = Flask(__name__)
    searcher = _Searcher(index)
    info = {"papers": len(index), "facets": FACETS, "folder": str(index.folder or "(in memory)"),
            "labels": index.label_source, "model": (index.facts or {}).get("spec")}

    def page(r: dict[str, Any] | None = None, status: int = 200, **kw: Any) -> Any:
        return render_template("search.html", info=info, r=r or _request({}), **kw), status

    @app.errorhandler(BadRequest)
    def bad(err: BadRequest) -> Any:
        if request.path.startswith("/api/"):
            return jsonify({"error": str(err)}), err.status
        return page(error=str(err), status=err.status)

    @app.errorhandler(ValueError)
    def invalid(err: ValueError) -> Any:  # the index's own checks (k, hybrid, an empty query)
        return bad(BadRequest(str(err)))

    @app.get("/")
    def home() -> Any:
        r = _request(request.args)
        return page(r, results=searcher.search(r))

    @app.get("/explain")
    def explain_page() -> Any:
        r = _request(request.args)
        return page(r, ex=searcher.explain(r, request.args.get("doc", "").strip()))

    @app.get("/api/search")
    def api_search() -> Any:
        r = _request(request.args)
        return jsonify({"request": r, "results": searcher.search(r)})

    @app.get("/api/explain")
    def api_explain() -> Any:
        r = _request(request.args)
        return jsonify(searcher.explain(r, request.args.get("doc", "").strip()))

    app.jinja_env.filters["shade"] = _shade
    return app


def _shade(value: float, scale: float = 1.0) -> str:
    """A CSS blue of opacity ``value / scale`` (the heatmap cells and attention shading)."""
    alpha = 0.0 if not math.isfinite(value) else max(0.0, min(1.0, value / scale))
    return f"rgba(31, 119, 180, {alpha:.2f})"


def serve(directory: str, host: str = "127.0.0.1", port: int = 8765, model: str | None = None,
          device: str | None = None) -> None:
    """Load the index in ``directory`` (and its model) once, then answer requests until stopped."""
    from werkzeug.serving import run_simple

    index = Index.load(directory, model=model, device=device)
    index.model  # noqa: B018 -- load the query encoder now, not at the first query
    print(f"serving {len(index)} papers from {directory} on http://{host}:{port}/ (Ctrl-C stops)",
          flush=True)
    try:
        run_simple(host, port, create_app(index), threaded=False)
    except OSError as err:  # the port is taken, or the address is not this machine's
        raise ValueError(f"--host {host} --port {port}: cannot listen there ({err.strerror or err}); "
                         "choose another --port") from None
