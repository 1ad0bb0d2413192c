"""FLeW as a baseline (unifar.flew): graph reading, eq. 3, neighbourhood sampling on a hand-built
graph whose triplets are known, FTU triplets, splitting, eq. 8 and its grid search, training."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from unifar.bi_encoder import BiEncoder, BiEncoderConfig
from unifar.bi_encoder_losses import triplet_margin_loss
from unifar.construction.llm import FakeClient, LLMError
from unifar.datasets.ftu import FTU
from unifar.facets import FACETS
from unifar.flew.embedding import embed_subgraph
from unifar.flew.graph import (
    CitationEdges,
    facet_subgraphs,
    facet_weights,
    intent_facet,
    read_citation_edges,
)
from unifar.flew.inference import (
    facet_embeddings,
    grid_search_weights,
    weight_grid,
    weighted_embedding,
)
from unifar.flew.sampling import (
    hold_out_queries,
    neighbourhood_triplets,
    sample_facet_triplets,
    triplets_from_ftus,
)
from unifar.flew.splitting import (
    SPLITTER_INSTRUCTION,
    LabellerClient,
    facet_text,
    parse_split,
    split_abstract,
    splitter_messages,
    triplet_texts,
)
from unifar.flew.training import facet_examples, train_facet_encoders

# Nine papers; each facet clusters them differently (three triangles of citations per facet), so
# the correct triplets are known: the positive shares the query's cluster *of that facet*, the
# negative does not.
CLUSTERS = {
    "background": [[0, 1, 2], [3, 4, 5], [6, 7, 8]],
    "method": [[0, 3, 6], [1, 4, 7], [2, 5, 8]],
    "result": [[0, 4, 8], [1, 5, 6], [2, 3, 7]],
}
INTENT_LABEL = {"background": "Motivation", "method": "uses", "result": "CompareOrContrast"}


def _write_graph(path, fmt: str = "tsv") -> None:
    lines = []
    for f, clusters in CLUSTERS.items():
        for a, b, c in clusters:
            for x, y in ((a, b), (b, c), (a, c)):
                if fmt == "tsv":
                    lines.append(f"p{x}\tp{y}\t{INTENT_LABEL[f]}")
                else:
                    lines.append(
                        json.dumps({"citing": f"p{x}", "cited": f"p{y}", "intent": INTENT_LABEL[f]})
                    )
    path.write_text(
        ("citing_id\tcited_id\tintent\n" if fmt == "tsv" else "") + "\n".join(lines) + "\n"
    )


def _cluster_of(facet: str, paper: str) -> int:
    return next(i for i, c in enumerate(CLUSTERS[facet]) if int(paper[1:]) in c)


# ----- graph -------------------------------------------------------------------------------------
def test_intent_labels_of_the_three_schemes_map_to_facets():
    assert [intent_facet(x) for x in ("background", "method", "result")] == [
        "background",
        "method",
        "result",
    ]
    assert [
        intent_facet(x) for x in ("Motivation", "Future", "Uses", "Extends", "CompareOrContrast")
    ] == ["background", "background", "method", "method", "result"]
    assert [intent_facet(x) for x in ("future_work", "similarities", "differences")] == [
        "background",
        "result",
        "result",
    ]
    with pytest.raises(ValueError, match="unknown intent 'cites'"):
        intent_facet("cites")


@pytest.mark.parametrize("fmt,suffix", [("tsv", ".tsv"), ("jsonl", ".jsonl")])
def test_read_citation_edges_both_formats(tmp_path, fmt, suffix):
    path = tmp_path / f"edges{suffix}"
    _write_graph(path, fmt)
    edges = read_citation_edges(path)
    assert len(edges.nodes) == 9 and len(edges.citing) == 27
    counts = facet_subgraphs(edges).counts()
    assert counts == {f: {"edges": 9, "contexts": 9, "nodes": 9} for f in CLUSTERS}


@pytest.mark.parametrize(
    "line,message",
    [
        ("p1\tp2\tcites", r"edges\.tsv:3: unknown intent 'cites'"),
        ("p1\tp2", r"edges\.tsv:3: expected 3 or 4 tab-separated fields"),
        ("p1\tp2\tuses\t0", r"edges\.tsv:3: field 'contexts' must be >= 1"),
        ("p1\tp2\tuses\ttwo", r"edges\.tsv:3: field 'contexts' must be an integer"),
        ("p1\tp1\tuses", r"edges\.tsv:3: paper 'p1' cites itself"),
    ],
)
def test_bad_citation_rows_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "edges.tsv"
    path.write_text(f"# a comment\np0\tp1\tuses\n{line}\n")
    with pytest.raises(ValueError, match=message):
        read_citation_edges(path)


def test_bad_jsonl_row_names_file_and_line(tmp_path):
    path = tmp_path / "edges.jsonl"
    path.write_text(
        '{"citing": "a", "cited": "b", "intent": "uses"}\n{"citing": "a", "intent": "uses"}\n'
    )
    with pytest.raises(ValueError, match=r"edges\.jsonl:2: field 'cited' missing"):
        read_citation_edges(path)


def test_eq3_weight_counts_contexts_of_the_same_intent(tmp_path):
    path = tmp_path / "edges.tsv"
    # a -> b: two method sentences on two rows plus a counted row of 3; one background context
    path.write_text("a\tb\tuses\na\tb\textends\na\tb\tmethod\t3\na\tb\tbackground\nb\tc\tresult\n")
    g = facet_subgraphs(read_citation_edges(path))
    a, b, c = g.index(["a", "b", "c"])
    assert g.weights["method"][a, b] == 5 and g.weights["method"][b, a] == 0
    assert g.weights["background"][a, b] == 1 and g.weights["result"][b, c] == 1
    assert g.weights["result"].nnz == 1
    W = facet_weights(np.array([0, 0]), np.array([1, 1]), np.array([2, 4]), 2)
    assert W.toarray().tolist() == [[0, 6], [0, 0]]


# ----- sampling ----------------------------------------------------------------------------------
def test_neighbourhood_sampling_finds_each_facets_clusters(tmp_path):
    path = tmp_path / "edges.tsv"
    _write_graph(path)
    trip = sample_facet_triplets(
        facet_subgraphs(read_citation_edges(path)),
        per_query=12,
        positive_ranks=(0, 2),
        negative_ranks=(2, None),
        seed=0,
    )
    for f, rows in trip.items():
        assert len(rows) == 9 * 12
        for q, p, n in rows:
            assert _cluster_of(f, q) == _cluster_of(f, p) != _cluster_of(f, n), (f, q, p, n)
        # both cluster mates turn up as positives of p0 (sampling is not stuck on one)
        assert len({p for q, p, _ in rows if q == "p0"}) == 2
    # the same seed gives the same triplets
    again = sample_facet_triplets(
        facet_subgraphs(read_citation_edges(path)),
        per_query=12,
        positive_ranks=(0, 2),
        negative_ranks=(2, None),
        seed=0,
    )
    assert again == trip


def test_edge_weights_decide_the_nearest_neighbour():
    # paper 6 cites cluster {0,1,2} with 5 contexts per edge and cluster {3,4,5} with 1
    rows = [
        (f"p{a}", f"p{b}", "method", 1)
        for c in ([0, 1, 2], [3, 4, 5])
        for a, b in ((c[0], c[1]), (c[1], c[2]), (c[0], c[2]))
    ]
    rows += [
        ("p6", "p0", "method", 5),
        ("p6", "p1", "method", 5),
        ("p6", "p3", "method", 1),
        ("p6", "p4", "method", 1),
    ]
    g = facet_subgraphs(CitationEdges.from_rows(rows))
    emb = embed_subgraph(g.weights["method"], dim=3)
    q = g.index(["p6"])
    out = neighbourhood_triplets(
        emb, q, per_query=20, positive_ranks=(0, 2), negative_ranks=(4, None)
    )
    names = np.asarray(g.nodes)[out]
    assert set(names[:, 1]) <= {"p0", "p1", "p2"} and set(names[:, 2]) <= {"p3", "p4", "p5"}


def test_sampling_bands_are_checked():
    g = facet_subgraphs(CitationEdges.from_rows([("a", "b", "method", 1), ("b", "c", "method", 1)]))
    emb = embed_subgraph(g.weights["method"])
    with pytest.raises(ValueError, match="negative_ranks=.* is empty"):
        neighbourhood_triplets(emb, positive_ranks=(0, 1), negative_ranks=(5, None))
    with pytest.raises(ValueError, match="must end before"):
        neighbourhood_triplets(emb, positive_ranks=(0, 3), negative_ranks=(1, None))


def test_triplets_from_ftus_pairs_every_positive_with_every_negative():
    u = FTU(
        "q",
        positives={"background": ["a", "b"], "result": ["c"]},
        negatives={"background": ["x"], "result": ["y", "z"]},
    )
    t = triplets_from_ftus([u])
    assert t == {
        "background": [("q", "a", "x"), ("q", "b", "x")],
        "method": [],
        "result": [("q", "c", "y"), ("q", "c", "z")],
    }
    with pytest.raises(KeyError, match="unknown documents"):
        triplets_from_ftus([u], documents={"q": {}})


# ----- splitting ---------------------------------------------------------------------------------
ABSTRACT = "Retrieval is hard. We propose a model. It improves recall."


class RuleLabeller:
    """A stand-in for the offline labeller: a keyword per facet."""

    def label_documents(self, docs):
        def one(s):
            return "method" if "propose" in s else "result" if "improve" in s else "background"

        return [[one(s) for s in d["sentences"]] for d in docs]


def test_splitter_prompt_is_flews_and_goes_through_an_llm_client():
    answer = json.dumps(
        {
            "background": "Retrieval is hard.",
            "method": "We propose a model.",
            "result": "It improves recall.",
        }
    )
    client = FakeClient([f"Sure:\n```json\n{answer}\n```"])
    out = split_abstract(client, ABSTRACT)
    assert out == {
        "background": "Retrieval is hard.",
        "method": "We propose a model.",
        "result": "It improves recall.",
    }
    ((msgs, _),) = client.calls
    assert msgs[0]["content"].startswith("Here is the abstract of a scientific paper.")
    assert msgs[0]["content"].endswith(f'Input: "{ABSTRACT}"')
    assert "every sentence is categorized appropriately." in SPLITTER_INSTRUCTION
    with pytest.raises(LLMError, match="no JSON object"):
        parse_split("I cannot do that.")
    with pytest.raises(ValueError, match="empty abstract"):
        splitter_messages("  ")


def test_labeller_back_end_answers_the_splitter_prompt():
    client = LabellerClient(RuleLabeller())
    assert split_abstract(client, ABSTRACT) == {
        "background": "Retrieval is hard.",
        "method": "We propose a model.",
        "result": "It improves recall.",
    }
    assert split_abstract(client, "Retrieval is hard.")["method"] == ""
    with pytest.raises(LLMError, match="only FLeW's splitter prompt"):
        client.complete([{"role": "user", "content": "hello"}])


def test_facet_text_of_triplet_documents():
    docs = {
        "q": {
            "id": "q",
            "title": "T",
            "sentences": ["A.", "B."],
            "labels": ["background", "method"],
        },
        "p": {"id": "p", "title": "", "sentences": ["C."], "labels": ["result"]},
        "n": {"id": "n", "title": "N", "sentences": ["D."], "facet_text": {"method": "split D."}},
    }
    assert triplet_texts([("q", "p", "n")], docs, "method") == [
        (("T", "B."), ("", "C."), ("N", "split D."))
    ]
    assert facet_text(docs["n"], "result") == "D."  # empty split: the full abstract
    assert triplet_texts([("q", "p", "n")], docs, "method", textual=False)[0][0] == ("T", "A. B.")
    with pytest.raises(KeyError, match="not in documents"):
        triplet_texts([("q", "zz", "n")], docs, "method")


# ----- eq. 8 and the weight search ---------------------------------------------------------------
def test_weighted_embedding_and_its_constraints():
    E = torch.randn(4, 3, 5)
    w = [0.2, 0.3, 0.5]
    assert torch.allclose(weighted_embedding(E, w), 0.2 * E[:, 0] + 0.3 * E[:, 1] + 0.5 * E[:, 2])
    for bad in ([0.5, 0.5, 0.0], [0.5, 0.5, 0.5], [1.2, -0.1, -0.1]):
        with pytest.raises(ValueError, match="weights > 0 that sum to 1"):
            weighted_embedding(E, bad)
    grid = weight_grid(0.1)
    assert bool((grid > 0).all()) and torch.allclose(
        grid.sum(1), torch.ones(len(grid), dtype=grid.dtype)
    )
    assert len({tuple(r) for r in grid.tolist()}) == len(grid) == 36


def test_grid_search_picks_the_weights_the_dev_score_prefers():
    E = torch.eye(3).unsqueeze(0)  # one document whose weighted embedding is the weights themselves
    target = torch.tensor([0.2, 0.3, 0.5])
    search = grid_search_weights(E, lambda e: -float(torch.linalg.vector_norm(e[0] - target)))
    assert search.best == (0.2, 0.3, 0.5)
    assert search.as_dict() == {"background": 0.2, "method": 0.3, "result": 0.5}
    assert search.best_score == pytest.approx(0.0, abs=1e-6) and len(search.scores) == 36
    flat = grid_search_weights(E, lambda e: 1.0)  # ties: the first grid point
    assert flat.best == tuple(round(x, 10) for x in weight_grid(0.1)[0].tolist())


# ----- encoders and training ---------------------------------------------------------------------
def _encoder(tokenizer, pooling: str = "cls") -> BiEncoder:
    from .conftest import tiny_bert

    cfg = BiEncoderConfig(base_model="tiny-bert", pooling=pooling, max_tokens=64)
    return BiEncoder(cfg, base_model=tiny_bert(tokenizer), tokenizer=tokenizer, device="cpu")


TOPICS = ["graph neural networks", "protein folding", "speech recognition", "galaxy formation"]


def _training_data() -> tuple[dict, dict]:
    docs = {}
    for i, topic in enumerate(TOPICS):
        for j in range(3):
            docs[f"d{i}{j}"] = {
                "id": f"d{i}{j}",
                "title": f"{topic} study {j}",
                "sentences": [f"We study {topic}.", f"Our {topic} method works."],
                "labels": ["background", "method"],
            }
    trip = [(f"d{i}0", f"d{i}{j}", f"d{(i + 1) % 4}{j}") for i in range(4) for j in (1, 2)]
    return {"background": trip, "method": trip}, docs


def _eval_loss(encoder: BiEncoder, triplets, docs, facet: str) -> float:
    """The triplet loss (eq. 5) of the training triplets, eval mode, embeddings as trained."""
    ex = facet_examples(triplets, docs, facet, encoder.sep_token)
    with torch.no_grad():
        e = encoder.eval().embed_texts([t for x in ex for t in (x.anchor, x.positive, x.negative)])
    return float(triplet_margin_loss(e[0::3], e[1::3], e[2::3], margin=1.0))


def test_facet_examples_use_facet_text():
    _, docs = _training_data()
    ex = facet_examples([("d00", "d01", "d10")], docs, "method", "[SEP]")
    assert (
        ex[0].anchor == "graph neural networks study 0[SEP]Our graph neural networks method works."
    )
    full = facet_examples([("d00", "d01", "d10")], docs, "method", "[SEP]", textual=False)
    assert full[0].negative.endswith(
        "[SEP]We study protein folding. Our protein folding method works."
    )


@pytest.mark.parametrize("top_layers,facets", [(1, ("background", "method")), (None, ("method",))])
def test_training_decreases_the_triplet_loss(tokenizer, top_layers, facets):
    triplets, docs = _training_data()
    triplets = {f: triplets[f] for f in facets}
    base = _encoder(tokenizer)
    before = {k: v.clone() for k, v in base.base.state_dict().items()}
    out = train_facet_encoders(
        triplets,
        docs,
        base,
        steps=20,
        top_layers=top_layers,
        batch_size=4,
        lr=1e-2,
        show_progress=False,
    )
    assert set(out.encoders) == set(facets) and out.triplets == {f: 8 for f in facets}
    for f, enc in out.encoders.items():
        assert len(out.losses()[f]) == 20
        start, end = _eval_loss(base, triplets[f], docs, f), _eval_loss(enc, triplets[f], docs, f)
        assert start > 0.5 and end < 0.5 * start, (f, start, end)
    assert all(
        torch.equal(v, base.base.state_dict()[k]) for k, v in before.items()
    )  # base untouched
    mt = out.encoders["method"].base.state_dict()
    word, top = "embeddings.word_embeddings.weight", "encoder.layer.1.output.dense.weight"
    assert torch.equal(mt[word], before[word]) == (top_layers == 1)  # frozen below the top layer
    assert not torch.equal(mt[top], before[top])
    if len(facets) == 2:  # two encoders, trained apart from one base
        assert not torch.equal(out.encoders["background"].base.state_dict()[top], mt[top])


def test_facet_embeddings_cls_and_mean(tokenizer):
    encs = {f: _encoder(tokenizer) for f in ("background", "method", "result")}
    docs = [{"title": "A", "sentences": ["B.", "C."]}, {"title": "", "abstract": "D."}]
    E = facet_embeddings(encs, docs)
    assert E.shape == (2, 3, 32)
    assert torch.allclose(E[:, 0], encs["background"].encode(["A[SEP]B. C.", "D."]))
    mean = {f: _encoder(tokenizer, "mean") for f in encs}
    assert not torch.allclose(facet_embeddings(mean, docs), E)
    with pytest.raises(KeyError, match="no encoder for facets"):
        facet_embeddings({"method": encs["method"]}, docs)


def test_one_encoder_for_every_facet_runs_once_and_gives_the_same_embeddings(tokenizer, monkeypatch):
    """FLeW's untrained starting point is one encoder three times: it encodes once, and each
    facet gets that encoder's embeddings (three distinct encoders still run three times)."""
    one = _encoder(tokenizer)
    docs = [{"title": "A", "sentences": ["B.", "C."]}, {"title": "", "abstract": "D."}]
    calls = []
    encode = BiEncoder.encode
    monkeypatch.setattr(BiEncoder, "encode", lambda self, *a, **k: calls.append(id(self)) or encode(self, *a, **k))
    E = facet_embeddings({f: one for f in ("background", "method", "result")}, docs)
    assert len(calls) == 1
    assert torch.equal(E[:, 0], E[:, 2]) and torch.allclose(E[:, 1], encode(one, ["A[SEP]B. C.", "D."]))
    calls.clear()
    facet_embeddings(_three_encoders(tokenizer), docs)
    assert len(calls) == 3


