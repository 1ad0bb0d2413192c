"""The token-state cache of a frozen base (unifar.caching)."""

import torch


def test_states_are_cached_without_dropout_whatever_the_models_mode(make_model, tokenizer):
    """A model in train mode (a fresh module, dropout 0.1) caches the same states as in eval
    mode, draws nothing from torch's generator, and keeps each module's own mode (a held-out
    measure once warmed the cache before training set the frozen base to eval: the cached states
    carried a dropout mask and the run that followed moved)."""
    from unifar.caching import TokenStateCache
    from unifar.text import encode_inputs

    items = encode_inputs(tokenizer, [("A title", ["One sentence here.", "Another one."]),
                                      ("", ["Short."])], 64)
    model = make_model()
    model.eval()
    reference = TokenStateCache()
    reference.fill(model, items)
    model.train()
    model.base.encoder.layer[-1].eval()  # a mixed state, to be restored as it was
    rng_before = torch.get_rng_state()
    cache = TokenStateCache()
    cache.fill(model, items)
    assert torch.equal(torch.get_rng_state(), rng_before)
    for key, value in reference.states.items():
        assert torch.allclose(cache.states[key], value, atol=1e-6)
    assert model.training and model.base.training and not model.base.encoder.layer[-1].training
