"""The one encoding loop (unifar.batching): input order, eval mode, autocast, the progress rule."""

from __future__ import annotations

import io

import pytest
import torch

from unifar import batching
from unifar.batching import batched_encode, eval_mode, show_progress_bar
from unifar.runtime import autocast_for


def test_rows_come_back_in_input_order_and_batches_are_length_sorted():
    lengths = [3, 9, 1, 7, 5]
    seen: list[list[int]] = []

    def encode_batch(idx):
        seen.append(list(idx))
        return torch.tensor([[float(i), float(lengths[i])] for i in idx])

    out = batched_encode(encode_batch, lengths, 2, (2,))
    assert out[:, 0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert out[:, 1].tolist() == [3.0, 9.0, 1.0, 7.0, 5.0]
    assert seen == [[1, 3], [4, 0], [2]]  # longest first, one batch of two at a time
    assert out.dtype == torch.float32 and out.device.type == "cpu"


def test_empty_input_keeps_the_row_shape_and_bad_batch_size_is_refused():
    assert batched_encode(lambda idx: torch.zeros(len(idx), 3, 4), [], 8, (3, 4)).shape == (0, 3, 4)
    with pytest.raises(ValueError, match="batch_size must be positive"):
        batched_encode(lambda idx: torch.zeros(len(idx), 1), [1], 0, (1,))


def test_eval_mode_for_the_loop_and_former_mode_restored_also_on_error():
    net = torch.nn.Sequential(torch.nn.Dropout(0.5))
    net.train()
    modes = []

    def encode_batch(idx):
        modes.append(net.training)
        assert not torch.is_grad_enabled()
        return torch.ones(len(idx), 1)

    batched_encode(encode_batch, [1, 2, 3], 2, (1,), module=net)
    assert modes == [False, False] and net.training

    def fails(idx):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        batched_encode(fails, [1], 1, (1,), module=net)
    assert net.training
    net.eval()
    with eval_mode(net):
        pass
    assert not net.training


def test_bf16_rows_are_returned_as_float32():
    def encode_batch(idx):
        x = torch.ones(len(idx), 4)
        return x @ torch.ones(4, 2)  # bf16 under the CPU autocast

    out = batched_encode(encode_batch, [1, 1], 2, (2,), bf16=True)
    assert out.dtype == torch.float32 and out.tolist() == [[4.0, 4.0], [4.0, 4.0]]
    assert isinstance(autocast_for("cpu", None), type(autocast_for("cpu", False)))  # None: CUDA only


def test_progress_rule(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert show_progress_bar(True, 1) and not show_progress_bar(False, 100)
    monkeypatch.setattr(batching.sys, "stderr", io.StringIO())
    assert not show_progress_bar(None, 100)  # not a terminal: no bar by default
    monkeypatch.setattr(batching.sys, "stderr", Tty())
    assert show_progress_bar(None, batching.PROGRESS_MIN_BATCHES)
    assert not show_progress_bar(None, batching.PROGRESS_MIN_BATCHES - 1)


def test_every_encoder_goes_through_the_one_loop():
    """The four encoders named in the module docstring call batched_encode (no loop of their own)."""
    import inspect

    from unifar import bi_encoder, encoding
    from unifar.evaluation import mean_pooling
    from unifar.rhetoric import encoder

    for module, fn in ((encoding, encoding.encode_batched), (bi_encoder, bi_encoder.BiEncoder.encode),
                       (mean_pooling, mean_pooling.MeanPoolingEncoder._encode),
                       (encoder, encoder.SentenceEncoder.encode)):
        src = inspect.getsource(fn)
        assert "batched_encode(" in src and "tqdm" not in src and "range(0" not in src, module.__name__
