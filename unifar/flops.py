"""FLOPs of a forward pass, counted from the model's shapes: the numerator of a throughput's MFU.

Model FLOPs utilisation (MFU, Chowdhery et al. 2022, appendix B) is the FLOPs a model *needs*
per second divided by the device's peak. Only matrix products count (a multiply-add is 2 FLOPs):
the projections, the attention scores and weighted sums, the feed-forward layers. Embedding
lookups, layer norms, softmax, activations and padding are left out, so padding and idle time
both lower the MFU, as they should.

One transformer encoder layer (hidden size ``h``, feed-forward size ``i``) on a sequence of
``L`` real tokens costs

    L * (8 h^2 + 4 h i)  +  4 L^2 h
    (Q, K, V, O and the two feed-forward products)  (scores Q K^T and the weighted sum A V)

and a training step about 3 times its forward pass (the backward pass computes the gradients of
activations and of weights, each costing one forward; Kaplan et al. 2020), for the layers that
are trained; a frozen layer's states are computed once (or read from a cache).

:func:`unifar_aggregation_flops` counts UniFAR's facet module (section 3.2), which is small: on a
CSFCube abstract it is well under 1 % of MiniLM's forward pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from transformers import PretrainedConfig

    from .model import UniFAR
    from .text import Batch

__all__ = ["encoder_layer_flops", "encoder_flops", "unifar_aggregation_flops", "unifar_forward_flops",
           "training_step_flops", "PEAK_BF16_TFLOPS", "peak_tflops", "mfu"]

# Dense (not sparse) bfloat16 tensor-core peaks from the vendors' data sheets, in TFLOP/s. A name
# matches when every word of the key is in the device name (torch.cuda.get_device_name), the
# first match wins, so the more specific keys come first.
PEAK_BF16_TFLOPS: dict[str, float] = {
    "H200": 989.4,
    "H100 PCIe": 756.0,
    "H100": 989.4,  # SXM5
    "A100": 312.0,
}


def encoder_layer_flops(hidden: int, intermediate: int, lengths: Iterable[int]) -> int:
    """FLOPs of one encoder layer's forward pass over sequences of the given real lengths.

    >>> encoder_layer_flops(8, 16, [3])  # 3 * (8*64 + 4*8*16) + 4 * 9 * 8
    3360
    >>> encoder_layer_flops(8, 16, [3, 1]) == encoder_layer_flops(8, 16, [3]) + encoder_layer_flops(8, 16, [1])
    True
    """
    h, i = int(hidden), int(intermediate)
    n = [int(x) for x in lengths]
    return sum(n) * (8 * h * h + 4 * h * i) + 4 * h * sum(x * x for x in n)


def _shapes(config: PretrainedConfig) -> tuple[int, int, int]:
    """(hidden, intermediate, layers) of a ``transformers`` encoder config (BERT, MPNet, ...)."""
    try:
        return int(config.hidden_size), int(config.intermediate_size), int(config.num_hidden_layers)
    except AttributeError as err:
        raise ValueError(f"cannot count FLOPs of {type(config).__name__}: it has no {err.name}") from None


def encoder_flops(config: PretrainedConfig, lengths: Iterable[int], layers: int | None = None) -> int:
    """FLOPs of a ``transformers`` encoder's forward pass (``layers``: only its top layers).

    >>> from types import SimpleNamespace
    >>> cfg = SimpleNamespace(hidden_size=8, intermediate_size=16, num_hidden_layers=2)
    >>> encoder_flops(cfg, [3]), encoder_flops(cfg, [3], layers=1)
    (6720, 3360)
    """
    h, i, n_layers = _shapes(config)
    if layers is not None and not 0 <= layers <= n_layers:
        raise ValueError(f"layers={layers}: the encoder has {n_layers}")
    return (n_layers if layers is None else layers) * encoder_layer_flops(h, i, list(lengths))


def unifar_aggregation_flops(hidden: int, mlp_hidden: int, n_facets: int, n_units: Iterable[int],
                             folded_heads: int | None = None) -> int:
    """FLOPs of UniFAR's facet module for inputs with ``n_units`` sentences (or tokens) each.

    Per input: ``E_input`` (2 h^2), the query MLP over ``[A ; E_input]`` (F * (4 h m + 2 m h)),
    and multi-head attention of F queries over n units: the query and output projections
    (F * 4 h^2), the key and value projections of the units (n * 4 h^2), scores and weighted sum
    (4 F n h). The token branch (:func:`unifar.attention.folded_attention`, ``folded_heads=H``)
    moves W_K and W_V onto each query's heads instead of the n tokens: F * 4 h^2 in place of
    n * 4 h^2, but its scores and sums run in the full width for each of the H heads (4 F H n h).

    >>> unifar_aggregation_flops(4, 4, 3, [2])  # 32 + 3*(64+32) + 3*64 + 2*64 + 4*3*2*4
    736
    >>> unifar_aggregation_flops(4, 4, 3, [2], folded_heads=2)  # ... + 3*64 + 4*3*2*2*4
    896
    """
    h, m, f = int(hidden), int(mlp_hidden), int(n_facets)
    n = [int(x) for x in n_units]
    per_input = 2 * h * h + f * (4 * h * m + 2 * m * h) + f * 4 * h * h  # E_input, MLP, Q and O
    if folded_heads is None:  # K and V of every unit, scores and sums in the head width
        attention = sum(n) * (4 * h * h + 4 * f * h)
    else:  # K and V folded onto the F queries; scores and sums in the full width, per head
        attention = len(n) * f * 4 * h * h + 4 * f * int(folded_heads) * h * sum(n)
    return len(n) * per_input + attention


def unifar_forward_flops(model: UniFAR, batch: Batch, layers: int | None = None) -> dict[str, int]:
    """FLOPs of UniFAR's forward pass on a collated :class:`unifar.text.Batch`, split into the base
    encoder's (``layers``: only its top layers, as when the ones below are cached) and the facet
    module's, counted on each input's real tokens and sentences and on the branch it takes."""
    lengths = batch.attention_mask.sum(dim=1).tolist()
    units = batch.n_sentences.tolist()
    sentence = model._choose_sentence_branch(batch.n_sentences).tolist()
    cfg, h = model.config, model.hidden_size
    heads = sum(unifar_aggregation_flops(h, cfg.mlp_hidden or h, cfg.n_facets,
                                         [n if s else length],
                                         folded_heads=None if s else cfg.num_heads)
                for length, n, s in zip(lengths, units, sentence))
    return {"base": encoder_flops(model.base.config, lengths, layers), "heads": heads}


def training_step_flops(forward: dict[str, int], base_trained: bool) -> int:
    """FLOPs of a training step from its forward pass (:func:`unifar_forward_flops`): 3 times the
    forward of what is trained (forward, and a backward pass for activations and for weights);
    a base that is not trained (``base_trained=False``) costs its forward only, and nothing when
    its states come from a cache (count its forward with ``layers=0``).

    >>> training_step_flops({"base": 100, "heads": 10}, True), training_step_flops({"base": 100, "heads": 10}, False)
    (330, 130)
    """
    return 3 * forward["heads"] + (3 if base_trained else 1) * forward["base"]


def peak_tflops(device_name: str) -> float | None:
    """The dense bf16 peak of a known accelerator (:data:`PEAK_BF16_TFLOPS`), else None.

    >>> peak_tflops("NVIDIA H100 80GB HBM3"), peak_tflops("NVIDIA H100 PCIe"), peak_tflops("cpu")
    (989.4, 756.0, None)
    """
    for key, value in PEAK_BF16_TFLOPS.items():
        if all(word in device_name for word in key.split()):
            return value
    return None


def mfu(flops: float, seconds: float, peak: float | None) -> float | None:
    """Model FLOPs utilisation: ``flops / seconds`` as a fraction of ``peak`` (TFLOP/s).

    >>> mfu(989.4e12, 2.0, 989.4)
    0.5
    """
    if peak is None or seconds <= 0:
        return None
    return flops / seconds / (peak * 1e12)
