"""SentiLARE's data: a labelled sentiment corpus, each text annotated once with word-level
knowledge and kept as flat arrays (one row per text)."""

from __future__ import annotations

import csv
import json
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ptm_core.tokenization import WordPieceTokenizer
from ptm_text.sentilr.knowledge import NEUTRAL, OTHER, KnowledgeAnnotator

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LabelledText:
    text: str
    label: str
    source: str  # "file:line", for errors


def read_labelled_corpus(
    paths: str | Path | Sequence[str | Path],
    *,
    text_field: str = "text",
    label_field: str = "label",
) -> list[LabelledText]:
    """Read labelled texts from ``.jsonl`` (one object per line) or ``.tsv``/``.csv`` files
    with a header row naming ``text_field`` and ``label_field``.

    Raises:
        FileNotFoundError / ValueError: naming the file, line and field that is wrong.
    """
    files = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    if not files:
        raise ValueError("sentilr data.corpus: no file given; pass a .jsonl or .tsv file")
    rows: list[LabelledText] = []
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(
                f"sentilr data.corpus: {path} does not exist; give a labelled .jsonl/.tsv file"
            )
        if path.suffix == ".jsonl":
            rows.extend(_read_jsonl(path, text_field, label_field))
        elif path.suffix in (".tsv", ".csv"):
            rows.extend(_read_table(path, text_field, label_field))
        else:
            raise ValueError(
                f"{path}: a labelled corpus is .jsonl ({{{text_field!r}: ..., {label_field!r}: "
                f"...}} per line) or .tsv/.csv with a header; got {path.suffix or 'no suffix'}"
            )
    if not rows:
        raise ValueError(f"sentilr data.corpus {[str(f) for f in files]}: no labelled text")
    return rows


def _read_jsonl(path: Path, text_field: str, label_field: str) -> Iterator[LabelledText]:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number}: not JSON ({error.msg})") from None
        yield _row(record, f"{path}:{number}", text_field, label_field)


def _read_table(path: Path, text_field: str, label_field: str) -> Iterator[LabelledText]:
    delimiter = "\t" if path.suffix == ".tsv" else ","
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter=delimiter, quoting=csv.QUOTE_NONE)
        header = reader.fieldnames or []
        for field in (text_field, label_field):
            if field not in header:
                raise ValueError(
                    f"{path}:1: the header {header} has no {field!r} column; set "
                    f"data.text_field / data.label_field to its column names"
                )
        for number, record in enumerate(reader, 2):
            yield _row(record, f"{path}:{number}", text_field, label_field)


def _row(record: Any, where: str, text_field: str, label_field: str) -> LabelledText:
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected an object with {text_field!r} and {label_field!r}")
    for field in (text_field, label_field):
        value = record.get(field)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise ValueError(f"{where}: field {field!r} is missing or empty")
    label = record[label_field]
    if isinstance(label, float) and label.is_integer():
        label = int(label)  # Yelp's 1.0 .. 5.0 stars
    return LabelledText(str(record[text_field]), str(label), where)


def label_names(rows: Sequence[LabelledText], given: Sequence[str] | None) -> list[str]:
    """The label names in id order: ``given``, else the corpus's sorted distinct labels."""
    found = sorted({row.label for row in rows})
    if given is None:
        if len(found) < 2:
            raise ValueError(f"sentilr data.corpus has one label ({found}); it needs >= 2")
        return found
    names = [str(name) for name in given]
    unknown = sorted(set(found) - set(names))
    if unknown:
        first = next(row.source for row in rows if row.label in unknown)
        raise ValueError(
            f"{first}: label {unknown[0]!r} is not in data.labels {names}; add it or fix the row"
        )
    return names


@dataclass(frozen=True)
class PieceKnowledge:
    """One text as pieces: ids, the 1-based word of each piece and its POS and polarity."""

    input_ids: list[int]
    words: list[int]
    pos: list[int]
    polarity: list[int]


