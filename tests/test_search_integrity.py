"""unifar search under bad input: no stale, mixed or damaged index ever answers a query, no user
file is deleted, and every bad option or file is a clear error (the cases of issue 34)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from unifar.files import FolderBusy, IntegrityError, lock_folder, unlock_folder
from unifar.search.corpus import read_corpus
from unifar.search.corpus_index import INDEX_DIR, Index
from unifar.search.encode import encode_corpus, model_digest, read_encoding

from .test_search import checkpoint, model  # noqa: F401 -- the same fixtures as the search tests
from .test_search import cli_error, papers, run_cli, write_corpus


def other_papers(n: int = 20) -> list[dict]:
    """Another corpus with as many papers: the same ids, other texts."""
    rows = papers(n)
    return [dict(r, sentences=list(reversed(r["sentences"])), labels=list(reversed(r["labels"])))
            for r in rows]


def encoded(tmp_path: Path, model, rows=None, name: str = "idx", **kw) -> Path:
    folder = tmp_path / name
    src = tmp_path / f"{name}-src"
    src.mkdir(exist_ok=True)
    corpus = read_corpus(write_corpus(src, "jsonl", rows))
    encode_corpus(corpus, model, folder, progress=False, chunk_size=8, **kw)
    return folder


def indexed(folder: Path, backend: str = "exact") -> Path:
    Index.from_encoding(folder).build(backend).save_index(folder)
    return folder


# ----- 1, 2: a stale or mixed folder ------------------------------------------------------------
def test_overwrite_with_another_corpus_removes_the_old_index(model, tmp_path):
    folder = indexed(encoded(tmp_path, model))
    src = tmp_path / "b"
    src.mkdir()
    corpus_b = read_corpus(write_corpus(src, "jsonl", other_papers()))
    encode_corpus(corpus_b, model, folder, progress=False, chunk_size=8, overwrite=True)
    assert not (folder / INDEX_DIR).exists()  # the old corpus's vectors are gone
    with pytest.raises(FileNotFoundError, match="no index yet"):
        Index.load(folder, model=model)


def test_an_index_beside_another_encoding_is_refused(model, tmp_path):
    a = indexed(encoded(tmp_path, model, name="a"))
    b = encoded(tmp_path, model, other_papers(), name="b")
    (a / INDEX_DIR).rename(b / INDEX_DIR)  # what a stale index/ looks like
    with pytest.raises(IntegrityError, match="built from another encoding.*unifar index"):
        Index.load(b, model=model)


def test_a_second_writer_is_refused_while_the_first_holds_the_folder(model, checkpoint, tmp_path,
                                                                     capsys):
    folder = encoded(tmp_path, model)
    lock = lock_folder(folder, "a test")
    try:
        src = tmp_path / "b"
        src.mkdir()
        corpus_b = read_corpus(write_corpus(src, "jsonl", other_papers()))
        with pytest.raises(FolderBusy, match="in use by"):
            encode_corpus(corpus_b, model, folder, progress=False, overwrite=True)
        err = cli_error(capsys, "encode", corpus_b.path, "--model", checkpoint, "--out", folder,
                        "--overwrite", "--no-labels")
        assert "is in use by" in err
        assert "is in use by" in cli_error(capsys, "index", folder)
    finally:
        unlock_folder(lock)
    assert read_encoding(folder).documents[0]["sentences"] == papers(1)[0]["sentences"]


# ----- 3, 6: damaged files are errors, never rankings ------------------------------------------
def test_a_flipped_sign_in_a_chunk_is_an_error_not_a_ranking(model, tmp_path):
    folder = indexed(encoded(tmp_path, model))
    chunk = folder / "chunks" / "chunk-00000.safetensors"
    size = chunk.stat().st_size
    tensors = load_file(str(chunk))
    tensors["embeddings"][0] = -tensors["embeddings"][0]
    save_file(tensors, str(chunk))
    assert chunk.stat().st_size == size  # same size: only a digest sees it
    with pytest.raises(IntegrityError, match=r"chunk-00000.*SHA-256.*unifar encode"):
        Index.load(folder, model=model)
    chunk.write_bytes(chunk.read_bytes()[: size // 2])  # truncated: seen even without the digest
    with pytest.raises(IntegrityError, match=r"chunk-00000.*bytes"):
        Index.load(folder, model=model, check=False)


def test_a_file_is_hashed_once_until_it_changes(model, tmp_path, monkeypatch):
    from unifar.search import folder as folder_module

    folder = indexed(encoded(tmp_path, model), "flat")
    monkeypatch.setattr(folder_module, "RACY_SECONDS", 0.0)  # the files were written just now
    hashed = []
    real = folder_module.sha256_file
    monkeypatch.setattr(folder_module, "sha256_file", lambda p: hashed.append(p.name) or real(p))
    Index.load(folder, model=model)
    assert "chunk-00000.safetensors" in hashed and "vectors-all.faiss" in hashed
    hashed.clear()
    Index.load(folder, model=model)
    assert hashed == []  # nothing changed since: nothing hashed again
    chunk = folder / "chunks" / "chunk-00001.safetensors"
    tensors = load_file(str(chunk))
    tensors["embeddings"][1] = -tensors["embeddings"][1]
    save_file(tensors, str(chunk))  # same size; its times change
    with pytest.raises(IntegrityError, match="chunk-00001.*SHA-256"):
        Index.load(folder, model=model)
    assert hashed == ["chunk-00001.safetensors"]


def test_flipped_vectors_in_a_faiss_file_are_an_error(model, tmp_path, capsys):
    folder = indexed(encoded(tmp_path, model), "flat")
    faiss_file = folder / INDEX_DIR / "vectors-all.faiss"
    data = bytearray(faiss_file.read_bytes())
    for i in range(len(data) - 4, len(data) - 400, -4):  # sign bits of the last float32s
        data[i + 3] ^= 0x80
    faiss_file.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match=r"vectors-all\.faiss.*SHA-256.*unifar index"):
        Index.load(folder, model=model)
    faiss_file.write_bytes(bytes(data[:100]))
    err = cli_error(capsys, "search", folder, "graphs")
    assert "vectors-all.faiss" in err and "Traceback" not in err


def test_damaged_manifest_and_documents_name_the_file_and_the_repair(model, checkpoint, tmp_path,
                                                                    capsys):
    corpus = write_corpus(tmp_path, "jsonl")
    folder = tmp_path / "idx"
    args = ("encode", corpus, "--model", checkpoint, "--out", folder, "--no-progress")
    run_cli(capsys, *args)
    run_cli(capsys, "index", folder)
    docs = folder / "documents.jsonl"
    docs.write_bytes(docs.read_bytes()[:-40])  # truncated
    err = cli_error(capsys, "search", folder, "graphs")
    assert "documents.jsonl" in err and "unifar encode" in err
    out = run_cli(capsys, *args)  # the same command repairs it: no "already complete" loop
    assert "already complete" not in out and "encoded 20 papers" in out
    assert len(run_cli(capsys, "search", folder, "graphs", "-k", 3).splitlines()) == 4
    manifest = folder / "manifest.json"
    manifest.write_text(manifest.read_text()[:50])
    err = cli_error(capsys, "search", folder, "graphs")
    assert "manifest.json: not readable JSON" in err and "--overwrite" in err
    assert "not readable JSON" in cli_error(capsys, *args)
    run_cli(capsys, *args, "--overwrite")
    assert read_encoding(folder).manifest["complete"]


# ----- 4: options are finite and in range, ids as written ---------------------------------------
def test_search_options_are_checked_in_the_api_and_the_cli(model, checkpoint, tmp_path, capsys):
    index = Index(model).add(papers(8)).build()
    for kw, match in (
        ({"hybrid": float("nan")}, "hybrid must be a finite number"),
        ({"hybrid": float("inf")}, "hybrid must be a finite number"),
        ({"hybrid": -5}, "hybrid must be a finite number >= 0"),
        ({"depth": 0}, "depth must be a whole number >= 1"),
        ({"depth": -3}, "depth must be a whole number >= 1"),
        ({"k": 2.5}, "k must be a whole number >= 1, got 2.5"),
        ({"k": True}, "k must be a whole number"),
    ):
        with pytest.raises(ValueError, match=match):
            index.search("graphs", **kw)
    folder = indexed(encoded(tmp_path, model))
    for value in ("nan", "inf", "-inf"):
        err = cli_error(capsys, "search", folder, "graphs", f"--hybrid={value}")
        assert "--hybrid must be a finite number >= 0" in err
    assert "--depth must be a whole number >= 1" in cli_error(
        capsys, "search", folder, "graphs", "--hybrid", "0.25", "--depth", "-3")


def test_an_integer_id_finds_its_paper(model):
    rows = [dict(r, id=1580 + i) for i, r in enumerate(papers(6))]
    index = Index(model).add(rows).build()
    assert index.ids[:2] == ["1580", "1581"]
    hits = index.search(like=1582, k=3)
    assert "1582" not in [h.id for h in hits] and len(hits) == 3
    assert index.explain(None, 1583, like=1582)["document"]["id"] == "1583"


# ----- 5: nothing of the user's is deleted ------------------------------------------------------
def test_save_never_deletes_a_users_files(model, tmp_path):
    index = Index(model).add(papers(6)).build()
    mine = tmp_path / "mine"
    (mine / "sub").mkdir(parents=True)
    (mine / "important.txt").write_text("keep me")
    (mine / "sub" / "thesis.tex").write_text("\\documentclass{article}")
    with pytest.raises(FileExistsError, match=r"important\.txt, sub.*nothing in it is replaced"):
        index.save(mine)
    assert (mine / "important.txt").read_text() == "keep me"
    assert (mine / "sub" / "thesis.tex").is_file()
    a_file = tmp_path / "a-file.txt"
    a_file.write_text("notes")
    with pytest.raises(FileExistsError, match="is a file, not a folder"):
        index.save(a_file)
    assert a_file.read_text() == "notes"
    saved = index.save(tmp_path / "new")
    index.add([dict(papers(7)[6], id="extra")]).build()
    index.save(saved)  # unifar's own folder: replaced
    assert len(Index.load(saved, model=model)) == 7
    assert sorted(p.name for p in saved.iterdir() if p.name != ".verified.json") == [
        ".lock", "chunks", "documents.jsonl", "index", "manifest.json"]


def test_encode_out_refuses_a_users_folder_and_a_file(model, checkpoint, tmp_path, capsys):
    corpus = write_corpus(tmp_path, "jsonl")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "important.txt").write_text("keep me")
    err = cli_error(capsys, "encode", corpus, "--model", checkpoint, "--out", mine, "--overwrite")
    assert "important.txt" in err and (mine / "important.txt").read_text() == "keep me"
    assert sorted(p.name for p in mine.iterdir()) == ["important.txt"]
    a_file = tmp_path / "a-file.txt"
    a_file.write_text("notes")
    err = cli_error(capsys, "encode", corpus, "--model", checkpoint, "--out", a_file)
    assert "is a file, not a folder" in err and "Traceback" not in err


# ----- 6, 7: what used to end in a traceback or an unclear message -------------------------------
def test_ivf_with_more_cells_than_papers_is_a_clear_error(model, tmp_path, capsys):
    folder = encoded(tmp_path, model, papers(10))
    err = cli_error(capsys, "index", folder, "--backend", "ivf", "--nlist", 50)
    assert "--nlist 50: more IVF cells than papers (10)" in err


def test_a_corpus_without_result_sentences_indexes_and_searches(model, tmp_path):
    rows = [dict(r, labels=["background" if x == "result" else x for x in r["labels"]])
            for r in papers(10)]
    folder = indexed(encoded(tmp_path, model, rows))
    index = Index.load(folder, model=model)
    hits = index.search("mean average precision", facet="result", hybrid=0.25, k=3)
    dense = index.search("mean average precision", facet="result", k=3)
    assert [h.id for h in hits] == [h.id for h in dense]  # BM25 has nothing to add: all 0
    assert {h.bm25 for h in hits} == {0.0}


def test_the_hub_id_of_a_shipped_base_is_the_same_model(model):
    named = dataclasses.replace(model.config, base_model="minilm")
    hub = dataclasses.replace(model.config, base_model="sentence-transformers/all-MiniLM-L6-v2")
    digests = []
    for config in (named, hub):
        model.config = config
        digests.append(model_digest(model))
    assert digests[0] == digests[1]


def test_a_loaded_index_without_labels_adds_papers_without_a_labeller(model, tmp_path):
    folder = tmp_path / "idx"
    Index(model, use_labels=False).add(papers(6)).build().save(folder)
    again = Index.load(folder, model=model)
    again.add([{"id": "new", "title": "A new paper", "abstract": "It has no labels. None at all."}])
    assert len(again) == 7 and set(again.documents[-1]["labels"]) == {None}


def test_anchors_made_from_words_do_not_tie_an_index_to_a_thread_count(make_model):
    """Untrained anchors are a forward pass, whose last bits depend on the CPU and its threads;
    two such models are one model, a trained anchor is another."""
    import torch

    a, b = make_model(), make_model()
    with torch.no_grad():  # b's anchors as another machine computes them: 1 ulp away
        b.anchors.copy_(torch.nextafter(b.anchors, torch.full_like(b.anchors, 10.0)))
    b.anchors_from_words = b.anchors.detach().clone()
    assert not torch.equal(a.anchors, b.anchors) and model_digest(a) == model_digest(b)
    with torch.no_grad():
        b.anchors.add_(0.01)  # trained: no longer the words' anchors
    assert model_digest(a) != model_digest(b)