# ----- FLeW as an evaluation system --------------------------------------------------------------
def _three_encoders(tokenizer, pooling: str = "cls") -> dict[str, BiEncoder]:
    """Three different tiny encoders (tiny_bert is seeded: perturb each copy's top layer)."""
    encs = {}
    for k, f in enumerate(("background", "method", "result")):
        enc = _encoder(tokenizer, pooling)
        g = torch.Generator().manual_seed(k)
        w = enc.base.encoder.layer[-1].output.dense.weight
        with torch.no_grad():
            w.add_(torch.randn(w.shape, generator=g) * 0.5)
        encs[f] = enc
    return encs


class _Cube:
    """The parts of a CSFCube dataset the facet mode reads."""

    def __init__(self, docs):
        self.papers = {d["id"]: d for d in docs}

    def pool_pids(self):
        return list(self.papers)


def test_flew_retriever_ranks_each_csfcube_facet_by_its_own_encoder(tokenizer):
    from unifar.flew.retriever import FLeWRetriever

    encs = _three_encoders(tokenizer)
    _, docs = _training_data()
    r = FLeWRetriever(encs)
    cube = _Cube(list(docs.values()))
    cache: dict = {}
    fn = r.csfcube_score_fn(cube, cache)
    index = cache[(r.index_key, "csfcube")]  # [N, 3, h], pool order
    texts = [f"{d['title']}[SEP]{' '.join(d['sentences'])}" for d in docs.values()]
    for i, enc in enumerate(encs.values()):
        assert torch.equal(index[:, i], enc.encode(texts))  # column i is FLeW-<facet i>
    assert not torch.equal(index[:, 0], index[:, 2])
    at = {p: i for i, p in enumerate(cube.pool_pids())}
    cands = ["d01", "d10", "d22"]
    for i, f in enumerate(FACETS):
        want = index[[at[c] for c in cands], i] @ index[at["d00"], i]
        assert np.array_equal(fn(f, "d00", cands), want.double().numpy())