def annotate_text(
    text: str, tokenizer: WordPieceTokenizer, annotator: KnowledgeAnnotator, max_length: int
) -> PieceKnowledge:
    """``[CLS] pieces [SEP]`` (at most ``max_length``) with each piece's word knowledge;
    words are the tokenizer's pre-tokenized words (whitespace and punctuation split), and
    every piece of a word carries the word's POS and polarity (as the reference's
    ``vectorize``)."""
    encoding = tokenizer.backend.encode(text, add_special_tokens=False)
    word_ids = [w if w is not None else -1 for w in encoding.word_ids]
    ids = list(encoding.ids)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for piece, word in enumerate(word_ids):
        first.setdefault(word, piece)
        last[word] = piece
    order = sorted(w for w in first if w >= 0)
    surfaces = [text[encoding.offsets[first[w]][0] : encoding.offsets[last[w]][1]] for w in order]
    knowledge = annotator(surfaces)
    rank = {w: i for i, w in enumerate(order)}
    keep = max_length - 2
    vocab = tokenizer.vocab_info
    pieces = [(p, rank.get(w, -1)) for p, w in zip(ids[:keep], word_ids[:keep], strict=True)]
    return PieceKnowledge(
        input_ids=[vocab.cls_id, *(p for p, _ in pieces), vocab.sep_id],
        words=[0, *(w + 1 for _, w in pieces), 0],
        pos=[OTHER, *(knowledge.pos[w] if w >= 0 else OTHER for _, w in pieces), OTHER],
        polarity=[
            NEUTRAL,
            *(knowledge.polarity[w] if w >= 0 else NEUTRAL for _, w in pieces),
            NEUTRAL,
        ],
    )


class LabelledExamples(Sequence[dict[str, Any]]):
    """Annotated rows in flat ``int32`` arrays with offsets; ``[i]`` builds example ``i``
    (``input_ids``, ``sentilr_word``, ``sentilr_pos``, ``sentilr_polarity``,
    ``sentilr_label``)."""

    def __init__(
        self,
        texts: Sequence[LabelledText],
        labels: Sequence[str],
        tokenizer: WordPieceTokenizer,
        annotator: KnowledgeAnnotator,
        max_length: int,
    ) -> None:
        label_id = {name: i for i, name in enumerate(labels)}
        columns: dict[str, list[int]] = {"ids": [], "words": [], "pos": [], "polarity": []}
        offsets = [0]
        self.labels = np.array([label_id[row.label] for row in texts], dtype=np.int64)
        start = last = time.monotonic()
        for number, row in enumerate(texts, 1):
            piece = annotate_text(row.text, tokenizer, annotator, max_length)
            columns["ids"] += piece.input_ids
            columns["words"] += piece.words
            columns["pos"] += piece.pos
            columns["polarity"] += piece.polarity
            offsets.append(len(columns["ids"]))
            if time.monotonic() - last > 10:
                last = time.monotonic()
                logger.info("sentilr: annotated %d/%d texts (%.0f/s)", number, len(texts),
                            number / (last - start))  # fmt: skip
        self.offsets = np.array(offsets, dtype=np.int64)
        self.columns = {k: np.array(v, dtype=np.int32) for k, v in columns.items()}

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, Any]:  # type: ignore[override]
        lo, hi = int(self.offsets[index]), int(self.offsets[index + 1])
        return {
            "input_ids": self.columns["ids"][lo:hi].tolist(),
            "sentilr_word": self.columns["words"][lo:hi].tolist(),
            "sentilr_pos": self.columns["pos"][lo:hi].tolist(),
            "sentilr_polarity": self.columns["polarity"][lo:hi].tolist(),
            "sentilr_label": int(self.labels[index]),
        }

    def statistics(self) -> dict[str, float]:
        """Pieces, words, and the shares of POS classes and polar words (logged)."""
        words = self.columns["words"] > 0
        pos = self.columns["pos"][words]
        polarity = self.columns["polarity"][words]
        return {
            "texts": float(len(self)),
            "pieces": float(words.sum()),
            "polar_piece_share": float((polarity != NEUTRAL).mean()) if words.any() else 0.0,
            "other_pos_share": float((pos == OTHER).mean()) if words.any() else 0.0,
        }
