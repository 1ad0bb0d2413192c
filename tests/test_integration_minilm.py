"""Integration: UniFAR on the real shipped MiniLM encoder (a few seconds on a CPU)."""

from __future__ import annotations

import pytest
import torch

from unifar import UniFAR, UniFARConfig
from unifar.scoring import docdoc_scores, facet_similarity, qdoc_scores

# The real shipped encoder: marked slow; CI runs it in its "slow tests" step.
pytestmark = pytest.mark.slow


def test_real_minilm_encodes_and_ranks_sensibly(tmp_path):
    model = UniFAR(UniFARConfig(base_model="minilm"), device="cpu")
    docs = [
        {"title": "Neural machine translation with attention",
         "abstract": "Translation quality is limited by fixed-length vectors. We propose an attention mechanism over source words. BLEU improves by four points on English-French."},
        {"title": "Protein folding with deep learning",
         "abstract": "Predicting protein structure is a long-standing problem. We train a network on residue distances. Accuracy reaches atomic level on CASP14."},
    ]
    d = model.encode_documents(docs)
    q = model.encode_questions(["Which papers improve machine translation with attention over source words?"])
    assert d.embeddings.shape == (2, 3, 384) and q.embeddings.shape == (1, 3, 384)
    assert d.branch == ["sentence", "sentence"] and q.branch == ["token"]
    s = qdoc_scores(q.embeddings, d.embeddings)
    assert s[0, 0] > s[0, 1]  # the untrained (identity-initialised) model keeps the base's sense
    M = facet_similarity(q.embeddings, d.embeddings)
    assert torch.allclose(M.diagonal(dim1=-2, dim2=-1).mean(-1), s, atol=1e-5)
    assert torch.allclose(docdoc_scores(d.embeddings, d.embeddings, 1), M.new_tensor(0).add(facet_similarity(d.embeddings, d.embeddings)[..., 1, 1]), atol=1e-5)
    model.save_pretrained(tmp_path / "m")
    again = UniFAR.from_pretrained(tmp_path / "m", device="cpu").encode_documents(docs).embeddings
    assert torch.equal(again, d.embeddings)
