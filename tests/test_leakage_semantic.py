"""The semantic leakage check (:func:`unifar.construction.leakage_semantic.semantic_overlap`): nearest evaluation
document per training document, on tiny hand-built and random cases checked by brute force."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from unifar.construction.leakage_semantic import SemanticOverlap, semantic_overlap


def test_semantic_overlap_on_a_tiny_hand_built_case():
    # train "para" is a paraphrase-like near copy of eval "e1"; "topic" is close to e2;
    # "far" points elsewhere; vectors are not unit length (normalised inside)
    train = np.array([[3.0, 0.1, 0.0], [0.0, 1.0, 0.5], [0.0, 0.0, -2.0]])
    ev = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    o = semantic_overlap(train, ["para", "topic", "far"], ev, ["e1", "e2"], thresholds=(0.95, 0.85))
    assert isinstance(o, SemanticOverlap)
    assert o.nearest_ids == ["e1", "e2", "e1"]  # "far": cosine 0 with both, ties go to e1
    expected = [3.0 / np.hypot(3.0, 0.1), 1.0 / np.hypot(1.0, 0.5), 0.0]
    np.testing.assert_allclose(o.cosines, expected, atol=1e-12)
    assert o.counts == {0.95: 1, 0.85: 2}
    assert [(a, b) for a, b, _ in o.top(2)] == [("para", "e1"), ("topic", "e2")]
    s = o.summary(k=1)
    assert s["training_documents"] == 3 and s["above"] == {"0.95": 1, "0.85": 2}
    assert s["top_pairs"] == [{"train": "para", "eval": "e1", "cosine": round(expected[0], 4)}]
    assert s["max"] == pytest.approx(expected[0])


def test_semantic_overlap_matches_brute_force_in_any_chunking():
    rng = np.random.default_rng(0)
    train, ev = rng.normal(size=(37, 8)), rng.normal(size=(11, 8))
    ev[4] = 0.0  # a zero row is never anyone's nearest (cosine 0) unless all are negative
    tn = train / np.linalg.norm(train, axis=1, keepdims=True)
    en = np.divide(ev, np.linalg.norm(ev, axis=1, keepdims=True) + (ev == 0).all(1, keepdims=True))
    full = tn @ en.T
    want_idx, want_cos = full.argmax(1), full.max(1)
    tids, eids = [f"t{i}" for i in range(37)], [f"e{j}" for j in range(11)]
    for chunk in (1, 5, 37, 4096):
        o = semantic_overlap(torch.tensor(train, dtype=torch.float32), tids, ev, eids, 0.5,
                             chunk_size=chunk)
        assert o.nearest_ids == [eids[j] for j in want_idx]
        np.testing.assert_allclose(o.cosines, want_cos, atol=1e-6)
        assert o.counts == {0.5: int((want_cos >= 0.5).sum())}
    # an exact copy is found with cosine 1
    o = semantic_overlap(np.vstack([train, ev[7]]), tids + ["copy"], ev, eids)
    assert o.nearest_ids[-1] == "e7" and o.cosines[-1] == pytest.approx(1.0)
    assert o.top(1)[0][:2] == ("copy", "e7")


def test_semantic_overlap_rejects_bad_shapes():
    with pytest.raises(ValueError, match="one row per id"):
        semantic_overlap(np.ones((2, 3)), ["a"], np.ones((1, 3)), ["x"])
    with pytest.raises(ValueError, match="differ in width"):
        semantic_overlap(np.ones((1, 3)), ["a"], np.ones((1, 4)), ["x"])
    with pytest.raises(ValueError, match="no evaluation vectors"):
        semantic_overlap(np.ones((1, 3)), ["a"], np.ones((0, 3)), [])
    with pytest.raises(ValueError, match="chunk_size"):
        semantic_overlap(np.ones((1, 3)), ["a"], np.ones((1, 3)), ["x"], chunk_size=0)