def test_flew_retriever_qdoc_uses_eq8_with_dev_weights(tokenizer, monkeypatch):
    from unifar.evaluation.benchmarks import LoadedBenchmark
    from unifar.evaluation.qdoc import QDocProtocol
    from unifar.flew import retriever as flew_retriever
    from unifar.flew.retriever import FLeWRetriever

    encs = _three_encoders(tokenizer)
    bench = _tiny_qdoc_benchmark()
    protocol = QDocProtocol("t", metrics=("mrr@10",))
    test = LoadedBenchmark("scirepeval", "qdoc", bench, protocol, "c")
    docs = bench.documents.to_list()
    fixed = FLeWRetriever(encs, weights=(0.2, 0.3, 0.5))
    index = fixed.index(docs)
    q = torch.stack([encs[f].encode(["q1"])[0] for f in FACETS])
    want = torch.nn.functional.normalize((torch.tensor([0.2, 0.3, 0.5])[:, None] * q).sum(0), dim=0)
    d = torch.nn.functional.normalize((torch.tensor([0.2, 0.3, 0.5])[None, :, None] * index).sum(1), dim=-1)
    assert np.allclose(fixed.score(["q1"], index)[0], (d @ want).numpy(), atol=1e-6)
    tuned = FLeWRetriever(encs, step=0.25)
    with pytest.raises(ValueError, match="no weights chosen"):
        tuned.score(["q1"], index)
    monkeypatch.setattr(flew_retriever, "qdoc_dev_half", lambda name, opts: bench)
    tuned.prepare(test, {})
    chosen = tuned.choices["scirepeval"]
    assert [c["weights"] for c in chosen["dev_curve"]] == [list(w) for w in weight_grid(0.25).tolist()]
    best = max(chosen["dev_curve"], key=lambda c: c["dev"])["dev"]
    assert chosen["weights"] == next(c["weights"] for c in chosen["dev_curve"] if c["dev"] == best)
    monkeypatch.setattr(flew_retriever, "qdoc_dev_half", lambda name, opts: None)
    tuned.prepare(LoadedBenchmark("cranfield", "qdoc", bench, protocol, "c"), {})
    assert tuned.choices["cranfield"]["chosen_on"] == "equal (no dev half)"
    assert np.allclose(tuned.describe()["weights_by_benchmark"]["cranfield"]["weights"], [1 / 3] * 3)


