"""The FLOP counts of unifar.flops against a hand computation and against torch's own counter.

``torch.utils.flop_counter.FlopCounterMode`` counts the FLOPs of every matrix product a forward
pass actually runs. On one unpadded input (so that no padding is computed) it must agree with the
count from shapes, for the base encoder and for UniFAR's facet module on both branches.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from unifar.flops import (encoder_flops, mfu, peak_tflops, training_step_flops,
                          unifar_aggregation_flops, unifar_forward_flops)
from unifar.text import collate

from .conftest import tiny_bert


def counted(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def test_hand_computation_of_a_tiny_layer() -> None:
    # hidden 2, feed-forward 4, one layer, 2 tokens: Q,K,V,O 4 * (2*2*2*2) = 64 per... by hand:
    # each of Q, K, V, O is a [2 x 2] @ [2 x 2] product: 2 * 2*2*2 = 16 FLOPs, 64 for the four;
    # feed-forward [2 x 2] @ [2 x 4] and [2 x 4] @ [4 x 2]: 32 + 32; scores [2 x 2] @ [2 x 2] and
    # weights @ values the same: 16 + 16. Total 64 + 64 + 32 = 160.
    from types import SimpleNamespace

    cfg = SimpleNamespace(hidden_size=2, intermediate_size=4, num_hidden_layers=1)
    assert encoder_flops(cfg, [2]) == 160


@pytest.mark.parametrize("length", [5, 17])
def test_encoder_count_equals_torch_counter(tokenizer, length: int) -> None:
    bert = tiny_bert(tokenizer).eval()
    # torch's counter has no formula for the CPU kernel of SDPA; the eager attention is matmuls
    bert.set_attn_implementation("eager")
    ids = torch.randint(1000, 2000, (1, length))
    with torch.no_grad():
        actual = counted(lambda: bert(input_ids=ids, attention_mask=torch.ones_like(ids)))
    assert encoder_flops(bert.config, [length]) == actual


def test_top_layers_are_a_fraction(tokenizer) -> None:
    bert = tiny_bert(tokenizer)
    assert encoder_flops(bert.config, [9], layers=1) * 2 == encoder_flops(bert.config, [9])
    with pytest.raises(ValueError, match="layers=3: the encoder has 2"):
        encoder_flops(bert.config, [9], layers=3)


@pytest.mark.parametrize("branch", ["sentence", "token"])
def test_aggregation_count_equals_torch_counter(make_model, docs, branch: str) -> None:
    model = make_model(use_token_attention=True).eval()
    if branch == "sentence":
        items = model.tokenize_documents(docs[:1])  # 6 sentences >= 3 facets: the sentence branch
        units = items[0].n_sentences
    else:
        items = model.tokenize_questions(["Which anchors guide attention?"])
        units = len(items[0].input_ids)
    batch = collate(items, 0)
    with torch.no_grad():
        tokens = model.token_states(batch)
        out = counted(lambda: model.aggregate(tokens, batch))
        assert bool(model(batch).uses_sentences[0]) == (branch == "sentence")
    cfg, h = model.config, model.hidden_size
    expected = unifar_aggregation_flops(h, cfg.mlp_hidden or h, cfg.n_facets, [units],
                                        folded_heads=cfg.num_heads if branch == "token" else None)
    # unifar.pooling.sentence_states sums each sentence's token states by a product with a
    # [n, L] membership matrix: arithmetic of the implementation, not of the model (a sum of L
    # vectors), so unifar.flops leaves it out
    pooling = 2 * items[0].n_sentences * len(items[0].input_ids) * h
    assert expected + pooling == out


def test_forward_count_of_a_mixed_batch(make_model, docs) -> None:
    """Documents and a question in one padded batch: the count from real lengths and each input's
    branch equals torch's count of one unpadded input at a time."""
    model = make_model(use_token_attention=True).eval()
    model.base.set_attn_implementation("eager")
    items = model.tokenize_documents(docs) + model.tokenize_questions(["Which anchors?"])
    with torch.no_grad():
        one_by_one = sum(counted(lambda it=it: model(collate([it], 0))) for it in items)
    pooling = sum(2 * it.n_sentences * len(it.input_ids) * model.hidden_size for it in items)
    forward = unifar_forward_flops(model, collate(items, 0))
    assert forward["base"] + forward["heads"] + pooling == one_by_one
    assert unifar_forward_flops(model, collate(items, 0), layers=0)["base"] == 0
    assert training_step_flops(forward, True) == 3 * (forward["base"] + forward["heads"])


def test_peaks_and_mfu() -> None:
    assert peak_tflops("NVIDIA H200") == 989.4
    assert peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0
    assert peak_tflops("Intel(R) Xeon(R) Processor") is None
    assert mfu(1e12, 1.0, None) is None
    assert mfu(312e12 / 4, 1.0, 312.0) == pytest.approx(0.25)
