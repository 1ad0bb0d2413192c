"""Issue 20, training: bad input gives a clear error naming the field or file, or a safe fallback
with a warning, instead of a silently wrong run. Config types and ranges, integrity of saved
models and checkpoints, resuming on other FTUs, and two runs into one output folder."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from unifar import UniFAR, UniFARConfig
from unifar.checkpoints import latest_checkpoint
from unifar.config import TrainArgs
from unifar.train import train
from unifar.training_log import read_log

from .test_train import args_for, make_dataset, small


# ----------------------------------------------------------------------------- 1. config types
@pytest.mark.parametrize("field, value", [
    ("use_kl_loss", "false"), ("use_anchors", "false"), ("facets", "bmr"), ("num_heads", "4"), ("epochs", "1"),
    ("temperature", "0.08"), ("facet_words", "abc"), ("mlp_hidden", 1.5), ("train_values", 1),
])
def test_config_refuses_a_value_of_the_wrong_type(field, value):
    with pytest.raises(TypeError, match=f"field '{field}' of UniFARConfig must be"):
        UniFARConfig(**{field: value})


@pytest.mark.parametrize("field, value, rule", [
    ("num_heads", 0, "at least 1"), ("batch_size", 0, "at least 1"), ("grad_accumulation", -1, "at least 1"),
    ("epochs", 0, "at least 1"), ("dropout", 1.0, r"in \[0, 1\)"), ("warmup_ratio", -0.1, r"in \[0, 1\)"),
    ("temperature", 0.0, "positive"), ("temperature", float("nan"), "finite"), ("lr_base", -1e-5, "at least 0"),
    ("mlp_hidden", 0, "at least 1"), ("facets", ("method", "method"), "distinct"), ("facets", ("", "method"), "a non-empty name"),
])
def test_config_refuses_a_value_out_of_range(field, value, rule):
    with pytest.raises(ValueError, match=f"{field}.* must be {rule}"):
        UniFARConfig(**{field: value})


def test_config_file_with_a_wrong_type_names_the_file_and_field(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**UniFARConfig().to_dict(), "use_kl_loss": "false"}))
    with pytest.raises(TypeError, match=r"config\.json: field 'use_kl_loss' of UniFARConfig must be bool, got 'false'"):
        UniFARConfig.from_json(path)
    path.write_text(json.dumps({"facets": "bmr"}))
    with pytest.raises(TypeError, match=r"config\.json: field 'facets'"):
        UniFARConfig.from_json(path)
    with pytest.raises(TypeError, match="field 'num_heads'"):
        UniFARConfig.from_dict({"num_heads": "4"})


def test_config_json_lists_and_good_values_are_still_accepted():
    c = UniFARConfig.from_dict({"facets": ["a", "b"], "facet_words": ["alpha", "beta"], "dropout": 0, "lr_base": 1})
    assert c.facets == ("a", "b") and c.facet_words == ("alpha", "beta") and c.dropout == 0
    assert UniFARConfig.from_json(UniFARConfig(num_heads=4).to_json()) == UniFARConfig(num_heads=4)


@pytest.mark.parametrize("kw, error, match", [
    ({"epochs": "1"}, TypeError, "field 'epochs' of TrainArgs must be int | None"),
    ({"resume": "false"}, TypeError, "field 'resume' of TrainArgs must be bool"),
    ({"eval_fraction": "0.1"}, TypeError, "field 'eval_fraction'"),
    ({"max_loss": 0.0}, ValueError, "max_loss must be positive"),
    ({"grad_clip": -1.0}, ValueError, "grad_clip must be positive"),
    ({"seed": -1}, ValueError, "seed must be at least 0"),
])
def test_train_args_refuse_wrong_types_and_ranges(kw, error, match):
    with pytest.raises(error, match=match):
        TrainArgs(**kw)


def test_train_args_take_a_path_as_output_dir(tmp_path):
    assert TrainArgs(output_dir=tmp_path / "run").output_dir == str(tmp_path / "run")


# ----------------------------------------------------------------------------- 2. model folder integrity
def _flip(path: Path, n: int = 300) -> None:
    data = bytearray(path.read_bytes())
    start = len(data) // 2
    for i in range(start, start + n):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _edit_json(path: Path, **changes) -> None:
    d = json.loads(path.read_text())
    d.update(changes)
    path.write_text(json.dumps(d))


def test_flipped_bytes_in_saved_weights_are_refused(make_model, tmp_path):
    make_model().save_pretrained(tmp_path / "m")
    _flip(tmp_path / "m" / "model.safetensors")
    with pytest.raises(ValueError, match=r"model\.safetensors: SHA-256 differs from .*manifest\.json"):
        UniFAR.from_pretrained(tmp_path / "m", device="cpu")


def test_truncated_saved_weights_are_refused(make_model, tmp_path):
    make_model().save_pretrained(tmp_path / "m")
    _truncate(tmp_path / "m" / "model.safetensors")
    with pytest.raises(ValueError, match=r"model\.safetensors has \d+ bytes, .*manifest\.json records \d+"):
        UniFAR.from_pretrained(tmp_path / "m", device="cpu")


@pytest.mark.parametrize("change", [{"num_heads": 2}, {"base_model": "minilm"}, {"facets": ["a", "b", "c"]}])
def test_a_config_that_no_longer_matches_the_weights_is_refused(make_model, tmp_path, change):
    make_model().save_pretrained(tmp_path / "m")
    _edit_json(tmp_path / "m" / "config.json", **change)
    field = next(iter(change))
    with pytest.raises(ValueError, match=rf"config\.json no longer matches the weights .*{field}="):
        UniFAR.from_pretrained(tmp_path / "m", device="cpu")


def test_a_training_field_edited_in_config_json_loads_with_a_warning(make_model, tmp_path, caplog):
    make_model().save_pretrained(tmp_path / "m")
    _edit_json(tmp_path / "m" / "config.json", epochs=7)
    with caplog.at_level(logging.WARNING):
        m = UniFAR.from_pretrained(tmp_path / "m", device="cpu")
    assert m.config.epochs == 7 and "edited after saving (epochs)" in caplog.text


def _make_legacy(folder: Path) -> None:
    """What a folder saved before this change looks like: no digests anywhere."""
    (folder / "manifest.json").unlink()
    state = folder / "trainer_state.json"
    if state.exists():
        d = json.loads(state.read_text())
        d.pop("files", None)
        d.pop("train_ftus_sha256", None)
        state.write_text(json.dumps(d))


def test_a_model_saved_before_digests_still_loads_without_warnings(make_model, docs, tmp_path, caplog):
    model = make_model()
    model.save_pretrained(tmp_path / "m")
    _make_legacy(tmp_path / "m")
    with caplog.at_level(logging.WARNING):
        loaded = UniFAR.from_pretrained(tmp_path / "m", device="cpu")
    assert not caplog.records
    assert torch.equal(model.encode_documents(docs).embeddings, loaded.encode_documents(docs).embeddings)


def test_an_old_folder_whose_base_no_longer_fits_is_refused(make_model, tmp_path):
    make_model().save_pretrained(tmp_path / "m")
    _make_legacy(tmp_path / "m")
    _edit_json(tmp_path / "m" / "base" / "config.json", hidden_size=64)
    with pytest.raises(ValueError, match=r"model\.safetensors does not fit the model .*size mismatch"):
        UniFAR.from_pretrained(tmp_path / "m", device="cpu")


def test_an_old_folder_with_nan_weights_is_refused(make_model, tmp_path):
    model = make_model()
    with torch.no_grad():
        model.anchors[0, 0] = float("nan")
    model.save_pretrained(tmp_path / "m")
    _make_legacy(tmp_path / "m")
    with pytest.raises(ValueError, match=r"model\.safetensors holds NaN or infinite values in \['anchors'\]"):
        UniFAR.from_pretrained(tmp_path / "m", device="cpu")


# ----------------------------------------------------------------------------- 2. checkpoints and resume
COMMON = dict(save_every=1, keep_checkpoints=5, seed=3, max_positives=1, max_negatives=1)


class Killed(Exception):
    pass


def _kill_after(n: int):
    def cb(record):
        if record["step"] == n:
            raise Killed

    return cb


def _cut_run(make_model, tmp_path, ds, steps: int = 4) -> Path:
    with pytest.raises(Killed):
        train(None, ds, args_for(tmp_path, "cut", **COMMON), model=make_model(**small()), callbacks=[_kill_after(steps)])
    out = tmp_path / "cut"
    assert latest_checkpoint(out).name == f"step-{steps:06d}"
    return out


def test_resume_skips_a_broken_newest_checkpoint_and_ends_as_an_uninterrupted_run(make_model, tmp_path, caplog):
    ds = make_dataset(10)  # 6 steps
    full = train(None, ds, args_for(tmp_path, "full", **COMMON), model=make_model(**small()))
    out = _cut_run(make_model, tmp_path, ds)
    ckpts = out / "checkpoints"
    _truncate(ckpts / "step-000004" / "model.safetensors")  # the newest: truncated
    _make_legacy(ckpts / "step-000003")  # the one before: saved before digests, intact
    orphan = ckpts / ".tmp-step-000005-deadbeef"  # what a save killed midway leaves
    orphan.mkdir()
    (orphan / "model.safetensors").write_bytes(b"half")
    torch.manual_seed(123)
    with caplog.at_level(logging.WARNING, logger="unifar.train"):
        resumed = train(None, ds, args_for(tmp_path, "cut", resume=True, **COMMON), model=make_model(**small()))
    assert "checkpoint" in caplog.text and "step-000004 is broken" in caplog.text and " bytes, " in caplog.text
    assert resumed.start_step == 3 and resumed.steps == 6 and not orphan.exists()
    a, b = full.model.state_dict(), resumed.model.state_dict()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert [r["step"] for r in read_log(out)] == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("damage", ["flip weights", "truncate optimizer", "truncate legacy weights",
                                    "truncate legacy rng", "edit heads"])
def test_a_broken_checkpoint_is_refused_before_loading(make_model, tmp_path, damage):
    from unifar.checkpoints import verify_checkpoint

    out = _cut_run(make_model, tmp_path, make_dataset(10), steps=2)
    ckpt = out / "checkpoints" / "step-000002"
    if "legacy" in damage:
        _make_legacy(ckpt)
    {"flip weights": lambda: _flip(ckpt / "model.safetensors"),
     "truncate optimizer": lambda: _truncate(ckpt / "optimizer.pt"),
     "truncate legacy weights": lambda: _truncate(ckpt / "model.safetensors"),
     "truncate legacy rng": lambda: _truncate(ckpt / "rng_state.pt"),
     "edit heads": lambda: _edit_json(ckpt / "config.json", num_heads=2)}[damage]()
    with pytest.raises(ValueError, match=r"step-000002"):
        verify_checkpoint(ckpt)
    with pytest.raises(ValueError, match=r"none of the 2 checkpoint\(s\) .* is intact|step-000002"):
        _make_all_broken_then_resume(make_model, tmp_path, out)


def _make_all_broken_then_resume(make_model, tmp_path, out: Path):
    _flip(out / "checkpoints" / "step-000001" / "model.safetensors")
    train(None, make_dataset(10), args_for(tmp_path, "cut", resume=True, **COMMON), model=make_model(**small()))


def test_a_saved_checkpoint_records_the_digests_of_its_files(make_model, tmp_path):
    out = _cut_run(make_model, tmp_path, make_dataset(10), steps=1)
    ckpt = out / "checkpoints" / "step-000001"
    state = json.loads((ckpt / "trainer_state.json").read_text())
    assert set(state["files"]) == {"optimizer.pt", "scheduler.pt", "rng_state.pt"} and len(state["train_ftus_sha256"]) == 64
    manifest = json.loads((ckpt / "manifest.json").read_text())
    assert {"config.json", "model.safetensors", "base/config.json"} <= set(manifest["files"])
    from unifar.files import sha256_file

    assert manifest["files"]["model.safetensors"]["sha256"] == sha256_file(ckpt / "model.safetensors")


# ----------------------------------------------------------------------------- 3. resume on other FTUs
def test_resume_on_other_ftus_of_the_same_count_is_refused(make_model, tmp_path):
    ds = make_dataset(10)
    out = _cut_run(make_model, tmp_path, ds, steps=2)
    other = make_dataset(10)
    u = other.ftus[0]
    u.positives["background"], u.negatives["background"] = u.negatives["background"], u.positives["background"]
    with pytest.raises(ValueError, match=r"step-000002: it was trained on other FTUs \(SHA-256 of its training FTUs "
                                         r"[0-9a-f]{64}, of this run's [0-9a-f]{64}\)"):
        train(None, other, args_for(tmp_path, "cut", resume=True, **COMMON), model=make_model(**small()))
    assert out.exists()


# ----------------------------------------------------------------------------- 4. one run per folder
def test_a_second_run_into_a_busy_folder_fails_at_once(make_model, tmp_path):
    ds = make_dataset(10)
    errors = []

    def start_another(record):
        if record["step"] == 1:
            try:
                train(None, ds, args_for(tmp_path, "run", max_steps=2), model=make_model(**small()))
            except FileExistsError as err:
                errors.append(str(err))

    res = train(None, ds, args_for(tmp_path, "run", max_steps=3), model=make_model(**small()), callbacks=[start_another])
    assert len(errors) == 1 and "is in use by another training run" in errors[0]
    assert str(tmp_path / "run") in errors[0] and f"pid {os.getpid()}" in errors[0]
    assert [r["step"] for r in read_log(res.output_dir)] == [1, 2, 3]  # each step once
    # the lock went with the run: resuming the folder works
    again = train(None, ds, args_for(tmp_path, "run", max_steps=4, resume=True), model=make_model(**small()))
    assert again.start_step == 3 and again.steps == 4


def test_a_crashed_run_leaves_no_stale_lock(tmp_path):
    from unifar.checkpoints import lock_run_folder, unlock_run_folder

    code = ("import os, sys; from pathlib import Path; from unifar.checkpoints import lock_run_folder; "
            "lock_run_folder(Path(sys.argv[1])); os._exit(3)")  # dies holding the lock, no clean-up
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "run")], env=env, cwd=root, capture_output=True, text=True)
    assert proc.returncode == 3, proc.stderr
    assert (tmp_path / "run" / ".lock").exists()
    lock = lock_run_folder(tmp_path / "run")
    unlock_run_folder(lock)


def test_cli_train_into_a_busy_folder_is_a_one_line_error(tmp_path, capsys):
    from unifar.checkpoints import lock_run_folder, unlock_run_folder
    from unifar.cli import main
    from unifar.datasets.ftu_files import write_ftus

    ds = make_dataset(4)
    write_ftus(tmp_path / "ftus", ds.ftus, ds.documents, command="test")
    lock = lock_run_folder(tmp_path / "out")
    try:
        with pytest.raises(SystemExit):
            main(["train", "--ftus", str(tmp_path / "ftus"), "--output", str(tmp_path / "out"), "--device", "cpu",
                  "--no-progress"])
    finally:
        unlock_run_folder(lock)
    assert f"is in use by another training run (pid {os.getpid()})" in capsys.readouterr().err
