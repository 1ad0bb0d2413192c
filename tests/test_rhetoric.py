"""SciToricsBERT-style rhetoric embeddings (unifar.rhetoric) and the offline facet labeller
(unifar.rhetoric.labeller), on a tiny BERT built in code."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from unifar.rhetoric.labeller import FacetLabeller
from unifar.rhetoric.labeller_data import csabstruct_training_documents, drop_leaking_documents
from unifar.construction.labelling import SentenceLabeller
from unifar.datasets.leakage import ForbiddenSet
from unifar.facets import FACETS
from unifar.rhetoric.encoder import SentenceEncoder
from unifar.rhetoric.finetune import finetune, finetune_steps
from unifar.rhetoric.losses import LOSS_NAMES, make_loss
from unifar.rhetoric.retrieval import retrieval_scores
from unifar.rhetoric.sampling import PKBatchSampler, pk_for

DATA = Path(__file__).resolve().parents[1] / "data"


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture
def tiny_encoder(tokenizer) -> SentenceEncoder:
    """A randomly initialised 2-layer BERT (hidden 32) with the MiniLM tokenizer."""
    from .conftest import tiny_bert

    return SentenceEncoder(tiny_bert(tokenizer, max_positions=64), tokenizer, max_length=32)


TOY = {
    "background": [
        "Prior work has studied {} for many years.",
        "{} is an important problem in many fields.",
        "Previous studies of {} remain limited.",
    ],
    "method": [
        "We propose a new model for {} using graphs.",
        "Our approach trains a network on {} data.",
        "We design an algorithm that solves {} efficiently.",
    ],
    "result": [
        "Experiments show large gains on {} benchmarks.",
        "Our results improve accuracy on {} by ten points.",
        "The evaluation shows that {} errors drop sharply.",
    ],
}
TOPICS = ["parsing", "retrieval", "translation", "vision", "speech", "robotics"]


def toy_sentences() -> tuple[list[str], list[str]]:
    sents, labels = [], []
    for facet, templates in TOY.items():
        for t in templates:
            for topic in TOPICS:
                sents.append(t.format(topic))
                labels.append(facet)
    return sents, labels


def toy_docs() -> list[dict]:
    """Documents of three sentences (one per facet), plus an unlabelled ('other') sentence."""
    docs = []
    for i, topic in enumerate(TOPICS):
        sents = [TOY[f][i % 3].format(topic) for f in FACETS] + ["Code is available online."]
        docs.append({"id": f"d{i}", "title": "", "sentences": sents, "labels": list(FACETS) + [None]})
    return docs


# ----------------------------------------------------------------------------- losses


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_each_loss_is_a_finite_scalar_with_a_gradient(name):
    torch.manual_seed(1)
    emb = torch.randn(12, 8, requires_grad=True)
    labels = torch.tensor([0, 1, 2] * 4)
    loss = make_loss(name, embedding_size=8, num_classes=3)
    value = loss(emb, labels)
    assert value.dim() == 0 and torch.isfinite(value) and value.item() > 0
    value.backward()
    assert torch.isfinite(emb.grad).all() and emb.grad.abs().sum() > 0
    if name in ("softmax", "arcface"):  # the classifier is a parameter of the loss
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in loss.parameters())


def test_table6_hyperparameters_are_the_defaults():
    tri, arc, ms, nt = (make_loss(n, 8, 3).loss_fn for n in ("triplet", "arcface", "multi-similarity", "nt-xent"))
    assert tri.margin == 0.05
    assert math.isclose(arc.margin, 0.5) and arc.scale == 16  # PML stores radians after init_margin
    assert (ms.alpha, ms.beta, ms.base) == (2.0, 40.0, 0.75)
    assert nt.temperature == 0.1
    assert make_loss("ms", 8, 3, beta=50).loss_fn.beta == 50
    with pytest.raises(ValueError):
        make_loss("ms", 8, 3, temperature=0.1)
    with pytest.raises(ValueError):
        make_loss("hinge", 8, 3)


def _cos(x: torch.Tensor) -> torch.Tensor:
    x = F.normalize(x, dim=-1)
    return x @ x.T


def _pairs(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(len(labels), dtype=torch.bool)
    return same & ~eye, ~same


@pytest.fixture
def batch():
    g = torch.Generator().manual_seed(3)
    return torch.randn(12, 6, generator=g, dtype=torch.float64), torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2, 0, 1, 2])


def test_softmax_loss_is_eq1(batch):
    x, y = batch
    loss = make_loss("softmax", 6, 3)
    W, b = loss.loss_fn.classifier.weight.double(), loss.loss_fn.classifier.bias.double()  # [n, d], [n]
    logits = x @ W.T + b
    expected = -(logits.gather(1, y[:, None]).squeeze(1) - torch.logsumexp(logits, 1)).mean()
    assert torch.allclose(loss(x.float(), y).double(), expected, atol=1e-5)


def test_triplet_loss_is_eq2_over_all_triplets(batch):
    from pytorch_metric_learning.miners import TripletMarginMiner

    x, y = batch
    x = x.float()
    xn = F.normalize(x, dim=-1)
    d = torch.cdist(xn, xn)
    pos, neg = _pairs(y)
    viol = d[:, :, None] - d[:, None, :] + 0.05  # [a, p, n]
    valid = pos[:, :, None] & neg[:, None, :]
    terms = viol[valid].clamp(min=0)
    expected = terms.sum() / (terms > 0).sum()  # 1/K, K = triplets with a positive loss
    assert torch.allclose(make_loss("triplet", 6, 3)(x, y), expected, atol=1e-5)
    mined = make_loss("triplet", 6, 3, miner=TripletMarginMiner(margin=0.05, type_of_triplets="all"))
    assert torch.allclose(mined(x, y), expected, atol=1e-5)


def test_ms_loss_is_eq4(batch):
    x, y = batch
    S = _cos(x)
    pos, neg = _pairs(y)
    a, b, lam = 2.0, 40.0, 0.75
    pos_term = torch.log1p((torch.exp(-a * (S - lam)) * pos).sum(1)) / a
    neg_term = torch.log1p((torch.exp(b * (S - lam)) * neg).sum(1)) / b
    expected = (pos_term + neg_term).mean()
    assert torch.allclose(make_loss("ms", 6, 3)(x.float(), y).double(), expected, atol=1e-5)


def test_ntxent_loss_is_eq5(batch):
    x, y = batch
    S = _cos(x) / 0.1
    pos, neg = _pairs(y)
    neg_sum = (torch.exp(S) * neg).sum(1, keepdim=True)  # [N, 1]
    terms = -torch.log(torch.exp(S) / (torch.exp(S) + neg_sum))
    expected = terms[pos].mean()  # 1/|P| over ordered positive pairs
    assert torch.allclose(make_loss("ntxent", 6, 3)(x.float(), y).double(), expected, atol=1e-4)


def test_arcface_loss_is_eq3():
    torch.manual_seed(0)
    loss = make_loss("arcface", 6, 3)
    W = loss.loss_fn.W.detach()  # [d, n]
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    x = W.T[y] + 0.3 * torch.randn(6, 6)  # near their class weights: target angles < pi - m
    cos = F.normalize(x, dim=-1) @ F.normalize(W, dim=0)
    theta = torch.acos(cos.clamp(-1, 1))
    theta = theta + 0.5 * F.one_hot(y, 3)
    logits = 16 * torch.cos(theta)
    expected = F.cross_entropy(logits, y)
    assert torch.allclose(loss(x, y), expected, atol=1e-4)


# ----------------------------------------------------------------------------- PK batches


def test_pk_for_adapts_to_few_classes():
    assert pk_for("softmax", 77) == (64, 1) and pk_for("triplet", 77) == (8, 8)
    assert pk_for("triplet", 5) == (5, 12) and pk_for("softmax", 5) == (5, 12)
    assert pk_for("ms", 3) == (3, 21)


def test_pk_batches_hold_p_classes_times_k_items():
    labels = [0] * 30 + [1] * 12 + [2] * 5 + [3] * 20 + [4] * 9
    s = PKBatchSampler(labels, P=3, K=8, seed=0)
    batches = list(s)
    assert len(batches) == len(s) == len(labels) // 24
    seen = set()
    for b in batches:
        assert len(b) == 24
        counts = Counter(labels[i] for i in b)
        assert len(counts) == 3 and set(counts.values()) == {8}
        for c in counts:
            items = [i for i in b if labels[i] == c]
            if labels.count(c) >= 8:
                assert len(set(items)) == 8  # without replacement when the class is big enough
        seen |= {labels[i] for i in b}
    assert [list(PKBatchSampler(labels, 3, 8, seed=0))] == [batches]  # deterministic
    assert list(PKBatchSampler(labels, 3, 8, seed=1)) != batches
    # class 2 has 5 < K items: drawn with replacement, still K of them
    s2 = PKBatchSampler(labels, P=5, K=8, num_batches=3, seed=0)
    for b in s2:
        assert Counter(labels[i] for i in b) == {c: 8 for c in range(5)}
    with pytest.raises(ValueError):
        PKBatchSampler(labels, P=6, K=2)


# ----------------------------------------------------------------------------- retrieval metrics


def direct_scores(emb: np.ndarray, labels: list) -> dict[str, float]:
    """Leave-one-out P@1 and MAP@R written out (Musgrave et al., 2020)."""
    x = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    sim = x @ x.T
    labels = np.asarray(labels)
    p1, ap = [], []
    for q in range(len(x)):
        others = np.array([i for i in range(len(x)) if i != q])
        rel = labels[others] == labels[q]
        R = int(rel.sum())
        if R == 0:
            continue
        ranked = rel[np.argsort(-sim[q, others], kind="stable")]
        p1.append(float(ranked[0]))
        hits = ranked[:R]
        prec = np.cumsum(hits) / np.arange(1, R + 1)
        ap.append(float((prec * hits).sum() / R))
    return {"p@1": float(np.mean(p1)), "map@r": float(np.mean(ap))}


def test_retrieval_perfect_clustering_scores_one():
    rng = np.random.default_rng(0)
    centres = np.eye(4)
    labels = [i % 4 for i in range(40)]
    emb = centres[labels] + 0.01 * rng.standard_normal((40, 4))
    assert retrieval_scores(emb, labels) == pytest.approx({"p@1": 1.0, "map@r": 1.0})


def test_retrieval_hand_example():
    # points on the unit circle (degrees); labels a a b a b b
    # query 0: 10(a) 30(b) | R=2 -> AP 1/2; 10: 0(a) 30(b) -> 1/2; 30: 35(a) 10(a) -> 0;
    # 35: 30(b) 10(a) -> (0 + 1/2)/2; 62: 35(a) 90(b) -> 1/4; 90: 62(b) 35(a) -> 1/2
    deg = np.radians([0, 10, 30, 35, 62, 90])
    emb = np.stack([np.cos(deg), np.sin(deg)], axis=1)
    labels = ["a", "a", "b", "a", "b", "b"]
    expected = {"p@1": 0.5, "map@r": 1 / 3}
    assert direct_scores(emb, labels) == pytest.approx(expected)
    assert retrieval_scores(emb, labels) == pytest.approx(expected)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_retrieval_matches_direct_computation(seed):
    rng = np.random.default_rng(seed)
    labels = list(rng.integers(0, 4, size=60)) + [9]  # label 9 occurs once: skipped as a query
    emb = rng.standard_normal((61, 5)) + 0.8 * np.eye(5)[np.array(labels) % 5]
    got = retrieval_scores(torch.tensor(emb, dtype=torch.float32), labels, chunk_size=16)
    assert got == pytest.approx(direct_scores(emb, labels), abs=1e-6)
    assert 0 < got["map@r"] < got["p@1"] < 1


# ----------------------------------------------------------------------------- encoder, fine-tuning


def test_encoder_embeddings_are_normalised_and_in_input_order(tiny_encoder):
    sents, _ = toy_sentences()
    sents = sents[:10]
    emb = tiny_encoder.encode(sents, batch_size=3)
    assert emb.shape == (10, 32) and emb.dtype == torch.float32
    assert torch.allclose(emb.norm(dim=1), torch.ones(10), atol=1e-5)
    one_by_one = torch.cat([tiny_encoder.encode([s]) for s in sents])
    assert torch.allclose(emb, one_by_one, atol=1e-5)
    raw = tiny_encoder.encode(sents[:2], normalize=False)
    assert not torch.allclose(raw.norm(dim=1), torch.ones(2))


def test_finetuning_reduces_the_loss_and_is_deterministic(tiny_encoder):
    sents, labels = toy_sentences()
    state = {k: v.clone() for k, v in tiny_encoder.state_dict().items()}
    before = retrieval_scores(tiny_encoder.encode(sents), labels)
    hist = finetune(tiny_encoder, sents, labels, loss="ntxent", epochs=3, lr=1e-3, P=3, K=6, seed=0, device="cpu")
    assert len(hist) == 3 * (len(sents) // 18) and hist.settings["loss"] == "ntxent"
    # chapter 2's table of profile sizes counts steps with finetune_steps: it must agree
    assert len(hist) == finetune_steps(len(sents), len(set(labels)), "ntxent", 3, P=3, K=6)
    assert all(math.isfinite(v) for v in hist)
    assert np.mean(hist[-3:]) < 0.5 * np.mean(hist[:3])
    after = retrieval_scores(tiny_encoder.encode(sents), labels)
    assert after["map@r"] > before["map@r"] + 0.2
    assert tiny_encoder.finetuned
    # same seed, same start -> the same losses
    tiny_encoder.load_state_dict(state)
    again = finetune(tiny_encoder, sents, labels, loss="ntxent", epochs=3, lr=1e-3, P=3, K=6, seed=0, device="cpu")
    assert list(again) == list(hist)


def test_finetune_max_steps_and_validation_selection(tiny_encoder):
    sents, labels = toy_sentences()
    hist = finetune(
        tiny_encoder, sents, labels, loss="softmax", epochs=6, lr=1e-3, seed=0, device="cpu",
        max_steps=4, validation=(sents, labels),
    )
    assert len(hist) == 4 == finetune_steps(len(sents), 3, "softmax", epochs=6, max_steps=4)
    assert hist.settings["P"] == 3 and hist.settings["K"] == 21  # pk_for("softmax", 3)
    assert [v["epoch"] for v in hist.validation] == list(range(1, len(hist.validation) + 1))
    best = max(hist.validation, key=lambda v: v["map@r"])
    assert hist.best_epoch == best["epoch"]


# ----------------------------------------------------------------------------- the labeller


@pytest.mark.parametrize("head", ["linear", "knn"])
def test_labeller_round_trip_gives_identical_predictions(tiny_encoder, tmp_path, head):
    sents, labels = toy_sentences()
    lab = FacetLabeller(tiny_encoder, head=head, C=10.0, k=5).fit_sentences(sents, labels, note="toy")
    assert isinstance(lab, SentenceLabeller)
    queries = sents[::3] + ["An unrelated sentence about weather.", "x"]
    pred = lab.predict_sentences(queries)
    assert set(pred) <= set(FACETS)
    lab.save(tmp_path / "lab")
    assert {p.name for p in (tmp_path / "lab").iterdir()} == {"labeller.json", "head.safetensors", "encoder"}
    assert not list((tmp_path / "lab").rglob("*.bin")) and not list((tmp_path / "lab").rglob("*.pkl"))
    back = FacetLabeller.load(tmp_path / "lab")
    assert back.head == head and back.metadata["note"] == "toy"
    assert back.predict_sentences(queries) == pred
    assert torch.equal(back.predict_proba_embeddings(back.embed(queries)), lab.predict_proba_embeddings(lab.embed(queries)))
    assert back.tol == lab.tol == 1e-6


def test_linear_head_converges_so_tiny_embedding_noise_does_not_move_it(tiny_encoder):
    # Weakly regularised (C=100) on overlapping classes: scikit-learn's default tol=1e-4 stops
    # where 1e-6 noise in the inputs moves the weights by percents (CSAbstruct dev F1 moved
    # across CPUs); the labeller's tol=1e-6 lands on the same optimum.
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(600, 128)) * np.geomspace(1, 1e-2, 128)  # anisotropic, like sentence embeddings
    X = Z + 0.5  # and sharing one direction
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = [FACETS[i] for i in (Z[:, :3] + 0.5 * rng.normal(size=(600, 3))).argmax(1)]

    def weights(tol: float, noise: float) -> np.ndarray:
        Xn = torch.from_numpy(X + noise * np.random.default_rng(1).normal(size=X.shape))
        lab = FacetLabeller(tiny_encoder, head="linear", C=100.0, tol=tol).fit_embeddings(Xn, y)
        return lab.params["W"].numpy()

    def drift(tol: float) -> float:
        w0, w1 = weights(tol, 0.0), weights(tol, 1e-6)
        return float(np.abs(w0 - w1).max() / np.abs(w0).max())

    assert FacetLabeller(tiny_encoder).tol == 1e-6
    assert drift(1e-6) < 2e-3
    assert drift(1e-4) > 10 * drift(1e-6)  # the failure the default guards against


def test_near_ties_are_decided_in_float64_whatever_the_float32_noise(tiny_encoder):
    # A head whose decision boundary passes exactly through one sentence's float64 embedding:
    # in float32 that sentence is a coin toss that 1e-7 noise (another CPU) would flip; the
    # labeller re-decides it in float64, so noisy float32 embeddings give the same labels.
    sents, labels = toy_sentences()
    lab = FacetLabeller(tiny_encoder, head="linear", C=10.0).fit_sentences(sents, labels)
    probe = sents[4]
    x64 = lab.embed_float64([probe])[0]
    W, b = lab.params["W"].clone(), lab.params["b"].clone()
    scores = x64 @ W.T + b
    top, second = scores.topk(2).indices.tolist()
    b[second] += scores[top] - scores[second] + 1e-9  # the second class now wins by 1e-9 in float64
    lab.params["b"] = b
    expected = FACETS[int((x64 @ W.T + b).argmax())]
    assert expected == FACETS[second]
    plain = lab.embed
    outcomes = set()
    for seed in range(6):
        noise = torch.randn(len(sents), 32, generator=torch.Generator().manual_seed(seed)) * 1e-6
        lab.embed = lambda s, n=noise: torch.nn.functional.normalize(plain(s) + n[: len(s)], dim=-1)
        raw = lab.predict_embeddings(lab.embed([probe]))[0]
        outcomes.add(raw)
        assert lab.predict_sentences([probe]) == [expected] and lab.last_near_ties == 1
    assert len(outcomes) == 2  # without the float64 decision the noise flips the label
    lab.embed = plain
    assert lab.near_ties(lab.embed(sents)).tolist() == [4]  # every other sentence is far from a tie


def test_label_documents_and_evaluate(tiny_encoder):
    docs = toy_docs()
    lab = FacetLabeller(tiny_encoder, head="knn", k=1).fit(docs)
    assert lab.metadata["sentences"] == 3 * len(docs) and lab.metadata["documents"] == len(docs)
    out = lab.label_documents(docs + [{"id": "empty", "sentences": []}])
    assert [len(o) for o in out] == [len(d["sentences"]) for d in docs] + [0]
    res = lab.evaluate(docs)
    assert res["n"] == 3 * len(docs)  # the 'other' (None) sentences are not scored
    assert res["accuracy"] == 1.0 and res["macro_f1"] == 1.0  # 1-NN on its own training set
    assert set(res["per_class"]) == set(FACETS) and res["per_class"]["method"]["support"] == len(docs)
    # accuracy agrees with the predictions; min_confidence above 1 abstains everywhere
    lin = FacetLabeller(tiny_encoder, head="linear", C=0.01).fit(docs)
    pred = [p for doc in lin.label_documents(docs) for p in doc[:3]]
    gold = [f for _ in docs for f in FACETS]
    assert lin.evaluate(docs)["accuracy"] == pytest.approx(np.mean([p == g for p, g in zip(pred, gold)]))
    lin.min_confidence = 1.01
    assert all(p is None for doc in lin.label_documents(docs) for p in doc)
    assert lin.evaluate(docs)["accuracy"] == 0.0


def test_leakage_exclusion_removes_exactly_the_overlapping_abstracts():
    s1 = "We study facet-aware retrieval of scientific papers in depth here."
    s2 = "Our encoder aggregates sentence states with learned facet anchors."
    s3 = "Results on CSFCube improve mean average precision by two points."
    fs = ForbiddenSet().add_document("p1", "A forbidden paper title", f"{s1} {s2} {s3}", "csfcube paper p1")
    other = "An unrelated abstract sentence that is long enough to count here."
    docs = [
        {"id": "a", "sentences": [other]},
        {"id": "b", "sentences": [s1.upper(), s2, s3.replace(".", " !")]},  # same text, other case/punct.
        {"id": "c", "sentences": [s2, other, s3]},  # two shared long sentences
        {"id": "d", "sentences": [s1, other]},  # one shared sentence only: kept
    ]
    kept, report = drop_leaking_documents(docs, fs)
    assert [d["id"] for d in kept] == ["a", "d"]
    assert sorted(h.training_id for h in report.hits) == ["b", "c"]


@pytest.mark.skipif(not (DATA / "csabstruct" / "train.jsonl").exists(), reason="CSAbstruct not in data/")
def test_csabstruct_csfcube_overlap_is_32_abstracts():
    from unifar.datasets.leakage import forbidden_from_repo_data

    fs = forbidden_from_repo_data(include=("csfcube",))
    kept, report = csabstruct_training_documents(("train", "dev", "test"), forbidden=fs)
    by_split = Counter(h.training_id.split("-")[0] for h in report.hits)
    assert by_split == {"train": 21, "dev": 8, "test": 3}
    assert len(kept) == 1668 + 295 + 226 - 32
    assert not {d["id"] for d in kept} & {h.training_id for h in report.hits}


# ----------------------------------------------------------------------------- chapter 2 helpers


def test_length_chunks_give_the_same_embeddings_and_gradients(tiny_encoder):
    from unifar.rhetoric.finetune import embed_in_length_chunks

    sents, _ = toy_sentences()
    sents = sents[:13] + ["x", "A much longer sentence " * 5]
    tiny_encoder.eval()  # no dropout: the pieces must give the one-pass result exactly
    one = embed_in_length_chunks(tiny_encoder, sents, 1)
    assert torch.allclose(one, tiny_encoder(sents, normalize=False))
    for chunks in (2, 3, 7, 100):
        got = embed_in_length_chunks(tiny_encoder, sents, chunks)
        assert got.shape == one.shape
        assert torch.allclose(got, one, atol=1e-5), chunks
    # gradients flow back to the encoder through the re-ordering
    tiny_encoder.zero_grad()
    embed_in_length_chunks(tiny_encoder, sents, 3)[-1].sum().backward()
    grads = [p.grad for p in tiny_encoder.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def test_finetune_with_length_chunks_records_the_setting(tiny_encoder):
    sents, labels = toy_sentences()
    hist = finetune(tiny_encoder, sents, labels, loss="ms", epochs=2, lr=1e-3, seed=0, device="cpu", length_chunks=3)
    assert len(hist) == 2 and hist.settings["length_chunks"] == 3
    assert all(math.isfinite(v) for v in hist)


def test_stratified_sample_keeps_proportions_and_is_seeded():
    from unifar.rhetoric.sampling import stratified_sample

    labels = ["a"] * 60 + ["b"] * 30 + ["c"] * 10
    idx = stratified_sample(labels, 20, seed=0)
    assert len(idx) == 20 and idx == sorted(set(idx))
    assert Counter(labels[i] for i in idx) == {"a": 12, "b": 6, "c": 2}
    assert stratified_sample(labels, 20, seed=0) == idx
    assert stratified_sample(labels, 20, seed=1) != idx
    assert stratified_sample(labels, None) == list(range(100)) == stratified_sample(labels, 500)
    # a label with a single item is kept (scikit-learn cannot stratify it)
    odd = labels + ["z"]
    sub = stratified_sample(odd, 11, seed=0)
    assert len(sub) == 11 and 100 in sub
    with pytest.raises(ValueError):
        stratified_sample(labels, 2)  # fewer than the three labels
    with pytest.raises(ValueError):
        stratified_sample(labels, 0)


def test_facet_scores_report_cohens_kappa():
    from sklearn.metrics import cohen_kappa_score

    from unifar.rhetoric.labeller_scores import facet_scores

    gold = ["background", "method", "result", "method", "background", "result"]
    assert facet_scores(gold, gold)["cohen_kappa"] == pytest.approx(1.0)
    pred = ["background", "result", "result", "method", None, "background"]
    # observed agreement 3/6; chance agreement from the marginals (None is its own category)
    p_o = 0.5
    g = Counter(gold)
    p = Counter(x if x is not None else "none" for x in pred)
    p_e = sum(g[c] * p[c] for c in set(g) | set(p)) / 36
    res = facet_scores(gold, pred)
    assert res["cohen_kappa"] == pytest.approx((p_o - p_e) / (1 - p_e))
    assert res["cohen_kappa"] == pytest.approx(cohen_kappa_score(gold, [x or "none" for x in pred]))


def test_labelled_sentences_reads_a_label_column_and_checks_its_labels():
    from unifar.rhetoric.labeller_data import labelled_sentences

    doc = {"id": "p1", "sentences": ["a", "b", "c"], "labels": ["method", None, "result"],
           "raw_labels": ["objective", "other", "result"]}
    assert labelled_sentences([doc]) == (["a", "c"], ["method", "result"])
    assert labelled_sentences([doc], "raw_labels", allowed=None) == (["a", "b", "c"], ["objective", "other", "result"])
    with pytest.raises(ValueError, match=r"document 0: unknown label 'objective' in 'raw_labels'"):
        labelled_sentences([doc], "raw_labels")
    with pytest.raises(ValueError, match=r"document 0 \('p1'\) needs 'sentences' and one 'labels' entry each"):
        labelled_sentences([{**doc, "labels": ["method"]}])
