"""The bi-encoder, its losses, the objectives, their combinations and the training loop (issue
23)."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tests.conftest import tiny_bert
from unifar.bi_encoder import BiEncoder, BiEncoderConfig, BiEncoderRetriever
from unifar.bi_encoder_losses import multiple_negatives_ranking_loss, triplet_margin_loss
from unifar.caching import TokenStateCache
from unifar.datasets.leakage import ForbiddenSet
from unifar.files import IntegrityError
from unifar.multi_objective.icrop import crop_spans, icrop_objective
from unifar.multi_objective.objectives import Example, Objective, drop_leaks, hold_out
from unifar.multi_objective.schedules import alternate, mix, sequential
from unifar.multi_objective.training import (BiEncoderTrainArgs, batch_loss, held_out_losses,
                                             train_bi_encoder)

WORDS = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
    "sigma tau "
    "upsilon phi chi psi omega"
).split()


@pytest.fixture
def make_bi(tokenizer):
    def make(pooling: str = "mean", max_tokens: int = 128) -> BiEncoder:
        cfg = BiEncoderConfig(base_model="tiny-bert", pooling=pooling, max_tokens=max_tokens)
        return BiEncoder(cfg, base_model=tiny_bert(tokenizer), tokenizer=tokenizer, device="cpu")

    return make


def _objective(name: str, n: int, negatives: bool = True) -> Objective:
    ex = [
        Example(
            f"question {name} {i} {WORDS[i % 24]}",
            f"document {name} {i} {WORDS[(i * 7) % 24]} text",
            f"other {name} {WORDS[(i * 5) % 24]}" if negatives else None,
        )
        for i in range(n)
    ]
    return Objective(name, "question->document", ex)


# ----------------------------------------------------------------------------- losses
def test_losses_equal_sentence_transformers():
    from sentence_transformers.sentence_transformer.losses import (
        MultipleNegativesRankingLoss,
        TripletLoss,
    )
    from sentence_transformers.sentence_transformer.losses.triplet import TripletDistanceMetric

    g = torch.Generator().manual_seed(0)
    q, d, n = (torch.randn(6, 8, generator=g) for _ in range(3))
    st_mnrl = MultipleNegativesRankingLoss(model=None)  # type: ignore[arg-type]
    assert torch.allclose(
        multiple_negatives_ranking_loss(q, d), st_mnrl.compute_loss_from_embeddings([q, d], None)
    )
    assert torch.allclose(
        multiple_negatives_ranking_loss(q, d, n),
        st_mnrl.compute_loss_from_embeddings([q, d, n], None),
    )
    st_tl = TripletLoss(
        model=None, distance_metric=TripletDistanceMetric.EUCLIDEAN, triplet_margin=1.0
    )  # type: ignore[arg-type]
    assert torch.allclose(
        triplet_margin_loss(q, d, n), st_tl.compute_loss_from_embeddings([q, d, n], None)
    )


def test_mnrl_takes_fewer_hard_negatives_than_queries_and_triplet_needs_one_each():
    q = torch.eye(3)
    manual = F.cross_entropy(
        20.0 * torch.cat([q, F.normalize(torch.ones(1, 3))]).matmul(q.T).T, torch.arange(3)
    )
    assert torch.allclose(multiple_negatives_ranking_loss(q, q, torch.ones(1, 3)), manual)
    with pytest.raises(ValueError, match="one negative per anchor"):
        triplet_margin_loss(q, q, torch.ones(1, 3))


# ----------------------------------------------------------------------------- ICrop
def test_icrop_spans_have_ten_tokens_and_negatives_come_from_another_document(tokenizer):
    docs = [
        {
            "id": str(i),
            "title": f"Paper {i}",
            "sentences": [" ".join(f"{w}{i}" for w in WORDS[: 10 + 3 * i])],
        }
        for i in range(8)
    ] + [{"id": "short", "title": "", "sentences": ["too short"]}]
    obj = icrop_objective(docs, seed=3, forbidden=ForbiddenSet())
    assert obj.stats["dropped_short_or_copies"] == 1 and len(obj) == 8
    for ex in obj.examples + obj.resample(np.random.default_rng(1)):
        for span in ex[:3]:
            assert (
                len(span.split()) >= 10
                and len(tokenizer(span, add_special_tokens=False)["input_ids"]) >= 10
            )
        doc_of = {t[-1] for t in (ex.anchor.split() + ex.positive.split()) if t[-1].isdigit()}
        assert len(doc_of) == 1 and doc_of.isdisjoint(
            t[-1] for t in ex.negative.split() if t[-1].isdigit()
        )
    s, e = crop_spans(np.full(1000, 50), np.random.default_rng(0))
    assert ((e - s) >= 10).all() and ((e - s) <= 25).all() and (e <= 50).all()


# ----------------------------------------------------------------------------- leakage guard
def test_leakage_guard_removes_planted_overlaps():
    test_doc = {
        "id": "99",
        "title": "A held out evaluation paper",
        "sentences": ["It is only for testing."],
    }
    fs = ForbiddenSet().add_document(
        "s2:99", test_doc["title"], " ".join(test_doc["sentences"]), "test"
    )
    fs.add_text("Which question is held out?", "test question", sentences=False)
    fine = {"id": "1", "title": "An ordinary training paper", "sentences": ["Nothing to see."]}
    renamed_copy = {**test_doc, "id": "12345"}  # caught by its title and text, not its id
    records = [
        ("Which question is held out?", fine),
        ("ok", fine, test_doc),
        ("ok", renamed_copy),
        ("ok", fine, fine),
    ]
    kept, dropped = drop_leaks(records, fs, id_prefix="s2:")
    assert dropped == 3 and kept == [("ok", fine, fine)]


def test_question_objectives_use_only_training_halves():
    from unifar.datasets.pubmedqa import load_pubmedqa
    from unifar.datasets.scirepeval import load_scirepeval_search, split_scirepeval_search
    from unifar.multi_objective.objectives import pubmedqa_objective, scirepeval_search_objective

    pub = pubmedqa_objective()
    test_q = set(load_pubmedqa(split="test").questions["text"])
    assert len(pub) == 500 and not test_q & {e.anchor for e in pub.examples}
    search = scirepeval_search_objective()
    test = split_scirepeval_search(load_scirepeval_search(), "test")
    assert len(search) > 0 and not set(test.questions["text"]) & {e.anchor for e in search.examples}


# ----------------------------------------------------------------------------- schedules
def test_mix_respects_weights_in_expectation():
    (phase,) = mix(
        [_objective("a", 30), _objective("b", 30)], steps=300, weights=[3, 1], batch_size=10, seed=0
    )
    counts = Counter(s for _ in range(300) for s in next(phase.batches)[1])
    assert abs(counts["a"] / 3000 - 0.75) < 0.03


def test_alternate_alternates_and_sequential_lowers_the_learning_rate():
    (phase,) = alternate(
        [_objective("a", 5), _objective("b", 5), _objective("c", 5)], steps=6, batch_size=4
    )
    assert [set(next(phase.batches)[1]) for _ in range(6)] == [{"a"}, {"b"}, {"c"}] * 2
    first, second = sequential(_objective("a", 40), _objective("b", 12), steps=10, batch_size=4)
    assert (first.lr, first.steps, second.lr, second.steps) == (2e-5, 10, 1e-5, 3)
    with pytest.raises(ValueError, match="lower learning rate"):
        sequential(_objective("a", 4), _objective("b", 4), steps=2, lr=1e-5, finetune_lr=2e-5)


# ----------------------------------------------------------------------------- the model
def test_encode_is_normalised_mean_pooling_and_the_cache_changes_nothing(make_bi, tokenizer):
    model = make_bi()
    texts = ["A short question?", "Title[SEP]A longer abstract with several words in it.", "x"]
    emb = model.encode(texts)
    assert emb.shape == (3, 32) and emb.dtype == torch.float32
    assert torch.allclose(emb.norm(dim=-1), torch.ones(3))
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model.base(**batch).last_hidden_state
    m = batch["attention_mask"].unsqueeze(-1)
    assert torch.allclose(emb, F.normalize((hidden * m).sum(1) / m.sum(1), dim=-1), atol=1e-5)
    assert torch.allclose(
        emb, model.encode(texts, state_cache=TokenStateCache(top_layers=1)), atol=1e-5
    )
    cls = make_bi(pooling="cls").encode(texts)
    assert torch.allclose(cls, F.normalize(hidden[:, 0], dim=-1), atol=1e-5)


def test_save_load_round_trip_and_a_damaged_file(make_bi, tmp_path):
    model = make_bi(pooling="cls", max_tokens=64)
    folder = model.save_pretrained(tmp_path / "bi")
    loaded = BiEncoder.from_pretrained(folder)
    assert loaded.config == model.config
    assert torch.equal(loaded.encode(["some text", "more"]), model.encode(["some text", "more"]))
    assert loaded.fingerprint() == model.fingerprint()
    w = folder / "model.safetensors"
    w.write_bytes(w.read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(IntegrityError, match="model.safetensors"):
        BiEncoder.from_pretrained(folder)


def test_retriever_scores_by_cosine_and_keys_by_weights(make_bi):
    model = make_bi()
    r = BiEncoderRetriever(model, name="bi")
    docs = [
        {"id": "a", "title": "Dense retrieval", "sentences": ["Vectors."]},
        {"id": "b", "title": "", "sentences": ["Gardening in spring."]},
    ]
    scores = r.score(["dense vectors", "spring"], r.index(docs))
    assert scores.shape == (2, 2) and np.all(np.abs(scores) <= 1 + 1e-6)
    other = make_bi()
    with torch.no_grad():
        other.base.encoder.layer[-1].output.dense.bias.add_(0.1)
    assert BiEncoderRetriever(other).index_key != r.index_key


# ----------------------------------------------------------------------------- training
@pytest.mark.parametrize("top_layers", [1, None])
def test_a_tiny_model_learns_and_saves(make_bi, tmp_path, top_layers):
    model = make_bi()
    before = {k: v.clone() for k, v in model.base.state_dict().items()}
    obj = _objective("a", 8)
    args = BiEncoderTrainArgs(top_layers=top_layers, show_progress=False)
    res = train_bi_encoder(
        model, mix([obj], steps=25, batch_size=8, lr=3e-3), args=args, out_dir=tmp_path
    )
    losses = res.losses()
    assert len(losses) == 25 and np.mean(losses[-5:]) < losses[0]
    changed = {k for k, v in model.base.state_dict().items() if not torch.equal(v, before[k])}
    if top_layers == 1:
        assert (
            changed
            and all(k.startswith("encoder.layer.1.") for k in changed)
            and res.cached_states > 0
        )
    else:
        assert any(k.startswith("embeddings.") for k in changed)
    assert torch.equal(BiEncoder.from_pretrained(res.final_dir).encode(["q"]), model.encode(["q"]))
    assert len(json.loads((tmp_path / "log.json").read_text())["log"]) == 25


def test_sequential_training_runs_a_then_b_and_the_triplet_path(make_bi):
    model = make_bi(pooling="cls")
    phases = sequential(
        _objective("a", 8), _objective("b", 8), steps=4, finetune_steps=2, batch_size=4
    )
    res = train_bi_encoder(
        model, phases, triplet_margin_loss, BiEncoderTrainArgs(show_progress=False)
    )
    assert [(r["phase"], r["sources"]) for r in res.log] == [("a", {"a": 4})] * 4 + [
        ("b (fine-tune)", {"b": 4})
    ] * 2
    assert [r["lr"] for r in res.log] == pytest.approx([2e-5, 1.5e-5, 1e-5, 5e-6, 1e-5, 5e-6])
    with pytest.raises(ValueError, match="one negative per anchor"):
        train_bi_encoder(
            model,
            mix([_objective("c", 4, negatives=False)], 1, batch_size=4),
            triplet_margin_loss,
            BiEncoderTrainArgs(show_progress=False),
        )


def test_icrop_texts_are_not_kept_in_the_shared_cache(make_bi):
    docs = [
        {"id": str(i), "title": "", "sentences": [" ".join(WORDS[i : i + 14])]} for i in range(6)
    ]
    obj = icrop_objective(docs, forbidden=ForbiddenSet())
    cache = TokenStateCache(top_layers=1)
    train_bi_encoder(
        make_bi(),
        mix([obj, _objective("q", 4)], 3, batch_size=4),
        state_cache=cache,
        args=BiEncoderTrainArgs(show_progress=False),
    )
    assert 0 < len(cache) <= 12  # only the recurring objective's 12 texts


# ----------------------------------------------------------------------------- dev curve
def test_held_out_examples_leave_training_and_a_flat_dev_curve_ends_the_phase(make_bi):
    obj = hold_out(_objective("a", 24), 8, seed=1)
    assert len(obj.examples) == 16 and not set(obj.examples) & set(obj.dev)
    model = make_bi()
    # one batch: the held-out loss is the batch loss of those examples, without gradient
    with torch.no_grad():
        by_hand = batch_loss(model, obj.dev, multiple_negatives_ranking_loss, None).item()
    assert held_out_losses(model, {"a": obj.dev}, multiple_negatives_ranking_loss, None, 8)["a"] == pytest.approx(by_hand)
    flat = BiEncoderTrainArgs(show_progress=False, dev_every=2, patience=1, min_delta=10.0)
    res = train_bi_encoder(model, mix([obj], 8, batch_size=8, lr=3e-3), args=flat, dev={"a": obj.dev})
    # no measurement can improve by 10: the first one after step 0 ends the phase
    assert len(res.log) == 2 and res.stopped == {"a": 2} and [p["step"] for p in res.dev_curve] == [0, 2]
    keep = BiEncoderTrainArgs(show_progress=False, dev_every=3, patience=50)
    res = train_bi_encoder(make_bi(), mix([obj], 7, batch_size=8, lr=3e-3), args=keep,
                           dev={"a": obj.dev, "b": _objective("b", 4).examples}, monitor=["a"])
    assert len(res.log) == 7 and not res.stopped
    assert [p["step"] for p in res.dev_curve] == [0, 3, 6, 7]  # and the phase's last step
    assert all(p["dev"] == p["dev/a"] and "dev/b" in p for p in res.dev_curve)
    # measuring the dev curve does not change the training trajectory
    plain = train_bi_encoder(make_bi(), mix([obj], 7, batch_size=8, lr=3e-3), args=BiEncoderTrainArgs(show_progress=False))
    assert plain.losses() == res.losses()
    with pytest.raises(ValueError, match="monitor"):
        train_bi_encoder(make_bi(), mix([obj], 2, batch_size=8), args=keep, dev={"a": obj.dev}, monitor=["c"])


def test_icrop_holds_out_whole_documents():
    docs = [{"id": str(i), "title": "", "sentences": [" ".join(f"w{i}x{j}" for j in range(14))]}
            for i in range(8)]
    obj = icrop_objective(docs, forbidden=ForbiddenSet(), n_dev=3)
    doc_of = lambda text: {w.split("x")[0] for w in text.split()}  # noqa: E731
    dev_docs = set().union(*(doc_of(e.anchor) | doc_of(e.positive) for e in obj.dev))
    train_docs = set().union(*(doc_of(e.anchor) | doc_of(e.positive) | doc_of(e.negative)
                               for e in obj.examples + obj.resample(np.random.default_rng(5))))
    assert len(dev_docs) == 3 and not dev_docs & train_docs and len(train_docs) == 5
    assert all(e.recurs for e in obj.dev) and obj.stats["dev_examples"] == 3
    with pytest.raises(ValueError, match="hold out"):
        icrop_objective(docs, forbidden=ForbiddenSet(), n_dev=7)
