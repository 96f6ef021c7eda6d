"""Bad inputs for every data spec, generated as mutations of small valid files.

Each :class:`Case` writes its files into a fresh folder and calls one reader (or ``ptm``
entry point) in-process. The valid files are generated here, with their own vocabulary and
shapes (never the bundled samples), and a mutation breaks one line or the whole file:
truncation, wrong field types, missing columns, NUL bytes, bad UTF-8, empty files, huge or
negative numbers, nesting too deep for the JSON parser.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Files = dict[str, bytes]
Reader = Callable[[Path], object]

DEEP = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
WORDS = [f"{a}{b}" for a in ("vor", "quil", "zept", "mab", "dru") for b in ("an", "ix", "oth")]


@dataclass(frozen=True)
class Case:
    """One bad input.

    Args:
        id: Test id, ``<spec>/<mutation>``.
        files: Relative path -> bytes, written before ``read`` runs.
        read: Called with the folder; must raise a ptm error.
        names: Text the message must hold (the file name, with ``:<line>`` when known).
        also: Further text the message must hold (a field or JSON path).
        output: A path (relative) that must not exist afterwards.
    """

    id: str
    files: Files
    read: Reader
    names: str
    also: tuple[str, ...] = field(default_factory=tuple)
    output: str | None = None


def _lines(rows: list[bytes]) -> bytes:
    return b"".join(row + b"\n" for row in rows)


def _line_mutations(
    spec: str,
    name: str,
    header: list[bytes],
    rows: list[bytes],
    bad: dict[str, bytes],
    read: Reader,
    *,
    at: tuple[int, ...] = (1, 4),
    extra: Files | None = None,
    output: str | None = None,
) -> Iterator[Case]:
    """Each bad row put in place of data row ``k`` (0-based) for each ``k`` in ``at``."""
    for mutation, row in bad.items():
        for k in at:
            body = [*header, *rows[:k], row, *rows[k + 1 :]]
            line = len(header) + k + 1
            files = {name: _lines(body), **(extra or {})}
            yield Case(f"{spec}/{mutation}@{line}", files, read, f"{name}:{line}", output=output)


def _file_mutations(
    spec: str, name: str, good: bytes, read: Reader, *, extra: Files | None = None
) -> Iterator[Case]:
    """Whole-file damage: empty, blank, UTF-16, binary, truncated inside a character."""
    for mutation, data in {
        "empty-file": b"",
        "only-blank-lines": b"\n\n  \n",
        "utf16": good.decode("utf-8").encode("utf-16"),
        "binary": bytes(range(256)) * 4,
        "cut-inside-utf8": good + "ï".encode()[:1],
    }.items():
        yield Case(f"{spec}/{mutation}", {name: data, **(extra or {})}, read, name)


# ---------------------------------------------------------------------- text corpora


def _jsonl_rows() -> list[bytes]:
    return [
        json.dumps({"text": f"The {w} hums. A {w} sleeps.", "id": f"n{i}"}).encode()
        for i, w in enumerate(WORDS[:8])
    ]


JSON_TEXT_BAD: dict[str, bytes] = {
    "not-json": b"the text is here",
    "cut-json": b'{"text": "The vor',
    "array": b"[1, 2]",
    "string": b'"just text"',
    "text-int": b'{"text": 5}',
    "text-null": b'{"text": null}',
    "text-empty": b'{"text": ""}',
    "text-blank": b'{"text": "   "}',
    "text-list": b'{"text": ["a"]}',
    "text-missing": b'{"id": "x1"}',
    "id-empty": b'{"text": "Fine.", "id": ""}',
    "id-bool": b'{"text": "Fine.", "id": true}',
    "id-list": b'{"text": "Fine.", "id": [1]}',
    "id-duplicate": b'{"text": "Fine.", "id": "n0"}',
    "nul": b'{"text": "a\\u0000b"}',
    "control": b'{"text": "a\\u0001b"}',
    "surrogate-high": b'{"text": "a\\ud800b"}',
    "surrogate-low": b'{"text": "b\\udfffa"}',
    "deep": DEEP,
    "bad-utf8": b'{"text": "caf\xe9"}',
    "raw-nul": b'{"text": "a\x00b"}',
}

TXT_BAD: dict[str, bytes] = {
    "nul": b"The vor\x00an hums.",
    "control": b"The vor\x01an hums.",
    "del": b"The vor\x7fan hums.",
    "bad-utf8": b"The caf\xe9 hums.",
    "cut-utf8": b"The caf\xc3",
    "lone-cr": b"The vor\ran hums.",
}


def text_corpus_cases() -> Iterator[Case]:
    from ptm_core.data.corpus import read_text_corpus

    def read(name: str) -> Reader:
        return lambda d: read_text_corpus(d / name)

    rows = _jsonl_rows()
    yield from _line_mutations("jsonl", "notes.jsonl", [], rows, JSON_TEXT_BAD, read("notes.jsonl"))
    yield from _file_mutations("jsonl", "notes.jsonl", _lines(rows), read("notes.jsonl"))
    txt = [f"The {w} hums.".encode() if i % 3 else b"" for i, w in enumerate(WORDS[:9], 1)]
    txt = [b"Opening line.", *txt]
    yield from _line_mutations("txt", "notes.txt", [], txt, TXT_BAD, read("notes.txt"), at=(0, 5))
    yield from _file_mutations("txt", "notes.txt", _lines(txt), read("notes.txt"))
    yield Case("txt/missing", {}, read("gone.txt"), "gone.txt")
    yield Case("txt/suffix", {"notes.csv": b"a,b\n"}, read("notes.csv"), "notes.csv")
    yield Case("txt/empty-folder", {"sub/.keep": b""}, lambda d: read_text_corpus(d / "sub"), "sub")


def prepared_corpus_cases() -> Iterator[Case]:
    """``ptm prepare`` on compressed, Arrow and Parquet inputs, and bad settings."""
    import io

    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq
    import zstandard

    from ptm_core.data.prepare import prepare_corpus
    from ptm_core.tokenization import SPECIAL_TOKENS

    vocab = ("\n".join([*SPECIAL_TOKENS, *WORDS, "the", "hums", "."]) + "\n").encode()

    def prepare(name: str, **settings: Any) -> Reader:
        def run(d: Path) -> None:
            options = {"tokenizer": d / "vocab.txt", "workers": 0, "progress": False}
            prepare_corpus([d / name], d / "out", **{**options, **settings})

        return run

    def case(mutation: str, name: str, data: bytes, where: str = "", **settings: Any) -> Case:
        files = {name: data, "vocab.txt": vocab}
        read = prepare(name, **settings)
        # A damaged stream is named as such, never "corpus holds no sentences".
        also = ("compression",) if name.endswith((".gz", ".zst")) and not where else ()
        return Case(
            f"prepare/{mutation}", files, read, name + where, also, output="out/manifest.json"
        )

    plain = _lines(
        [
            json.dumps({"text": f"The {w} hums {i}. A {w} sleeps.", "id": f"p{i}"}).encode()
            for i, w in enumerate(WORDS * 20)
        ]
    )
    gz = gzip.compress(plain)
    zst = zstandard.ZstdCompressor().compress(plain)
    for share in (0.1, 0.5, 0.9, 0.999):
        yield case(f"gz-cut-{share}", "d.jsonl.gz", gz[: int(len(gz) * share)])
        yield case(f"zst-cut-{share}", "d.jsonl.zst", zst[: int(len(zst) * share)])
        yield case(f"txt-zst-cut-{share}", "d.txt.zst", zst[: int(len(zst) * share)])
    yield case("gz-garbage", "d.jsonl.gz", b"\x1f\x8b\x08\x00" + bytes(range(200)))
    yield case("gz-not-gzip", "d.txt.gz", b"plain text, not gzip\n")
    yield case("zst-garbage", "d.jsonl.zst", b"\x28\xb5\x2f\xfd" + bytes(range(200)))
    yield case("zst-not-zstd", "d.txt.zst", b"plain text, not zstd\n")
    flipped = bytearray(gz)
    flipped[len(flipped) // 2] ^= 0xFF
    # The damage shows as a bad line before the CRC at the end is reached: file:line.
    yield case("gz-flipped-byte", "d.jsonl.gz", bytes(flipped), ":")
    bad_line = _lines([*_jsonl_rows(), b'{"text": 7}'])
    yield case("gz-bad-line", "d.jsonl.gz", gzip.compress(bad_line), ":9")
    yield case("zst-nul-line", "d.txt.zst", zstandard.ZstdCompressor().compress(b"a\x00b\n"), ":1")
    table = pa.table({"text": [f"The {w} hums." for w in WORDS * 20]})
    sink = io.BytesIO()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=50)
    arrow = sink.getvalue()
    for share in (0.05, 0.5, 0.95):
        yield case(f"arrow-cut-{share}", "d.arrow", arrow[: int(len(arrow) * share)])
    yield case("arrow-garbage", "d.arrow", b"ARROW1\x00\x00" + bytes(range(100)))
    yield case("arrow-empty", "d.arrow", b"")
    sink = io.BytesIO()
    pq.write_table(table, sink)
    parquet = sink.getvalue()
    yield case("parquet-cut", "d.parquet", parquet[: len(parquet) // 2])
    yield case("parquet-garbage", "d.parquet", b"PAR1" + bytes(range(64)) + b"PAR1")
    for column, values in {
        "nulls": ["The vor hums.", None],
        "ints": [1, 2],
        "nul": ["a\x00b"],
        "surrogate-free-control": ["a\x01b"],
    }.items():
        sink = io.BytesIO()
        with ipc.new_file(sink, pa.table({"text": values}).schema) as writer:
            writer.write_table(pa.table({"text": values}))
        yield case(f"arrow-{column}", "d.arrow", sink.getvalue())
    yield case("arrow-no-column", "d.arrow", arrow, text_field="body")
    yield case("jsonl-wrong-field", "d.jsonl", plain, ":1", text_field="body")
    for setting, value in {
        "vocab_size": 0,
        "workers": -3,
        "shard_bytes": 0,
        "tokenizer_sample_bytes": -1,
    }.items():
        yield Case(
            f"prepare/{setting}={value}",
            {"d.jsonl": plain},
            lambda d, s=setting, v=value: prepare_corpus(
                [d / "d.jsonl"], d / "out", **{"workers": 0, "progress": False, s: v}
            ),
            setting,
            output="out",
        )
    yield Case(
        "prepare/vocab-below-alphabet",
        {"d.txt": "\n".join(f"The {w} hums." for w in WORDS).encode()},
        lambda d: prepare_corpus([d / "d.txt"], d / "out", vocab_size=9, workers=0),
        "vocab_size is 9",
        output="out/manifest.json",
    )
