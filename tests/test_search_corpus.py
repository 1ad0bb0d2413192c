"""``unifar.search.corpus.read_corpus``: a corpus kept as written; errors name file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from unifar.search.corpus import CorpusError, read_corpus


def jsonl(path: Path, *rows: dict) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def csv_file(path: Path, *lines: str) -> Path:
    text = "id,title,abstract\n" + "".join(line + "\n" for line in lines)
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_ids_are_kept_as_written(tmp_path):
    rows = [f"{i:03d},T,Text." for i in range(10)] + ["01,T,A.", "1,T,B."]
    path = csv_file(tmp_path / "c.csv", *rows)
    ids = [d["id"] for d in read_corpus(path).documents]
    assert ids == [f"{i:03d}" for i in range(10)] + ["01", "1"]  # "01" and "1": two papers
    csv_file(path, "1,T,A.", " 1.10 ,T,B.", "2,T,C.")  # not a float; outer spaces stripped
    assert [d["id"] for d in read_corpus(path).documents] == ["1", "1.10", "2"]


NA_LIKE = ["NA", "null", "None", "nan", "N/A", "NaN", "#N/A"]


def test_csv_na_like_titles_are_kept(tmp_path):
    path = csv_file(tmp_path / "c.csv", *(f"{i},{t},Text." for i, t in enumerate(NA_LIKE)))
    assert [d["title"] for d in read_corpus(path).documents] == NA_LIKE


def test_csv_empty_cells_are_empty_strings(tmp_path):
    path = csv_file(tmp_path / "c.csv", "1,,One.", "2,T,")
    with pytest.raises(CorpusError, match=r"c\.csv:line 3: no text"):  # an empty abstract
        read_corpus(path)
    docs = read_corpus(path, allow_title_only=True).documents
    assert [(d["title"], d["sentences"]) for d in docs] == [("", ["One."]), ("T", [])]


def _empty_parquet(path: Path) -> None:
    import datasets

    datasets.Dataset.from_dict({"id": [], "abstract": []}).to_parquet(str(path))


@pytest.mark.parametrize(
    "name, content",
    [
        ("c.jsonl", b""),
        ("c.jsonl", b"\n\n  \n"),
        ("c.csv", b""),
        ("c.csv", b"id,title,abstract\n"),
        ("c.csv", b"id,title,abstract\n\n   \n"),
        ("c.parquet", b""),
        ("c.parquet", None),  # a Parquet file with columns and no rows
    ],
)
def test_an_empty_corpus_names_the_file(tmp_path, name, content):
    path = tmp_path / name
    if content is None:
        _empty_parquet(path)
    else:
        path.write_bytes(content)
    with pytest.raises(CorpusError, match=rf"{name.replace('.', '[.]')}: the corpus is empty"):
        read_corpus(path)


@pytest.mark.parametrize(
    "name, content",
    [
        ("c.jsonl", b'{"id": "a", "abstract": "x."}\n\n{"id": "b", "abstract": "caf\xe9."}\n'),
        ("c.csv", b"id,title,abstract\na,t,x.\nb,caf\xe9,y.\n"),
    ],
)
def test_non_utf8_names_file_line_and_byte(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    col = 29 if name.endswith("jsonl") else 6
    message = rf"c[.]\w+:line 3: not UTF-8 text \(byte 0xe9 at column {col}\)"
    with pytest.raises(CorpusError, match=message):
        read_corpus(path)


def test_title_only_still_needs_a_title(tmp_path):
    path = jsonl(tmp_path / "c.jsonl", {"id": "a", "title": "A title"}, {"id": "b", "title": " "})
    with pytest.raises(CorpusError, match=r"c\.jsonl:line 2: no title and no text"):
        read_corpus(path, allow_title_only=True)
    jsonl(path, {"id": "a", "title": "A title"}, {"id": "b", "title": "B", "abstract": ""})
    docs = read_corpus(path, allow_title_only=True).documents
    assert [d["title"] for d in docs] == ["A title", "B"]


def test_a_decimal_id_is_refused_as_a_type(tmp_path):
    path = jsonl(tmp_path / "c.jsonl", {"id": 1, "abstract": "x."}, {"id": 1.5, "abstract": "y."})
    # one decimal id makes the whole column decimal: the line with the decimal is the one named
    with pytest.raises(CorpusError, match=r"c\.jsonl:line 2: 'id' must be a string or an integer"):
        read_corpus(path)
    jsonl(path, {"id": 3, "abstract": "x."}, {"id": "b", "abstract": "y."})
    assert [d["id"] for d in read_corpus(path).documents] == ["3", "b"]


def test_csv_blank_lines_do_not_shift_line_numbers(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("id,title,abstract\n\n1,T,One.\n   \n2,T,\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"c\.csv:line 5: no text"):
        read_corpus(path)
