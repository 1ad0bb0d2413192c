"""Each table-3 variant changes what it claims, and nothing it should not (issue: "a row equal to
the full row is a bug until shown otherwise").

For every variant: the removed module is absent from the forward pass (perturbing its weights
leaves every embedding unchanged), a frozen tensor is bit-identical after training, an ablated
loss is 0 and computed from nothing; and the variant's trained weights differ from the full
row's trained from the same seed on the same FTUs. A tiny random BERT, 1 step each.
"""

from __future__ import annotations

import copy

import pytest
import torch

from unifar.ablation import FULL_MODEL
from unifar.config import ABLATIONS
from unifar.text import collate
from unifar.train import train

from .test_train import args_for, make_dataset, small

# Documents with 1 sentence (token branch in the full model) and several (sentence branch),
# and questions: every branch of the full model runs.
TEXTS = [{"title": "Facet anchors", "sentences": ["We learn facet anchors.", "They guide attention.",
                                                  "Results improve MAP by two points."]},
         {"title": "", "sentences": ["One short sentence only."]},
         {"title": "Dense retrieval", "sentences": ["Prior work uses citations.", "We add questions."]}]


def _embeddings(model) -> torch.Tensor:
    model.eval()
    items = model.tokenize_documents(TEXTS) + model.tokenize_questions(["which facets matter?"])
    with torch.no_grad():
        return model(collate(items, model.tokenizer.pad_token_id)).embeddings


def _perturbed(model, names: tuple[str, ...]) -> torch.Tensor:
    """Embeddings after adding noise to every parameter whose name starts with one of ``names``."""
    other = copy.deepcopy(model)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n, p in other.named_parameters():
            if n.startswith(names):
                p.add_(torch.randn(p.shape, generator=g))
    return _embeddings(other)


@pytest.fixture(scope="module")
def trained(tokenizer, tmp_path_factory):
    """The full row and every variant, trained 1 step from the same seed on the same FTUs."""
    from unifar import UniFAR, UniFARConfig

    from .conftest import tiny_bert

    ftus = make_dataset(4)
    out = {}
    for row, over in ABLATIONS.items():
        # no warm-up: a 1-step run's learning rate would be 0 at its only step
        cfg = UniFARConfig(base_model="tiny-bert", num_heads=4, lr_anchors=1e-3, lr_aggregation=1e-3,
                           warmup_ratio=0.0, **small(), **{**FULL_MODEL, **over})
        model = UniFAR(cfg, base_model=tiny_bert(tokenizer), tokenizer=tokenizer, device="cpu")
        before = {k: v.clone() for k, v in model.state_dict().items()}
        res = train(None, ftus, args_for(tmp_path_factory.mktemp("abl"), max_steps=1), model=model)
        out[row] = (before, res)
    return out


def _changed(before: dict, model) -> set[str]:
    return {k for k, v in model.state_dict().items() if not torch.equal(before[k], v)}


@pytest.mark.parametrize("row", [r for r in ABLATIONS if r != "full"])
def test_every_variants_trained_weights_differ_from_the_full_rows(trained, row):
    full = trained["full"][1].model.state_dict()
    mine = trained[row][1].model.state_dict()
    differ = [k for k in full if not torch.equal(full[k], mine[k])]
    assert differ, f"{row} trained to exactly the full row's weights"


def test_without_sentence_attention_every_input_takes_the_token_branch(trained):
    before, res = trained["w/o MHA_sent"]
    model = res.model
    items = model.tokenize_documents(TEXTS)
    with torch.no_grad():
        out = model.eval()(collate(items, model.tokenizer.pad_token_id))
    assert not out.uses_sentences.any()
    assert torch.equal(_perturbed(model, ("mha_sent.",)), _embeddings(model))  # MHA_sent absent
    assert not torch.equal(_perturbed(model, ("mha_tok.",)), _embeddings(model))


def test_without_token_attention_inputs_with_sentences_take_the_sentence_branch(trained):
    model = trained["w/o MHA_tok"][1].model
    assert torch.equal(_perturbed(model, ("mha_tok.",)), _embeddings(model))  # MHA_tok absent
    # and nothing of MHA_tok moved in training: no loss reaches it
    before = trained["w/o MHA_tok"][0]
    assert not any(k.startswith("mha_tok.") for k in _changed(before, model))


def test_frozen_anchors_are_bit_identical_after_training(trained):
    before, res = trained["freeze anchors"]
    assert torch.equal(res.model.anchors, before["anchors"])
    assert "anchors" in _changed(trained["full"][0], trained["full"][1].model)  # the full row moves them
    assert _changed(before, res.model) - {"anchors"}  # the rest of the module trains


def test_without_anchors_every_facet_embedding_is_the_same_vector(trained):
    model = trained["w/o anchors"][1].model
    emb = _embeddings(model)
    assert torch.allclose(emb[:, 0], emb[:, 1], atol=1e-6) and torch.allclose(emb[:, 0], emb[:, 2], atol=1e-6)
    assert torch.equal(_perturbed(model, ("anchors",)), emb)  # the anchors are absent
    full = _embeddings(trained["full"][1].model)
    assert not torch.allclose(full[:, 0], full[:, 1], atol=1e-6)


def test_without_the_input_embedding_the_queries_ignore_the_input(trained):
    model = trained["w/o E_input"][1].model
    assert torch.equal(_perturbed(model, ("input_proj.",)), _embeddings(model))  # E_input absent
    full = trained["full"][1].model
    assert not torch.equal(_perturbed(full, ("input_proj.",)), _embeddings(full))


@pytest.mark.parametrize("row, term", [("w/o L_KL", "l_kl"), ("w/o L_QD", "l_qd")])
def test_an_ablated_loss_is_zero_at_every_step(trained, row, term):
    from unifar.training_log import read_log

    res = trained[row][1]
    log = read_log(res.output_dir)
    assert all(r[term] == 0.0 for r in log) and all(r["l_dd"] > 0 for r in log)
    full = read_log(trained["full"][1].output_dir)
    assert all(r[term] > 0 for r in full)


def test_parameter_shift_tells_a_frozen_group_from_a_trained_one(trained):
    """Chapter 6 explains "freeze anchors" close to "full" by how little the full row's anchors move;
    the measure must say exactly 0 for the frozen anchors and more than 0 where a group trained."""
    from unifar.evaluation.structure import parameter_shift

    def start(row):
        model = copy.deepcopy(trained[row][1].model)
        model.load_state_dict(trained[row][0])
        return model

    frozen = parameter_shift(trained["freeze anchors"][1].model, start("freeze anchors"))
    full = parameter_shift(trained["full"][1].model, start("full"))
    assert frozen["anchors"] == 0.0 and frozen["aggregation"] > 0
    assert full["anchors"] > 0 and full["aggregation"] > 0
