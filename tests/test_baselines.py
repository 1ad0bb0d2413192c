"""Baselines: BM25 on a toy pool, facet-restricted query text, mean-pooling encoder mechanics."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from unifar.datasets.csfcube import CSFCube, load_csfcube
from unifar.evaluation.csfcube import rank_pools
from unifar.evaluation.mean_pooling import MeanPoolingEncoder
from unifar.evaluation.hybrid import HybridRetriever
from unifar.evaluation.retrievers import BM25Retriever, BM25Scorer, Retriever
from unifar.evaluation.texts import document_text, facet_query_text


def _paper(title: str, sentences: list[str], labels: list[str] | None = None) -> dict:
    return {"title": title, "sentences": sentences, "labels": labels or ["method_label"] * len(sentences), "is_query": False}


@pytest.fixture()
def toy() -> CSFCube:
    papers = {
        "q": _paper("Graph neural networks for molecule property prediction",
                    ["We predict molecular properties.", "We use message passing on atom graphs."]),
        "dup": _paper("Graph neural networks for molecule property prediction",
                      ["We predict molecular properties.", "We use message passing on atom graphs."]),
        "near": _paper("Message passing for chemistry", ["Neural networks on molecular graphs."]),
        "far1": _paper("Statistical machine translation", ["Phrase tables and language models."]),
        "far2": _paper("Speech recognition with HMMs", ["Acoustic models for spoken words."]),
    }
    cands = ["far1", "near", "far2", "dup"]
    anns = {f: {"q": (cands, [0, 1, 0, 3])} for f in ("background", "method", "result")}
    return CSFCube(papers=papers, anns=anns, splits={})


def test_bm25_ranks_exact_duplicate_first(toy: CSFCube) -> None:
    ranked = rank_pools(BM25Retriever(stem=False), toy)
    for facet in ("background", "method", "result"):
        order = [c for c, _ in ranked[facet]["q"]]
        assert order[0] == "dup" and order[1] == "near"
        scores = [s for _, s in ranked[facet]["q"]]
        assert scores == sorted(scores, reverse=True)


def test_bm25_stems_with_the_c_stemmer_and_its_stems_are_the_python_snowball_ones() -> None:
    """snowballstemmer hands out PyStemmer's C stemmer when it is installed (a dependency, for
    speed: about 20x). Both implement Snowball's English stemmer; if a release ever disagreed
    with the pure-Python one, every BM25 score in the book would move silently."""
    from snowballstemmer.english_stemmer import EnglishStemmer

    stemmer = BM25Scorer({"d": "a facet-aware retrieval model"}).stemmer
    assert type(stemmer).__module__ == "Stemmer"  # the C extension, not the Python fallback
    words = ["retrieval", "retrieving", "facets", "faceted", "generously", "hypotheses", "analyses",
             "biopsies", "studies", "dying", "skies", "news", "succeeded", "proceeding",
             "communication", "organizational", "attentional", "embeddings", "classifiers",
             "arsenal", "commune", "gener", "exceedingly", "cardiomyopathy", "ly", "a"]
    assert stemmer.stemWords(words) == EnglishStemmer().stemWords(words)


def test_bm25_scorer_unknown_document_and_unseen_words() -> None:
    scorer = BM25Scorer({"a": "alpha beta", "b": "gamma delta"}, stem=False)
    assert scorer.scores("zeta", ["a", "b"]).tolist() == [0.0, 0.0]
    with pytest.raises(KeyError, match="not in the BM25 corpus"):
        scorer.scores("alpha", ["c"])


def test_facet_query_text_keeps_only_that_facet() -> None:
    data = load_csfcube()
    qpid = "1587"
    paper = data.papers[qpid]
    for facet in ("background", "method", "result"):
        text = facet_query_text(paper, facet, " [SEP] ")
        kept = data.facet_sentences(qpid, facet)
        assert kept and text == paper["title"] + " [SEP] " + " ".join(kept)
        others = [s for s in paper["sentences"] if s not in kept]
        assert all(s not in text for s in others)
    assert document_text(paper, "|").count("|") == 1
    with pytest.raises(ValueError, match="unknown facet"):
        facet_query_text(paper, "objective", "|")


def test_background_facet_includes_objective_sentences() -> None:
    p = _paper("T", ["obj.", "bg.", "m.", "r.", "o."],
               ["objective_label", "background_label", "method_label", "result_label", "other_label"])
    assert facet_query_text(p, "background", "|") == "T|obj. bg."
    assert facet_query_text(p, "method", "|") == "T|m."
    assert facet_query_text(p, "result", "|") == "T|r."
    assert facet_query_text(p, "background", "|", title=False) == "obj. bg."


@pytest.fixture(scope="module")
def tiny_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random BERT with the shipped MiniLM tokenizer (skipped when it is not installed)."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from unifar.base_models import resolve_base_model

    try:
        tok = AutoTokenizer.from_pretrained(resolve_base_model("minilm", verify=False))
    except (ModuleNotFoundError, FileNotFoundError, RuntimeError) as err:
        pytest.skip(f"shipped MiniLM tokenizer unavailable: {err}")
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128)
    d = tmp_path_factory.mktemp("tiny_bert")
    BertModel(cfg).save_pretrained(d)
    tok.save_pretrained(d)
    return d


def test_mean_pooling_encoder_order_norm_and_padding(tiny_encoder_dir: Path) -> None:
    enc = MeanPoolingEncoder(str(tiny_encoder_dir), max_length=64, batch_size=2, device="cpu", show_progress=False)
    texts = ["short", "a somewhat longer text about graphs", "mid length text", "x " * 200]
    batched = enc.encode(texts)
    single = torch.cat([enc.encode([t]) for t in texts])
    assert batched.shape == (4, 32)
    torch.testing.assert_close(batched.norm(dim=-1), torch.ones(4))
    torch.testing.assert_close(batched, single, atol=1e-5, rtol=1e-5)  # order restored, padding masked
    assert enc.encode([]).shape == (0, 32)
    assert enc.sep_token == "[SEP]"


def test_mean_pooling_cache_reuses_rows_and_tracks_weights(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    enc = MeanPoolingEncoder(str(tiny_encoder_dir), max_length=64, batch_size=2, device="cpu", show_progress=False, cache_dir=cache)
    texts = ["graph neural networks", "we measure retrieval", "results improve"]
    first = enc.encode(texts)
    files = sorted(cache.glob("mean-*.safetensors"))
    assert len(files) == 1 and not list(cache.glob(".tmp-*"))
    # a second encoder (another chapter) loads the file instead of running the model ...
    again = MeanPoolingEncoder(str(tiny_encoder_dir), max_length=64, batch_size=2, device="cpu", show_progress=False, cache_dir=cache)
    again._encode = lambda _texts: pytest.fail("the cached embeddings were not used")  # type: ignore[method-assign]
    assert torch.equal(again.encode(texts), first)
    # ... also for a subset in another order, with repeats: rows are cached one by one
    assert torch.equal(again.encode([texts[2], texts[0], texts[2]]), first[[2, 0, 2]])
    # a call with new texts encodes only those, and the file then holds every row
    seen = []
    again._encode = lambda new: (seen.extend(new), enc._encode(new))[1]  # type: ignore[method-assign]
    mixed = again.encode([texts[1], "a new text", texts[0]])
    assert seen == ["a new text"] and torch.equal(mixed[[0, 2]], first[[1, 0]])
    assert len(list(cache.glob("mean-*.safetensors"))) == 1
    # another max_length or changed weights use another file
    other_len = MeanPoolingEncoder(str(tiny_encoder_dir), max_length=32, device="cpu", show_progress=False, cache_dir=cache)
    assert other_len.cache_key() != enc.cache_key()
    key = enc.cache_key()
    with torch.no_grad():
        next(enc.model.parameters()).add_(0.01)
    assert enc.cache_key() != key
    assert not torch.equal(enc.encode(texts), first)
    assert len(list(cache.glob("mean-*.safetensors"))) == 2


def test_a_torn_mean_pooling_cache_warns_and_is_rebuilt(tiny_encoder_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    enc = MeanPoolingEncoder(str(tiny_encoder_dir), max_length=64, device="cpu", show_progress=False, cache_dir=cache)
    first = enc.encode(["one text", "another text"])
    (path,) = cache.glob("mean-*.safetensors")
    path.write_bytes(path.read_bytes()[:100])  # an interrupted copy
    with pytest.warns(UserWarning, match="unreadable embedding cache"):
        again = enc.encode(["one text", "another text"])
    assert torch.equal(again, first)


class Fixed(Retriever):
    """A CSFCube-only system whose score function is given."""

    index_key, label = "fixed", "fixed"

    def __init__(self, fn) -> None:
        self.fn = fn

    def index(self, documents):  # pragma: no cover
        raise NotImplementedError

    def score(self, questions, index):  # pragma: no cover
        raise NotImplementedError

    def csfcube_score_fn(self, data, cache=None):
        return self.fn


def test_hybrid_retriever_fuses_z_scores_per_pool() -> None:
    import numpy as np

    dense = Fixed(lambda f, q, c: np.array([0.9, 0.8, 0.7]))  # prefers the first candidate
    lexical = Fixed(lambda f, q, c: np.array([0.0, 0.0, 30.0]))  # prefers the last, on another scale
    cands = ["a", "b", "c"]

    def fused(d, lex, w):
        return HybridRetriever(d, lex, w).csfcube_score_fn(None)("method", "q", cands)

    assert np.argmax(fused(dense, lexical, 0.0)) == 0
    assert np.argmax(fused(dense, lexical, 2.0)) == 2
    # scale-free: multiplying the lexical scores by 1000 changes nothing
    big = Fixed(lambda f, q, c: 1000 * lexical.fn(f, q, c))
    assert np.allclose(fused(dense, lexical, 0.5), fused(dense, big, 0.5))
    assert not HybridRetriever(dense, lexical, 0.5).qdoc
