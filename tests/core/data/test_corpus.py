"""Text corpus reader: both formats, the bundled sample, every validation error, the splitter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ptm_core.data import (
    CorpusError,
    Document,
    corpus_files,
    corpus_stats,
    iter_text_corpus,
    read_text_corpus,
    split_sentences,
)

REPO = Path(__file__).resolve().parents[3]
SAMPLE = REPO / "data_specs" / "text_corpus" / "sample"


def _write(path: Path, content: str | bytes) -> Path:
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return path


def _jsonl(*records: object) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


# ---------------------------------------------------------------- reading


def test_read_txt(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "books.txt",
        "\ufeffFirst document, first sentence.\n"
        "# Not a comment: this hash line is text.\n"
        "\n"
        "   \t \n"
        "\n"
        "Second document.\r\n"
        "It has\ttabs and CRLF endings.\r\n"
        "  Padded sentence.  \n"
        "\n"
        "Third document without a final newline.",
    )
    docs = read_text_corpus(path)
    assert [d.sentences for d in docs] == [
        ("First document, first sentence.", "# Not a comment: this hash line is text."),
        ("Second document.", "It has\ttabs and CRLF endings.", "Padded sentence."),
        ("Third document without a final newline.",),
    ]
    assert [d.source for d in docs] == [f"{path}:1", f"{path}:6", f"{path}:10"]
    assert [d.doc_id for d in docs] == ["books.txt#0", "books.txt#1", "books.txt#2"]
    assert corpus_stats(docs) == {
        "documents": 3,
        "sentences": 6,
        "characters": sum(len(s) for d in docs for s in d.sentences),
    }


def test_read_jsonl(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "news.jsonl",
        _jsonl(
            {"id": "a", "text": "Dr. Smith visited Vienna. She liked it!", "lang": "en"},
            {"text": "No id here. Two sentences."},
        )
        + "\n"
        + _jsonl({"id": 7, "text": "Line one\nstill one. New one.\n\nparagraph break"}),
    )
    docs = read_text_corpus(path)
    assert docs == [
        Document(("Dr. Smith visited Vienna.", "She liked it!"), f"{path}:1", "a"),
        Document(("No id here.", "Two sentences."), f"{path}:2", "news.jsonl#1"),
        Document(("Line one still one.", "New one.", "paragraph break"), f"{path}:4", "7"),
    ]


def test_directory_and_list(tmp_path: Path) -> None:
    _write(tmp_path / "b.txt", "B one.\n\nB two.\n")
    _write(tmp_path / "a.jsonl", _jsonl({"text": "A one."}))
    _write(tmp_path / "README.md", "not a corpus\n")
    _write(tmp_path / ".hidden.txt", "\x00 would fail if read\n")
    (tmp_path / "sub").mkdir()
    _write(tmp_path / "sub" / "c.txt", "C one.\n")
    assert corpus_files(tmp_path) == [tmp_path / "a.jsonl", tmp_path / "b.txt"]
    docs = read_text_corpus(tmp_path)
    assert [d.doc_id for d in docs] == ["a.jsonl#0", "b.txt#0", "b.txt#1"]
    both = read_text_corpus([tmp_path / "sub" / "c.txt", str(tmp_path)])
    assert [d.sentences[0] for d in both] == ["C one.", "A one.", "B one.", "B two."]


def test_iter_is_lazy(tmp_path: Path) -> None:
    path = _write(tmp_path / "x.txt", "Good sentence.\n\nAnother good one.\nBad \x00 one.\n")
    stream = iter_text_corpus(path)
    assert next(stream).sentences == ("Good sentence.",)
    with pytest.raises(CorpusError, match=r"x\.txt:4:"):
        next(stream)


# ---------------------------------------------------------------- the bundled sample


def test_sample_txt_counts_match_file() -> None:
    path = SAMPLE / "corpus.txt"
    raw = path.read_text(encoding="utf-8")
    blocks = [b for b in raw.split("\n\n") if b.strip()]
    docs = read_text_corpus(path)
    assert len(docs) == len(blocks) >= 25
    assert corpus_stats(docs)["sentences"] == len([x for x in raw.splitlines() if x]) >= 400
    for doc in docs:
        assert 10 <= len(doc.sentences) <= 20, doc.source
        for sentence in doc.sentences:
            assert 8 <= len(sentence.split()) <= 30, sentence


def test_sample_sentences_survive_the_splitter() -> None:
    # Each line is one sentence, and a document re-joined splits back into the same lines.
    for doc in read_text_corpus(SAMPLE / "corpus.txt"):
        assert split_sentences(" ".join(doc.sentences)) == list(doc.sentences), doc.source


def test_sample_jsonl_and_directory() -> None:
    path = SAMPLE / "corpus.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    docs = read_text_corpus(path)
    assert len(docs) == len(lines) == 5
    assert all(len(d.sentences) >= 4 for d in docs)
    assert docs[0].doc_id == json.loads(lines[0])["id"]
    everything = read_text_corpus(SAMPLE)
    assert len(everything) == len(docs) + len(read_text_corpus(SAMPLE / "corpus.txt"))
    assert len({d.doc_id for d in everything}) == len(everything)


# ---------------------------------------------------------------- errors


ERROR_CASES: dict[str, tuple[str, str | bytes, int, str]] = {
    "invalid_utf8": ("c.txt", b"Fine.\nAlso fine.\nBroken \xff byte.\n", 3, "encoding"),
    "nul_in_txt": ("c.txt", "One.\n\nTwo.\nThree \x00 four.\n", 4, "sentence"),
    "form_feed_in_txt": ("c.txt", "One.\n\x0c\n", 2, "sentence"),
    "invalid_json": ("c.jsonl", _jsonl({"text": "ok"}) + '{"text": "unterminated}\n', 2, "json"),
    "json_not_object": ("c.jsonl", _jsonl({"text": "ok"}, {"text": "ok"}, ["text"]), 3, "json"),
    "missing_text": ("c.jsonl", _jsonl({"text": "ok"}, {"body": "wrong field"}), 2, "text"),
    "text_not_string": ("c.jsonl", _jsonl({"text": 42}), 1, "text"),
    "text_null": ("c.jsonl", _jsonl({"text": "ok"}, {"text": None}), 2, "text"),
    "text_empty": ("c.jsonl", "\n" + _jsonl({"text": "  \n "}), 2, "text"),
    "nul_in_json_text": ("c.jsonl", _jsonl({"text": "ok"}, {"text": "a\u0000b"}), 2, "text"),
    "bad_id": ("c.jsonl", _jsonl({"text": "ok", "id": ["x"]}), 1, "id"),
    "bool_id": ("c.jsonl", _jsonl({"text": "ok", "id": True}), 1, "id"),
    "duplicate_id": (
        "c.jsonl",
        _jsonl({"text": "a", "id": "d"}, {"text": "b", "id": "d"}),
        2,
        "id",
    ),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_error_names_file_line_and_field(tmp_path: Path, case: str) -> None:
    name, content, line, field = ERROR_CASES[case]
    path = _write(tmp_path / name, content)
    with pytest.raises(CorpusError) as err:
        read_text_corpus(path)
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert f"(field '{field}'); " in message, message
    assert (err.value.line, err.value.field) == (line, field)
    assert isinstance(err.value, ValueError)


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "absent.txt"
    with pytest.raises(CorpusError, match="corpus file not found") as err:
        read_text_corpus(missing)
    assert str(err.value).startswith(f"{missing}: ")
    assert ".txt or .jsonl" in str(err.value)


def test_unknown_extension(tmp_path: Path) -> None:
    path = _write(tmp_path / "data.csv", "a,b\n")
    with pytest.raises(CorpusError, match=r"unknown corpus extension '\.csv' \(field 'path'\)"):
        read_text_corpus(path)


def test_directory_without_corpus_files(tmp_path: Path) -> None:
    _write(tmp_path / "notes.md", "hello\n")
    with pytest.raises(CorpusError, match=r"no \.txt or \.jsonl file") as err:
        read_text_corpus(tmp_path)
    assert str(tmp_path) in str(err.value)


def test_empty_corpus_names_every_file(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.txt", "\n  \n\n")
    b = _write(tmp_path / "b.jsonl", "\n")
    with pytest.raises(CorpusError, match="no sentences") as err:
        read_text_corpus([a, b])
    assert str(a) in str(err.value) and str(b) in str(err.value)
    # One empty file beside a non-empty one is fine.
    _write(tmp_path / "c.txt", "Some text.\n")
    assert len(read_text_corpus(tmp_path)) == 1


def test_duplicate_ids_across_files(tmp_path: Path) -> None:
    _write(tmp_path / "a.jsonl", _jsonl({"text": "one", "id": "same"}))
    second = _write(tmp_path / "b.jsonl", _jsonl({"text": "x"}, {"text": "two", "id": "same"}))
    with pytest.raises(CorpusError, match=r"already used at .*a\.jsonl:1") as err:
        read_text_corpus(tmp_path)
    assert str(err.value).startswith(f"{second}:2: ")


# ---------------------------------------------------------------- sentence splitter


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
        ("Dr. Watson met Mrs. Hudson. They talked.", ["Dr. Watson met Mrs. Hudson.", "They talked."]),
        ("Prices rose in the U.S. and the U.K. last year.", ["Prices rose in the U.S. and the U.K. last year."]),
        ("Use a tool, e.g. Python. It helps, i.e. a lot.", ["Use a tool, e.g. Python.", "It helps, i.e. a lot."]),
        ("J. R. R. Tolkien wrote it. So did I. Then we ate.", ["J. R. R. Tolkien wrote it.", "So did I.", "Then we ate."]),
        ("See Fig. 3 and No. 5. She said no. Then left.", ["See Fig. 3 and No. 5.", "She said no.", "Then left."]),
        ("Pi is 3.14 roughly. 42 is next.", ["Pi is 3.14 roughly.", "42 is next."]),
        ('He said "Stop!" Then ran. "Why?" she asked.', ['He said "Stop!"', "Then ran.", '"Why?" she asked.']),
        ("It ended... Everyone left. (See Fig. 3.) Done.", ["It ended...", "Everyone left.", "(See Fig. 3.)", "Done."]),
        ("lower case after a stop. stays together", ["lower case after a stop. stays together"]),
        ("Über alles. Émile came. Ça va.", ["Über alles.", "Émile came.", "Ça va."]),
        ("Wrapped\nline here. Next\n\nparagraph", ["Wrapped line here.", "Next", "paragraph"]),
        ("Smith et al. Reported it.", ["Smith et al. Reported it."]),
        ("  ", []),
    ],
)  # fmt: skip
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected
