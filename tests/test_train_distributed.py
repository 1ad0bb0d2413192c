"""The several-GPU path of ``unifar train`` (torchrun + DistributedDataParallel), run for real on
the CPU: two ranks on the gloo backend, launched with ``torchrun --standalone`` in a subprocess.

No GPU is needed: DDP's gradient averaging, the per-rank epoch shards, rank 0's files and the
gathered RNG states are the same code on gloo and on NCCL. Each launch takes a few seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from unifar import UniFARConfig
from unifar.datasets.ftu_files import write_ftus
from unifar.training_log import read_log

from .conftest import tiny_bert
from .test_train import make_dataset

# Several-rank launches (about 15 s each): marked slow; CI runs them in its "slow tests" step.
pytestmark = pytest.mark.slow

COMMON = ["--epochs", "2", "--device", "cpu", "--max-positives", "1", "--no-progress", "--seed", "5"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory, tokenizer) -> Path:
    """A tiny BERT without dropout (so two ranks and one process draw no different masks),
    8 FTUs, and configs for one micro-batch of 1 FTU per rank or 2 accumulated in one process."""
    root = tmp_path_factory.mktemp("ddp")
    base = tiny_bert(tokenizer)
    base.config.hidden_dropout_prob = base.config.attention_probs_dropout_prob = 0.0
    base.save_pretrained(root / "tiny-bert")
    tokenizer.save_pretrained(root / "tiny-bert")
    ds = make_dataset(8)
    write_ftus(root / "ftus", ds.ftus, ds.documents, command="test")
    for name, accumulation in (("one_process", 2), ("two_ranks", 1)):
        cfg = UniFARConfig(base_model=str(root / "tiny-bert"), num_heads=4, batch_size=1,
                           grad_accumulation=accumulation)
        cfg.to_json(root / f"{name}.json")
    return root


def _train(folder: Path, out: str, config: str, ranks: int, *extra: str) -> Path:
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(ranks)]
    cmd = [*(launcher if ranks > 1 else [sys.executable]), "-m", "unifar", "train", "--ftus", str(folder / "ftus"),
           "--output", str(folder / out), "--config", str(folder / f"{config}.json"), *COMMON, *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return folder / out


def _weights(run: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(run / "final" / "model.safetensors"))


@pytest.mark.parametrize("frozen", [False, True], ids=["whole-model", "frozen-base-fixed-values"])
def test_two_ranks_equal_one_process_with_the_same_global_batch(folder, frozen):
    # Rank r takes shard[r::2] of each epoch's permutation, one FTU per step; one process with
    # accumulation 2 takes the same two FTUs per step. DDP averages the two ranks' gradients, the
    # one process averages its two micro-batches: the same update, up to float summation order.
    extra = ("--freeze-base", "--fixed-values") if frozen else ()
    tag = "frozen" if frozen else "whole"
    one = _train(folder, f"one-{tag}", "one_process", 1, *extra)
    two = _train(folder, f"two-{tag}", "two_ranks", 2, *extra)
    run = json.loads((two / "run.json").read_text())
    assert run["world_size"] == 2 and run["ftus_per_step"] == 2
    assert run["steps"] == json.loads((one / "run.json").read_text())["steps"] == 8  # 8 FTUs x 2 epochs / 2 per step
    a, b = _weights(one), _weights(two)
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=1e-4, atol=1e-5, msg=k)
    losses_one = [r["loss"] for r in read_log(one)]
    losses_two = [r["loss"] for r in read_log(two)]
    assert losses_two == pytest.approx(losses_one, rel=1e-5)
    assert len(losses_one) == run["steps"] and len(set(losses_one)) > 4  # every step logged; training moved


def test_a_two_rank_run_resumes_exactly(folder):
    # A kill right after step 2's checkpoint (mid-epoch: 4 steps per epoch), emulated by keeping
    # only that checkpoint and the log up to it: the resumed run (both ranks' RNG states, shard positions, optimizer and
    # schedule from the checkpoint) must end with the uninterrupted run's weights, bit for bit.
    full = _train(folder, "full", "two_ranks", 2, "--save-every", "1", "--keep-checkpoints", "100")
    assert sorted(p.name for p in (full / "checkpoints").iterdir())[:2] == ["step-000001", "step-000002"]
    cut = folder / "cut"
    (cut / "checkpoints").mkdir(parents=True)
    shutil.copytree(full / "checkpoints" / "step-000002", cut / "checkpoints" / "step-000002")
    (cut / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in read_log(full) if r["step"] <= 2))
    rng_states = torch.load(cut / "checkpoints" / "step-000002" / "rng_state.pt", weights_only=True)
    assert len(rng_states) == 2  # one per rank, gathered to rank 0
    _train(folder, "cut", "two_ranks", 2, "--save-every", "1", "--resume")
    a, b = _weights(full), _weights(cut)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert [r["loss"] for r in read_log(cut)] == [r["loss"] for r in read_log(full)]