def test_flew_retriever_rejects_bad_settings(tokenizer):
    from unifar.flew.retriever import FLeWRetriever

    encs = _three_encoders(tokenizer)
    with pytest.raises(ValueError, match="missing \\['result'\\]"):
        FLeWRetriever({f: encs[f] for f in ("background", "method")})
    with pytest.raises(ValueError, match="csfcube must be one of"):
        FLeWRetriever(encs, csfcube="mean")
    with pytest.raises(ValueError, match="weights > 0 that sum to 1"):
        FLeWRetriever(encs, weights=(0.5, 0.5, 0.0))


def _tiny_qdoc_benchmark():
    from unifar.datasets.schema import QDocBenchmark, questions_to_dataset, to_dataset

    topics = TOPICS
    docs = to_dataset(
        [
            {"id": f"d{i}", "title": t, "sentences": [f"We study {t}."], "source": "t"}
            for i, t in enumerate(topics)
        ]
    )
    qs = questions_to_dataset(
        [{"qid": f"q{i}", "text": f"{t}?", "source": "t"} for i, t in enumerate(topics)]
    )
    return QDocBenchmark("dev", docs, qs, {f"q{i}": {f"d{i}": 1} for i in range(len(topics))})


def test_training_resumes_finished_facets(tokenizer, tmp_path, monkeypatch):
    from unifar.flew import training as flew_training

    triplets, docs = _training_data()
    base = _encoder(tokenizer)
    kw = dict(steps=3, top_layers=1, batch_size=4, lr=1e-2, out_dir=tmp_path, show_progress=False)
    first = train_facet_encoders(triplets, docs, base, **kw)
    assert (tmp_path / "method" / "flew_run.json").is_file()
    calls = []
    real = flew_training.train_bi_encoder
    monkeypatch.setattr(flew_training, "train_bi_encoder", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = train_facet_encoders(triplets, docs, base, **kw)
    assert calls == []  # both facets reloaded
    for f in triplets:
        assert again.losses()[f] == first.losses()[f]
        assert torch.equal(
            again.encoders[f].encode(["x y"]), first.encoders[f].encode(["x y"])
        )
    train_facet_encoders(triplets, docs, base, **{**kw, "lr": 5e-3})  # other settings: trained
    assert len(calls) == 2


def test_held_out_query_papers_give_each_facet_a_dev_curve_that_can_end_training(tokenizer, tmp_path):
    triplets, docs = _training_data()
    train, dev = hold_out_queries(triplets, 1, seed=0)
    held = {t[0] for ts in dev.values() for t in ts}
    assert len(held) == 1 and all(t[0] not in held for ts in train.values() for t in ts)
    assert {f: len(ts) for f, ts in dev.items()} == {"background": 2, "method": 2}
    base = _encoder(tokenizer)
    kw = dict(steps=6, top_layers=1, batch_size=4, lr=1e-2, show_progress=False)
    plain = train_facet_encoders(train, docs, base, **kw)
    watched = train_facet_encoders(train, docs, base, dev_triplets=dev, dev_every=2, patience=50, **kw)
    for f in train:  # measuring the dev curve does not change the training
        assert watched.losses()[f] == plain.losses()[f]
        curve = watched.dev_curves()[f]
        assert [p["step"] for p in curve] == [0, 2, 4, 6]
        # the point before step 0 is eq. 5 on the held-out triplets, by the untrained base
        assert curve[0]["dev"] == pytest.approx(_eval_loss(base, dev[f], docs, f), abs=1e-5)
    assert plain.dev_curves() == {"background": [], "method": []}
    # no measurement can improve by 10: each facet stops at its first point after step 0
    flat = train_facet_encoders(train, docs, base, dev_triplets=dev, dev_every=2, patience=1,
                                min_delta=10.0, out_dir=tmp_path, **kw)
    assert flat.steps_taken() == {"background": 2, "method": 2}
    record = json.loads((tmp_path / "method" / "flew_run.json").read_text())
    assert record["dev_examples"] == 2 and record["args"]["dev_every"] == 2
    with pytest.raises(ValueError, match="n_queries"):
        hold_out_queries(triplets, 4)
