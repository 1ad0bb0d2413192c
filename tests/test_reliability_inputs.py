"""Bad input files and text (issue 20, area "inputs"): non-English sentence splitting, an empty
``sentences`` list beside an abstract, a manifest that is not an object, invalid UTF-8, a torn
mean-pooling cache. Good input keeps its old behaviour (the English splits are pinned here too)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from unifar.construction.ftu import read_triplets
from unifar.datasets.ftu import FTU
from unifar.datasets.ftu_files import load_ftus, write_ftus
from unifar.datasets.readers import iter_jsonl, read_json
from unifar.text import normalize_document, split_sentences


# ----- 1. sentence splitting beyond ASCII -------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("Η μέθοδος λειτουργεί καλά. Τα αποτελέσματα βελτιώνονται! Γιατί; Δεν ξέρουμε.",
     ["Η μέθοδος λειτουργεί καλά.", "Τα αποτελέσματα βελτιώνονται!", "Γιατί; Δεν ξέρουμε."]),  # Greek
    ("Мы изучаем графы. Результаты улучшаются на 3.5%. Это хорошо?", ["Мы изучаем графы.",
     "Результаты улучшаются на 3.5%.", "Это хорошо?"]),  # Cyrillic
    ("Nous étudions les graphes. Élan vital est un concept. Über alles? Ça marche.",
     ["Nous étudions les graphes.", "Élan vital est un concept.", "Über alles?", "Ça marche."]),  # accented Latin
    ("我们研究图神经网络。结果很好！真的吗？是的。", ["我们研究图神经网络。", "结果很好！", "真的吗？", "是的。"]),  # CJK, no spaces
    ("本文提出方法。 「结果很好！」他说。最后", ["本文提出方法。", "「结果很好！」", "他说。", "最后"]),  # closers stay
    ("日本語の文です。次の文！", ["日本語の文です。", "次の文！"]),  # kana
    ("We study graphs. Это тест. 我们研究图。Results improve. Ωmega wins.",
     ["We study graphs.", "Это тест.", "我们研究图。", "Results improve.", "Ωmega wins."]),  # mixed
], ids=["greek", "cyrillic", "accented-latin", "cjk", "cjk-closers", "kana", "mixed"])
def test_split_sentences_handles_unicode_scripts(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


@pytest.mark.parametrize("text, expected", [
    # the old rules, pinned: abbreviations, initials, digits, quotes, lower-case starts
    ("We study graphs, e.g. trees (Smith et al. 2020). Results improve by 3.5%. Is it good? Yes.",
     ["We study graphs, e.g. trees (Smith et al. 2020).", "Results improve by 3.5%.", "Is it good?", "Yes."]),
    ('He said "Yes." Then he left. (See Fig. 2.) The end.', ['He said "Yes.', "Then he left.", "(See Fig. 2.) The end."]),
    ("experimental study . an experimental study of a wing . the results", ["experimental study . an experimental study of a wing . the results"]),
    ("J. Doe wrote it. 42 runs followed.", ["J. Doe wrote it.", "42 runs followed."]),
    ("A model.” The next one.", ["A model.” The next one."]),
], ids=["abbreviations", "quotes", "lower-case", "initial-digit", "curly-quote"])
def test_split_sentences_english_unchanged(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


# ----- 2. an empty sentence list beside an abstract ---------------------------------------------
def test_empty_sentences_with_an_abstract_uses_the_abstract(make_model) -> None:
    doc = {"id": "d7", "title": "T", "sentences": [], "abstract": "One thing. Two things."}
    assert normalize_document(doc, 7) == ("T", ["One thing.", "Two things."])
    model = make_model()
    (item,) = model.tokenize_documents([doc])
    assert item.units == ["T", "One thing.", "Two things."]
    # unchanged: sentences win when not empty; [] without an abstract is a title-only document;
    # an empty abstract gives no sentences; neither field is still an error
    assert normalize_document({"title": "T", "sentences": ["S."], "abstract": "A. B."}) == ("T", ["S."])
    assert normalize_document({"title": "T", "sentences": []}) == ("T", [])
    assert normalize_document({"title": "T", "sentences": [], "abstract": None}) == ("T", [])
    assert normalize_document({"title": "T", "sentences": [], "abstract": "  "}) == ("T", [])
    with pytest.raises(KeyError, match="document 3: needs a 'sentences' list or an 'abstract'"):
        normalize_document({"title": "T"}, 3)
    with pytest.raises(TypeError, match="document 4: field 'abstract' must be a string"):
        normalize_document({"title": "T", "sentences": [], "abstract": 5}, 4)


def test_triplet_side_with_empty_sentences_uses_the_abstract() -> None:
    side = {"corpus_id": 1, "title": "Q", "sentences": [], "abstract": "First part. Second part."}
    rec = {"query": side, "pos": {"corpus_id": 2, "title": "P", "abstract": "X."},
           "neg": {"corpus_id": 3, "title": "N", "sentences": ["Kept as is."], "abstract": "Ignored. Really."}}
    _, docs = read_triplets([rec], facet="method")
    assert docs["1"]["sentences"] == ["First part.", "Second part."]
    assert docs["3"]["sentences"] == ["Kept as is."]


# ----- 3./4. manifests that are not objects; invalid UTF-8 ---------------------------------------
def _ftu_folder(tmp_path: Path) -> Path:
    docs = {i: {"id": i, "title": f"Title {i}", "sentences": ["A sentence.", "Another one."],
                "labels": ["method", None], "source": "t"} for i in ("q", "a", "x")}
    ftus = [FTU("q", positives={"method": ["a"]}, negatives={"method": ["x"]})]
    return write_ftus(tmp_path / "ftus", ftus, docs)


@pytest.mark.parametrize("content", ["[1, 2]", '"text"', "3"])
def test_ftu_manifest_that_is_not_an_object_names_the_file(tmp_path: Path, content: str) -> None:
    folder = _ftu_folder(tmp_path)
    (folder / "manifest.json").write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=r"manifest\.json: expected a JSON object .*got (list|str|int)"):
        load_ftus(folder)


@pytest.mark.parametrize("name, line", [("documents.jsonl", 2), ("ftus.jsonl", 1), ("manifest.json", 2)])
def test_ftu_file_with_invalid_utf8_names_file_and_line(tmp_path: Path, name: str, line: int) -> None:
    folder = _ftu_folder(tmp_path)
    path = folder / name
    lines = path.read_bytes().split(b"\n")
    lines[line - 1] = lines[line - 1].replace(b"e", b"\xff", 1)  # one byte a UTF-8 decoder rejects
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(ValueError, match=rf"{name}:{line}: invalid UTF-8 \(byte b'\\xff' at column \d+"):
        load_ftus(folder, verify_hashes=False)


def test_readers_name_file_and_line_of_invalid_utf8(tmp_path: Path) -> None:
    jl = tmp_path / "records.jsonl"
    jl.write_bytes(b'{"a": "ok"}\n{"a": "fine"}\n{"a": "caf\xe9"}\n')  # Latin-1, not UTF-8
    with pytest.raises(ValueError, match=r"records\.jsonl:3: invalid UTF-8"):
        list(iter_jsonl(jl))
    js = tmp_path / "data.json"
    js.write_bytes(b'{\n  "a": "ok",\n  "b": "\xc3"\n}\n')  # a truncated two-byte sequence
    with pytest.raises(ValueError, match=r"data\.json:3: invalid UTF-8"):
        read_json(js)
    tr = tmp_path / "triplets.jsonl"
    tr.write_bytes(b'{"query_id": "q", "pos_id": "a", "neg_id": "\x80", "facet": "method"}\n')
    with pytest.raises(ValueError, match=r"triplets\.jsonl:1: invalid UTF-8"):
        read_triplets(tr)
    # good files read as before
    jl.write_text('{"a": "café"}\n\n{"a": "b"}\n', encoding="utf-8")
    assert list(iter_jsonl(jl)) == [(1, {"a": "café"}), (3, {"a": "b"})]


# ----- 5. a torn mean-pooling cache --------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_encoder_dir(tmp_path_factory: pytest.TempPathFactory, tokenizer) -> Path:
    """A tiny random BERT folder with the shipped MiniLM tokenizer (conftest's ``tokenizer``)."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128)
    d = tmp_path_factory.mktemp("tiny_bert")
    BertModel(cfg).save_pretrained(d)
    tokenizer.save_pretrained(d)
    return d


@pytest.mark.parametrize("keep", [0, 8, 120, -1])
def test_truncated_mean_pooling_cache_warns_and_is_rewritten(tiny_encoder_dir: Path, tmp_path: Path, keep: int) -> None:
    from unifar.evaluation.mean_pooling import MeanPoolingEncoder

    texts = [f"text number {i}" for i in range(6)]
    plain = MeanPoolingEncoder(str(tiny_encoder_dir), max_length=64, device="cpu", show_progress=False)
    uncached = plain.encode(texts)
    cache = tmp_path / "cache"
    enc = MeanPoolingEncoder(str(tiny_encoder_dir), max_length=64, device="cpu", show_progress=False, cache_dir=cache)
    enc.encode(texts)
    (path,) = cache.glob("mean-rows-*.safetensors")
    whole = path.read_bytes()
    path.write_bytes(whole[:keep])  # an interrupted copy or write (keep=-1: the last byte lost)
    with pytest.warns(UserWarning, match=rf"{path.name}: unreadable embedding cache"):
        again = enc.encode(texts)
    torch.testing.assert_close(again, uncached)
    assert len(path.read_bytes()) == len(whole)  # rewritten whole
    enc._encode = lambda _texts: pytest.fail("the rewritten cache was not used")  # type: ignore[method-assign]
    torch.testing.assert_close(enc.encode(texts), uncached)


def test_document_text_uses_the_abstract_when_there_are_no_sentences():
    from unifar.evaluation.texts import document_text

    assert document_text({"title": "Title", "abstract": "One. Two."}, " ") == "Title One. Two."
    assert document_text({"title": "Title", "sentences": [], "abstract": "One."}, "[SEP]") == "Title[SEP]One."
    assert document_text({"title": "Title", "sentences": ["S."], "abstract": "ignored"}, " ") == "Title S."
