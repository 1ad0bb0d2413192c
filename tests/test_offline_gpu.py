"""The GPU transport (benchmarks/offline_gpu) and chapter 4's gpu profile
(benchmarks/studies/gpu_profile.py), on a tiny model: packing and rebuilding lose no more than the
int8 step, a packed model refuses texts it was not packed for, and the grid trains its runs and
writes the record chapter 4 reads (the CPU rehearsal of the script a lent GPU runs)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from .conftest import tiny_bert

ROOT = Path(__file__).resolve().parents[1]


def _script(rel: str):
    """A benchmark script as a module (scripts are not part of the package)."""
    path = ROOT / rel
    sys.path.insert(0, str(path.parent))  # pack.py imports unpack.py beside it
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def tiny_encoder_dir(tokenizer, tmp_path) -> Path:
    """A tiny random BERT (hidden 32) saved with the shipped MiniLM tokenizer."""
    folder = tmp_path / "tiny"
    tiny_bert(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_int8_groups_round_trip_within_half_a_step():
    pack, unpack = _script("benchmarks/offline_gpu/pack.py"), _script("benchmarks/offline_gpu/unpack.py")
    t = torch.randn(48, 96) * torch.logspace(-2, 1, 96)  # columns of very different scales
    q, scale = pack.quantize(t, group=32)
    assert q.dtype == torch.int8 and scale.shape == (48, 3)
    step = (t.reshape(48, 3, 32).abs().amax(-1) / 127)[..., None].expand(48, 3, 32).reshape(48, 96)
    assert ((unpack.dequantize(q, scale) - t).abs() <= 0.5 * step + 1e-3 * step).all()
    with pytest.raises(ValueError, match="groups of 32"):
        pack.quantize(torch.zeros(2, 40))


def test_a_packed_model_is_rebuilt_and_names_the_texts_it_covers(tiny_encoder_dir, tokenizer, tmp_path):
    from safetensors.torch import load_file

    pack, unpack = _script("benchmarks/offline_gpu/pack.py"), _script("benchmarks/offline_gpu/unpack.py")
    payload = tmp_path / "payload"
    rows = pack.used_token_ids(tokenizer, ["Facet-aware retrieval of papers."])
    pack.pack_minilm(tiny_encoder_dir, rows, payload / "minilm")
    (payload / "packed.json").write_text(json.dumps({"format": unpack.PACK_FORMAT, "benchmarks": ["csfcube"]}))
    rebuilt = unpack.rebuild_minilm(tmp_path / "rebuilt", payload)
    before, after = load_file(tiny_encoder_dir / "model.safetensors"), load_file(rebuilt / "model.safetensors")
    assert before.keys() == after.keys()
    key = next(k for k in before if k.endswith("word_embeddings.weight"))
    sent = rows.long()
    assert torch.allclose(after[key][sent], before[key][sent], atol=before[key].abs().max().item() / 100)
    unsent = torch.ones(len(after[key]), dtype=torch.bool)
    unsent[sent] = False
    assert after[key][unsent].abs().sum() == 0  # rows no text used: zero, hence the manifest
    for k in before:
        if k != key and before[k].is_floating_point():
            assert torch.allclose(after[k], before[k], atol=before[k].abs().max().item() / 100 + 1e-3), k
    assert unpack.packed_benchmarks(rebuilt) == ["csfcube"]
    assert unpack.packed_benchmarks(tiny_encoder_dir) is None  # not packed: every text is covered
    gpu_profile = _script("benchmarks/studies/gpu_profile.py")
    with pytest.raises(SystemExit, match=r"packed for \['csfcube'\] only.*\['scirepeval'\]"):
        gpu_profile.main(["--base-model", str(rebuilt), "--benchmarks", "csfcube", "scirepeval"])


def test_runs_are_parsed_and_must_start_with_unifar():
    gpu_profile = _script("benchmarks/studies/gpu_profile.py")
    assert gpu_profile.parse_runs(["unifar:0", "control:0", "unifar:2"]) == [
        ("unifar", 0), ("control", 0), ("unifar", 2)]
    for bad in (["control:0"], ["unifar"], ["flew:0"]):
        with pytest.raises(SystemExit):
            gpu_profile.parse_runs(bad)
    names = [gpu_profile.system_name(k, s, 0) for k, s in [("unifar", 0), ("control", 0), ("unifar", 1)]]
    assert names == ["unifar-trained", "control-trained", "unifar-seed1"]


@pytest.mark.slow
def test_the_gpu_grid_trains_its_runs_and_writes_the_record_chapter_4_reads(tiny_encoder_dir, tmp_path):
    from unifar.datasets.ftu_files import write_ftus

    from .test_distillation import with_teachers
    from .test_train import make_dataset

    ds = with_teachers(make_dataset(12))
    write_ftus(tmp_path / "ftus", ds.ftus, ds.documents)
    gpu_profile = _script("benchmarks/studies/gpu_profile.py")
    out = gpu_profile.main(["--base-model", str(tiny_encoder_dir), "--ftus", str(tmp_path / "ftus"),
                            "--device", "cpu", "--budget", "60", "--max-tokens", "32", "--dev-every", "2",
                            "--epochs", "1", "--runs", "unifar:0", "control:0", "--benchmarks", "scirepeval",
                            "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")])
    record = json.loads((tmp_path / "out" / "train.json").read_text())
    assert record["profile"] == "gpu" and record["chapter"] == "ch04" and record["run"]["duration_s"] > 0
    assert record["results"]["evaluated"]  # (before the evaluation the file says False)
    runs = record["results"]["runs"]
    assert list(runs) == ["unifar-trained", "control-trained"]
    assert all(r["steps"] >= 1 and r["dev_curve"] for r in runs.values())
    assert record["results"]["steps"] == runs["unifar-trained"]["steps"]  # chapter 4's top-level fields
    systems = record["results"]["evaluation"]["benchmarks"]["scirepeval"]["systems"]
    assert {"mean", "unifar-trained", "unifar-untrained", "hybrid-mean", "control-trained"} <= set(systems)
    verdicts = {v["vs"] for v in record["results"]["verdicts"]}
    assert verdicts == {"mean", "unifar-untrained", "hybrid-mean", "control-trained"}
    assert out["results"]["power"] == record["results"]["power"]
    # what chapter 4 shows of it when results/ch04/gpu/train.json exists
    from unifar.evaluation.dev_studies import gpu_profile_frames

    table, shown = gpu_profile_frames(record)
    assert list(table.index) == ["unifar-trained", "control-trained"] and list(table.kind) == ["unifar", "control"]
    assert set(shown.index.get_level_values("vs")) == verdicts
