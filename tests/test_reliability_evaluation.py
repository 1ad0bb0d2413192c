"""Evaluation and command line on bad input (issue 20): partial CSFCube rankings, unknown model
names, a device the machine lacks, torn result files, a ranking file that is not UTF-8.

Each test fails on the code before the fix: a wrong number scored silently, a transformers
traceback after hub retries, torch's AssertionError, a half-written file, or a codec error that
names no file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from unifar.datasets.csfcube import CSFCube, default_data_dir, load_csfcube
from unifar.evaluation.csfcube import (
    evaluate_csfcube_rankings,
    rank_pools,
    read_ranked_pools,
    write_ranked_pools,
)
from unifar.facets import FACETS

SAMPLE = default_data_dir() / "sample_ranked_pools"


@pytest.fixture(scope="module")
def data() -> CSFCube:
    return load_csfcube(check_texts=False)


@pytest.fixture(scope="module")
def sample() -> dict:
    return read_ranked_pools(SAMPLE)


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``python -m unifar`` in this process: (exit code, stdout, stderr)."""
    from unifar.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def _last_line(err: str) -> str:
    return err.strip().splitlines()[-1]


def _half(ranked: dict) -> dict:
    return {f: {q: items[: len(items) // 2] for q, items in per_q.items()} for f, per_q in ranked.items()}


# ----------------------------------------------------------------------------- 1. partial rankings
def test_partial_rankings_are_refused_with_counts(data: CSFCube, sample: dict) -> None:
    half = _half(sample)
    with pytest.raises(ValueError, match=r"incomplete rankings: 50 of 50 ranked queries .*3134 candidates.*"
                                         r"e\.g\. query \d+ \(background\).*--allow-partial"):
        evaluate_csfcube_rankings(half, data)
    # the official scripts' behaviour, on request: half of each pool raises MAP from 34.23 to 36.25
    assert round(evaluate_csfcube_rankings(half, data, allow_partial=True)["all"]["map"], 2) == 36.25


def test_one_relevant_candidate_per_query_is_not_a_perfect_score(data: CSFCube) -> None:
    cheat = {f: {q: [(next(c for c, g in zip(*data.anns[f][q]) if g >= 2), 1.0)] for q in data.anns[f]} for f in FACETS}
    with pytest.raises(ValueError, match="incomplete rankings"):
        evaluate_csfcube_rankings(cheat, data)
    assert evaluate_csfcube_rankings(cheat, data, allow_partial=True)["all"]["map"] == pytest.approx(100.0)


def test_runner_scoring_refuses_partial_rankings(data: CSFCube, sample: dict) -> None:
    from unifar.evaluation.csfcube import score_csfcube_ranking

    with pytest.raises(ValueError, match="incomplete rankings"):
        score_csfcube_ranking(_half(sample), data)
    scores, entry = score_csfcube_ranking(_half(sample), data, allow_partial=True)
    assert round(scores["all"]["map"], 2) == 36.25 and entry["n_queries"] > 0


def test_shipped_sample_and_rank_pools_are_complete(data: CSFCube, sample: dict) -> None:
    """The shipped SPECTER rankings leave only query 8781666 out of its own pool (as
    exclude_query does): complete for scoring, numbers unchanged. rank_pools ranks every candidate."""
    from unifar.evaluation.csfcube import pool_coverage

    cov = pool_coverage(sample, data)
    assert cov["incomplete"] == [] and sorted(cov["self_left_out"]) == [("background", "8781666"), ("result", "8781666")]
    assert round(evaluate_csfcube_rankings(sample, data)["all"]["map"], 2) == 34.23
    def zeros(facet: str, qpid: str, cands: list[str]) -> list[float]:
        return [0.0] * len(cands)

    assert pool_coverage(rank_pools(zeros, data), data) == {"incomplete": [], "self_left_out": []}
    assert pool_coverage(rank_pools(zeros, data, exclude_query=True), data)["incomplete"] == []


def test_candidates_outside_the_pool_and_duplicates_are_refused(data: CSFCube, sample: dict) -> None:
    """(Already refused before issue 20; kept as a regression test.)"""
    q = next(iter(sample["method"]))
    for bad_items, message in ([("not-a-candidate", 1.0), *sample["method"][q]], "not annotated"), (
            [*sample["method"][q], sample["method"][q][0]], "twice"):
        bad = {**sample, "method": {**sample["method"], q: bad_items}}
        with pytest.raises(ValueError, match=message):
            evaluate_csfcube_rankings(bad, data)


def test_cli_refuses_partial_rankings_unless_allowed(sample: dict, tmp_path: Path, capsys) -> None:
    write_ranked_pools(_half(sample), tmp_path, "half")
    code, _, err = _cli(["evaluate", "csfcube", "--rankings", str(tmp_path)], capsys)
    assert code == 2 and "incomplete rankings: 50 of 50" in _last_line(err) and "Traceback" not in err
    code, out, err = _cli(["evaluate", "csfcube", "--rankings", str(tmp_path), "--allow-partial"], capsys)
    assert code == 0 and "36.25" in out
    assert "warning: --allow-partial: 50 ranked queries leave 3134 candidates" in err


def test_cli_notes_the_query_left_out_of_its_own_pool(capsys) -> None:
    code, out, err = _cli(["evaluate", "csfcube", "--rankings", str(SAMPLE)], capsys)
    assert code == 0 and "34.23" in out
    assert "note: the rankings leave the query paper out of its own pool for 2 queries" in err


# ----------------------------------------------------------------------------- 2. model names
@pytest.fixture
def no_transformers_load(monkeypatch):
    """Fail the test if transformers is asked to load anything."""
    import transformers

    def refuse(*args, **kwargs):
        raise AssertionError(f"transformers was called with {args}")

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", refuse)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", refuse)


def test_misspelt_model_fails_before_transformers(no_transformers_load, monkeypatch) -> None:
    from unifar.base_models import load_encoder

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    with pytest.raises(ValueError, match=r"unknown base model 'minlm': did you mean 'minilm'\? short names: minilm, mpnet; "
                                         r"a local encoder folder or a hub id \(owner/name"):
        load_encoder("minlm")


def test_missing_folder_and_offline_hub_id_fail_before_transformers(no_transformers_load, tmp_path, monkeypatch) -> None:
    from unifar.base_models import load_encoder

    with pytest.raises(FileNotFoundError, match=r"no such folder"):
        load_encoder(str(tmp_path / "no-such-encoder"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match=r"'someone/some-encoder' is not in the local cache and HF_HUB_OFFLINE is set"):
        load_encoder("someone/some-encoder")
    with pytest.raises(ValueError, match=r"unknown base model 'minlm'.*\(HF_HUB_OFFLINE is set"):
        load_encoder("minlm")


def test_hub_id_that_fails_to_load_is_one_clear_error(monkeypatch) -> None:
    import transformers

    from unifar import base_models

    def unreachable(*args, **kwargs):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files.\nCheck your connection.")

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", unreachable)
    monkeypatch.setattr(base_models, "offline_state", lambda probe=False: None, raising=False)  # as if online
    monkeypatch.setattr(base_models, "_in_hub_cache", lambda name: False, raising=False)
    with pytest.raises(FileNotFoundError, match=r"^base model 'someone/some-encoder' could not be loaded \(We couldn't "
                                                r"connect to 'https://huggingface.co' to load the files\.\); short names"):
        base_models.load_encoder("someone/some-encoder")


def test_cli_unknown_model_is_one_line(no_transformers_load, monkeypatch, capsys) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = _cli(["evaluate", "csfcube", "--model", "minlm"], capsys)
    last = _last_line(err)
    assert code == 2 and "Traceback" not in err
    assert last.startswith("unifar evaluate: error: unknown base model 'minlm': did you mean 'minilm'?")
    assert "HF_HUB_OFFLINE is set" in last
    code, _, err = _cli(["evaluate", "all", "--model", "runs/missing/final", "--benchmarks", "csfcube"], capsys)
    assert code == 2 and "'runs/missing/final': no such folder" in _last_line(err)


# ----------------------------------------------------------------------------- 3. device
def test_cuda_without_cuda_names_the_devices(monkeypatch) -> None:
    from unifar.runtime import pick_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"device 'cuda': no CUDA device exists on this machine .*this machine has: cpu"):
        pick_device("cuda")
    with pytest.raises(ValueError, match=r"device 'gpu' is not a torch device"):
        pick_device("gpu")
    assert pick_device("cpu") == torch.device("cpu") and pick_device(None) == torch.device("cpu")


def test_mean_pooling_checks_the_device_before_loading(monkeypatch, no_transformers_load) -> None:
    from unifar.evaluation.mean_pooling import MeanPoolingEncoder

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="no CUDA device exists"):
        MeanPoolingEncoder("minilm", device="cuda")


def test_cli_cuda_without_cuda_is_one_line(monkeypatch, capsys) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code, _, err = _cli(["evaluate", "csfcube", "--model", "minilm", "--device", "cuda", "--no-progress"], capsys)
    assert code == 2 and "Traceback" not in err
    assert "device 'cuda': no CUDA device exists" in _last_line(err) and "this machine has: cpu" in _last_line(err)


# ----------------------------------------------------------------------------- 4. atomic writes
def _tear_writes(monkeypatch) -> None:
    """From now on Path.write_text writes half of its text, then the process 'dies'."""
    original = Path.write_text

    def torn(self, text, *args, **kwargs):
        original(self, text[: len(text) // 2], *args, **kwargs)
        raise OSError("killed midway")

    monkeypatch.setattr(Path, "write_text", torn)


def _no_temporaries(folder: Path) -> bool:
    return not [p for p in folder.iterdir() if p.name.startswith(".tmp-")]


def test_save_results_never_leaves_a_torn_file(tmp_path: Path, monkeypatch) -> None:
    from unifar.evaluation.runner import FORMAT, load_results, save_results

    out = tmp_path / "eval.json"
    old = {"format": FORMAT, "meta": {"run": "old"}, "benchmarks": {}}
    save_results(old, out)
    assert out.read_text() == json.dumps(old, indent=1) + "\n"  # the format is unchanged
    _tear_writes(monkeypatch)
    with pytest.raises(OSError, match="killed midway"):
        save_results({**old, "meta": {"run": "new" * 100}}, out)
    assert load_results(out) == old and _no_temporaries(tmp_path)


def test_cli_json_is_written_atomically(tmp_path: Path, capsys, monkeypatch) -> None:
    out = tmp_path / "scores.json"
    out.write_bytes(b'{"old": 1}\n')
    _tear_writes(monkeypatch)
    with pytest.raises(OSError, match="killed midway"):
        _cli(["evaluate", "csfcube", "--rankings", str(SAMPLE), "--json", str(out)], capsys)
    assert json.loads(out.read_text()) == {"old": 1} and _no_temporaries(tmp_path)


def test_saved_rankings_are_written_atomically(sample: dict, tmp_path: Path, monkeypatch) -> None:
    write_ranked_pools(sample, tmp_path, "specter")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    _tear_writes(monkeypatch)
    with pytest.raises(OSError, match="killed midway"):
        write_ranked_pools(_half(sample), tmp_path, "specter")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


# ----------------------------------------------------------------------------- 5. invalid UTF-8
def test_invalid_utf8_names_the_file_and_line(tmp_path: Path, capsys) -> None:
    for p in SAMPLE.iterdir():
        shutil.copy(p, tmp_path / p.name)
    bad = tmp_path / "test-pid2pool-csfcube-specter-method-ranked.json"
    bad.write_bytes(b'{\n"1": [],\n"2\xff": []}\n')
    with pytest.raises(ValueError, match=r"specter-method-ranked\.json:3: not valid UTF-8 \(byte 0xff at offset 13\)"):
        read_ranked_pools(tmp_path)
    code, _, err = _cli(["evaluate", "csfcube", "--rankings", str(tmp_path)], capsys)
    assert code == 2 and "specter-method-ranked.json:3: not valid UTF-8" in _last_line(err)
