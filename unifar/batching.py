"""One encoding loop for every encoder: inputs cut into length-sorted batches, each batch
encoded, its rows written back in input order.

The library's four encoders differ in what a batch is (UniFAR's sentence-marked inputs, the
bi-encoder's and mean pooling's token ids, the rhetorical encoder's sentences) and in what comes
out of it, not in how they batch. :func:`batched_encode` holds what they share:

- batches are cut from the inputs sorted by length (:func:`unifar.pooling.length_order`), so each
  is padded only to its own longest input, and the rows come back in input order;
- the module runs in eval mode (no dropout) and is put back in its former mode afterwards, also
  when a batch fails;
- no gradients; bfloat16 autocast on request (by default on CUDA only,
  :func:`unifar.runtime.autocast_for`); rows come back as a float32 CPU tensor;
- one progress-bar rule (:func:`show_progress_bar`).

Callers: :func:`unifar.encoding.encode_batched` (UniFAR), :meth:`unifar.bi_encoder.BiEncoder.encode`,
:class:`unifar.evaluation.mean_pooling.MeanPoolingEncoder`,
:meth:`unifar.rhetoric.encoder.SentenceEncoder.encode`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
from tqdm import tqdm

from .pooling import length_order
from .runtime import autocast_for

__all__ = ["PROGRESS_MIN_BATCHES", "show_progress_bar", "eval_mode", "batched_encode"]

PROGRESS_MIN_BATCHES = 5  # a bar by default only for work long enough to watch


def show_progress_bar(show_progress: bool | None, n_batches: int) -> bool:
    """Whether to draw a progress bar: ``show_progress`` when given; by default (``None``) for
    at least :data:`PROGRESS_MIN_BATCHES` batches, and only on a terminal (tqdm's own rule for
    ``disable=None``), so that logs, CI and notebook outputs do not fill with bars.

    >>> show_progress_bar(True, 1), show_progress_bar(False, 100)
    (True, False)
    """
    if show_progress is not None:
        return bool(show_progress)
    return n_batches >= PROGRESS_MIN_BATCHES and sys.stderr.isatty()


@contextmanager
def eval_mode(module: torch.nn.Module | None) -> Iterator[None]:
    """Run the block with ``module`` in eval mode (no dropout), then restore its former mode,
    also when the block raises."""
    if module is None:
        yield
        return
    was_training = module.training
    module.eval()
    try:
        yield
    finally:
        module.train(was_training)


def batched_encode(
    encode_batch: Callable[[list[int]], torch.Tensor],
    lengths: Sequence[int],
    batch_size: int,
    row_shape: Sequence[int],
    *,
    module: torch.nn.Module | None = None,
    device: torch.device | str = "cpu",
    bf16: bool | None = None,
    show_progress: bool | None = None,
    desc: str = "encoding",
) -> torch.Tensor:
    """Rows ``[N, *row_shape]`` (float32, CPU) of ``N`` inputs, in input order.

    ``encode_batch(idx)`` encodes the inputs whose positions are ``idx`` (one batch, longest
    first) and returns their rows ``[len(idx), *row_shape]``; ``lengths`` are the inputs'
    lengths (tokens or characters), which only decide the batches. ``module`` is put in eval
    mode for the loop (see the module docstring); ``device`` and ``bf16`` choose the autocast.

    >>> lengths = [1, 3, 2]
    >>> batched_encode(lambda idx: torch.tensor([[10.0 * lengths[i]] for i in idx]), lengths, 2, (1,)).tolist()
    [[10.0], [30.0], [20.0]]
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    n = len(lengths)
    out = torch.zeros(n, *row_shape)
    order = length_order(lengths).tolist()
    starts = range(0, n, batch_size)
    show = show_progress_bar(show_progress, len(starts))
    autocast = autocast_for(device, bf16)
    with eval_mode(module), torch.no_grad():
        for s in tqdm(starts, desc=desc, unit="batch", disable=not show):
            idx = order[s : s + batch_size]
            with autocast:
                rows = encode_batch(idx)
            out[idx] = rows.float().cpu()
    return out
