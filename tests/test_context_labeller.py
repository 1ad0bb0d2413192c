"""The in-context labeller: sentence states from UniFAR's own pass, aligned to the sentences
given, a head that learns from them, a pass shared only with the same base."""

from __future__ import annotations

import pytest
import torch

from unifar.rhetoric.context_labeller import InContextLabeller, base_digest, sentence_features
from unifar.facets import FACETS
from unifar.pooling import sentence_states

LABELS = ["background", "background", "method", "method", "result", "result"]


def _labelled(n: int = 12) -> list[dict]:
    # the role is the position: what an in-context state can see and a lone sentence cannot
    words = ["alpha beta", "gamma delta", "epsilon zeta", "eta theta", "iota kappa", "lambda mu"]
    return [{"id": f"d{k}", "title": f"paper {k}",
             "sentences": [f"{words[(i + k) % 6]} {k}." for i in range(6)], "labels": list(LABELS)}
            for k in range(n)]


def test_encode_returns_the_states_the_sentence_branch_sees(make_model, docs):
    model = make_model()
    enc = model.encode_documents(docs, sentence_states=True)
    plain = model.encode_documents(docs)
    assert torch.equal(enc.embeddings, plain.embeddings) and plain.sentence_states == []
    batch_items = model.tokenize_documents(docs[:1])
    from unifar.text import collate

    batch = collate(batch_items, model.tokenizer.pad_token_id)
    with torch.no_grad():  # encode runs in eval mode (no dropout); so does this reference
        S, _ = sentence_states(model.eval().token_states(batch), batch.sentence_ids, batch.max_sentences)
    assert torch.allclose(enc.sentence_states[0], S[0, : batch_items[0].n_sentences], atol=1e-6)
    assert [len(s) for s in enc.sentence_states] == [6, 2, 13]  # the title is a unit too
    assert enc.unit_index[1] == [0, 1]


def test_features_align_to_the_sentences_given(make_model):
    model = make_model(max_tokens=40)
    docs = [{"title": "T", "sentences": ["First one.", "   ", "Third one here.", "Fourth."]},
            {"title": "", "sentences": ["Only " * 50 + "long.", "Cut off."]}]
    feats = sentence_features(docs, model.encode_documents(docs, sentence_states=True))
    assert feats[0][0] == [0, 2, 3]  # the blank sentence has no state; the title is left out
    h = model.hidden_size  # the state, the centred state (both unit length) and the position
    assert feats[0][1].shape == (3, 2 * h + 1) and feats[0][1][:, -1].tolist() == [0.0, 0.5, 1.0]
    assert torch.allclose(feats[0][1][:, :h].norm(dim=-1), torch.ones(3))
    assert feats[1][0] == [0]  # the second sentence is beyond the 40-token budget
    with pytest.raises(ValueError, match="sentence_states=True"):
        sentence_features(docs, model.encode_documents(docs))


def test_the_head_learns_roles_and_labels_documents(make_model, tmp_path):
    model = make_model()
    lab = InContextLabeller(model, C=100.0).fit(_labelled())
    assert lab.metadata["sentences"] == 72 and set(lab.metadata["class_counts"]) == set(FACETS)
    scores = lab.evaluate(_labelled(4))
    assert scores["accuracy"] > 0.9  # position is in the states: a lone-sentence head sees none
    doc = {"title": "x", "sentences": ["alpha beta 0.", "", "iota kappa 0."]}
    assert lab.label_documents([doc])[0][1] is None  # a blank sentence gets no label
    saved = InContextLabeller.load(lab.save(tmp_path / "lab"), model=model)
    assert saved.label_documents(_labelled(2)) == lab.label_documents(_labelled(2))
    (tmp_path / "lab" / "labeller.json").write_text(
        (tmp_path / "lab" / "labeller.json").read_text().replace(lab.digest, "0" * 24))
    with pytest.raises(ValueError, match="trained on base weights"):
        InContextLabeller.load(tmp_path / "lab", model=model)


def test_the_pass_is_shared_only_with_the_same_base(make_model):
    model = make_model()
    lab = InContextLabeller(model).fit(_labelled())
    docs = _labelled(2)
    enc = model.encode_documents(docs, sentence_states=True)
    same = make_model()  # same seed, same weights: same digest
    assert base_digest(same) == lab.digest and lab.shares_pass_with(same)
    assert lab.label_documents(docs, enc, same) == lab.label_documents(docs)
    other = make_model()
    with torch.no_grad():
        next(other.base.parameters()).add_(1.0)
    assert not lab.shares_pass_with(other) and not lab.shares_pass_with(make_model(max_tokens=64))
    # another base's states are never read: the labeller runs its own pass instead
    wrong = other.encode_documents(docs, sentence_states=True)
    assert lab.label_documents(docs, wrong, other) == lab.label_documents(docs)
