"""The linked corpus (JSONL): documents, sentences and their linked mentions.

Specified in ``data_specs/linked_corpus/README.md``; produced by :func:`link_corpus` and
read (with validation) by :func:`read_linked_corpus`.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import itertools
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ptm_core.atomic import atomic_file
from ptm_core.data import iter_text_corpus
from ptm_core.data.lines import iter_lines
from ptm_core.data.text_cells import check_text, loads_json
from ptm_knowledge.kg.graph import KGError
from ptm_knowledge.linking.linker import EntityLinker, Mention


class LinkedCorpusError(KGError):
    """A linked-corpus file is malformed (message ``file:line: problem (field ...); fix``)."""


@dataclass(frozen=True)
class SentenceMention:
    """A mention inside one sentence: character span ``[start, end)`` and entity id."""

    sentence: int
    start: int
    end: int
    entity_id: str
    score: float | None = None


@dataclass
class LinkedDocument:
    """One document of a linked corpus."""

    doc_id: str
    sentences: list[str]
    mentions: list[SentenceMention] = field(default_factory=list)
    # Gold only: ``False`` marks a partial annotation (a link outside every gold mention is
    # unjudged, not wrong), as in ``ptm evaluate-linking``.
    complete: bool = True

    def sentence_mentions(self, index: int) -> list[tuple[int, int, str]]:
        """``(start, end, entity_id)`` of the mentions of sentence ``index``."""
        return [(m.start, m.end, m.entity_id) for m in self.mentions if m.sentence == index]

    def to_json(self) -> dict[str, Any]:
        mentions = []
        for m in self.mentions:
            item: dict[str, Any] = {
                "sentence": m.sentence,
                "start": m.start,
                "end": m.end,
                "text": self.sentences[m.sentence][m.start : m.end],
                "entity": m.entity_id,
            }
            if m.score is not None:
                item["score"] = round(m.score, 4)
            mentions.append(item)
        record: dict[str, Any] = {
            "id": self.doc_id,
            "sentences": self.sentences,
            "mentions": mentions,
        }
        if not self.complete:
            record["complete"] = False
        return record


def iter_linked_documents(
    documents: Iterable[tuple[str, Sequence[str]]], linker: EntityLinker, batch_size: int = 16
) -> Iterator[LinkedDocument]:
    """Link ``(doc_id, sentences)`` pairs as a stream; the whole document is the linker's
    context.

    Sentences are joined with newlines so ranking sees neighbouring sentences; no alias
    spans a newline, so every mention falls inside one sentence. At most ``batch_size``
    documents are held at once.
    """
    iterator = iter(documents)
    while batch := [(doc_id, list(s)) for doc_id, s in itertools.islice(iterator, batch_size)]:
        texts = ["\n".join(sentences) for _, sentences in batch]
        for (doc_id, sentences), mentions in zip(
            batch, linker.link_batch(texts, batch_size=batch_size), strict=True
        ):
            yield _placed(doc_id, sentences, mentions)


def _placed(doc_id: str, sentences: list[str], mentions: list[Mention]) -> LinkedDocument:
    """Move mentions of the newline-joined text into their sentences."""
    starts, position = [], 0
    for sentence in sentences:
        starts.append(position)
        position += len(sentence) + 1
    linked: list[SentenceMention] = []
    for m in mentions:
        index = bisect.bisect_right(starts, m.start) - 1
        linked.append(
            SentenceMention(
                index, m.start - starts[index], m.end - starts[index], m.entity_id, m.score
            )
        )
    return LinkedDocument(doc_id, sentences, linked)


def link_documents(
    documents: Iterable[tuple[str, Sequence[str]]], linker: EntityLinker, batch_size: int = 16
) -> list[LinkedDocument]:
    """Link ``(doc_id, sentences)`` pairs; :func:`iter_linked_documents` as a list."""
    return list(iter_linked_documents(documents, linker, batch_size))


def link_corpus(
    corpus: str | Path | Sequence[str | Path],
    linker: EntityLinker,
    output: str | Path,
    *,
    batch_size: int = 16,
) -> Path:
    """Link a text corpus (``data_specs/text_corpus``) and write a linked corpus (JSONL).

    Streams: documents are read, linked and written ``batch_size`` at a time, so memory
    does not grow with the corpus. The output appears atomically when the whole corpus is
    linked; a bad corpus line raises its ``CorpusError`` (file:line) and leaves ``output``
    as it was.

    Args:
        corpus: text-corpus file(s) or directory.
        linker: an :class:`EntityLinker`.
        output: the ``.jsonl`` file to write (atomically).
        batch_size: documents per ``nlp.pipe`` batch.

    Returns:
        ``output``.
    """
    documents = ((d.doc_id, d.sentences) for d in iter_text_corpus(corpus))
    return write_linked_corpus(iter_linked_documents(documents, linker, batch_size), output)


def link_corpus_with_kg(
    corpus: str | Path | Sequence[str | Path],
    kg: str | Path,
    output: str | Path,
    *,
    batch_size: int = 16,
    **linker_options: Any,
) -> Path:
    """Load a KG folder (``entities.tsv`` [+ ``triples.tsv``]), build an
    :class:`EntityLinker` with ``linker_options`` and link ``corpus`` into ``output``."""
    from ptm_knowledge.kg.load import load_knowledge_graph

    linker = EntityLinker(load_knowledge_graph(kg), **linker_options)
    return link_corpus(corpus, linker, output, batch_size=batch_size)


def linked_corpus_for(data: Any, output_dir: str | Path) -> Path:
    """The linked corpus a ``data`` block names, or its text corpus linked to its KG now.

    Args:
        data: the ``data`` settings (:class:`~ptm_knowledge.kg_corpus_settings.KGCorpusData`, or a
            config node with the same keys): ``linked_corpus`` wins; else ``corpus`` is
            linked to ``kg`` with the ``linker`` settings into
            ``<output_dir>/linked_corpus.jsonl``.
        output_dir: the run folder.

    Raises:
        ValueError: neither ``data.linked_corpus`` nor ``data.corpus`` and ``data.kg``.
    """
    if data.linked_corpus:
        return Path(data.linked_corpus)
    if not data.corpus or not data.kg:
        raise ValueError(
            "data.linked_corpus is null, so data.corpus and data.kg must name the text corpus "
            "and the KG it is linked to (or set data.linked_corpus / data.prepared)"
        )
    linker = data.linker
    if dataclasses.is_dataclass(linker) and not isinstance(linker, type):
        options = dataclasses.asdict(linker)
    else:
        options = dict(linker or {})
    return link_corpus_with_kg(
        data.corpus, data.kg, Path(output_dir) / "linked_corpus.jsonl", **options
    )


# Characters that ``str.splitlines`` (and JavaScript before ES2019) treat as line breaks but
# ``json.dumps(ensure_ascii=False)`` writes raw; escaped, every line-based reader sees one
# record per line. JSON escapes the C0 controls (\x0b, \x0c, \x1c-\x1e) by itself.
_LINE_BREAK_ESCAPES = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def linked_corpus_line(document: LinkedDocument) -> str:
    """One record of the linked corpus, with its ``\\n``."""
    text = json.dumps(document.to_json(), ensure_ascii=False)
    return text.translate(_LINE_BREAK_ESCAPES) + "\n"


@contextlib.contextmanager
def atomic_text_writer(path: str | Path) -> Iterator[TextIO]:
    """A UTF-8 text file handle whose content replaces ``path`` only when the block ends
    without an exception (:func:`ptm_core.atomic.atomic_file`); streamed, never held in
    memory."""
    with atomic_file(path) as tmp, tmp.open("w", encoding="utf-8", newline="") as handle:
        yield handle


def write_linked_corpus(documents: Iterable[LinkedDocument], output: str | Path) -> Path:
    """Write documents as JSON lines, atomically, streaming (one record in memory at once).

    U+0085, U+2028 and U+2029 are written as JSON escapes (the text is unchanged once
    decoded), so each record stays on one line for any line splitter.
    """
    with atomic_text_writer(output) as handle:
        for document in documents:
            handle.write(linked_corpus_line(document))
    return Path(output)


def _fail(path: Path, line: int, field: str, problem: str, fix: str) -> LinkedCorpusError:
    return LinkedCorpusError(path, line, field, problem, fix)


def read_linked_corpus(
    path: str | Path, entity_ids: Iterable[str] | None = None
) -> list[LinkedDocument]:
    """Read and validate a linked corpus.

    Args:
        path: the ``.jsonl`` file.
        entity_ids: if given, every mention's entity must be one of them.

    Raises:
        LinkedCorpusError: a missing file, invalid UTF-8, bad JSON, missing fields, a NUL
            in a sentence, a span outside its sentence or overlapping another, text that
            does not match the span, a score outside [0, 1], an unknown entity or a
            duplicate document id; the message names file, line and field.
    """
    path = Path(path)
    known = set(entity_ids) if entity_ids is not None else None
    documents: list[LinkedDocument] = []
    seen: dict[str, int] = {}
    # Split on "\n" only: U+2028/U+2029 may sit raw inside a JSON string of one record.
    for number, raw in iter_lines(path, LinkedCorpusError):
        if not raw.strip():
            continue
        record = loads_json(path, number, raw, "write one object per line", LinkedCorpusError)
        if not isinstance(record, dict):
            raise _fail(path, number, "json", "not a JSON object", "write one object per line")
        doc_id = record.get("id")
        if not isinstance(doc_id, str) or not doc_id:
            raise _fail(path, number, "id", "missing or empty document id", 'add "id": "..."')
        if doc_id in seen:
            raise _fail(
                path,
                number,
                "id",
                f"duplicate id {doc_id!r} (first on line {seen[doc_id]})",
                "use unique ids",
            )
        seen[doc_id] = number
        sentences = record.get("sentences")
        if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
            raise _fail(
                path, number, "sentences", "must be a list of strings", 'add "sentences": [...]'
            )
        for i, sentence in enumerate(sentences):
            if "\x00" in sentence:
                raise _fail(
                    path,
                    number,
                    f"sentences[{i}]",
                    f"NUL character (\\x00) at character {sentence.index(chr(0)) + 1}",
                    "remove it from the source text and link the corpus again",
                )
            check_text(path, number, f"sentences[{i}]", sentence, LinkedCorpusError)
        mentions: list[SentenceMention] = []
        for k, item in enumerate(record.get("mentions", [])):
            where = f"mentions[{k}]"
            try:
                index, start, end, entity = (
                    item["sentence"],
                    item["start"],
                    item["end"],
                    item["entity"],
                )
            except (KeyError, TypeError):
                raise _fail(
                    path, number, where, "needs sentence, start, end and entity", "add the keys"
                ) from None
            if not (isinstance(index, int) and 0 <= index < len(sentences)):
                raise _fail(
                    path,
                    number,
                    f"{where}.sentence",
                    f"no sentence {index!r}",
                    "use a 0-based sentence index",
                )
            if not (
                isinstance(start, int)
                and isinstance(end, int)
                and 0 <= start < end <= len(sentences[index])
            ):
                raise _fail(
                    path,
                    number,
                    f"{where}.start",
                    f"span [{start}, {end}) is outside sentence {index}",
                    "use character offsets inside the sentence",
                )
            text = item.get("text")
            if text is not None and sentences[index][start:end] != text:
                raise _fail(
                    path,
                    number,
                    f"{where}.text",
                    f"span reads {sentences[index][start:end]!r}, not {text!r}",
                    "fix the offsets or the text",
                )
            if known is not None and entity not in known:
                raise _fail(
                    path,
                    number,
                    f"{where}.entity",
                    f"unknown entity id {entity!r}",
                    "use an id of the entity table",
                )
            score = item.get("score")
            if score is not None and not (
                isinstance(score, int | float)
                and not isinstance(score, bool)
                and 0.0 <= score <= 1.0
            ):
                raise _fail(
                    path,
                    number,
                    f"{where}.score",
                    f"score {score!r} is not a number in [0, 1]",
                    "write the linker's probability (0 to 1) or leave score out",
                )
            mentions.append(SentenceMention(index, start, end, entity, score))
        ordered = sorted(mentions, key=lambda m: (m.sentence, m.start))
        for a, b in itertools.pairwise(ordered):
            if a.sentence == b.sentence and b.start < a.end:
                raise _fail(
                    path,
                    number,
                    "mentions",
                    f"mentions [{a.start}, {a.end}) and [{b.start}, {b.end}) of sentence {a.sentence} overlap",
                    "keep non-overlapping mentions",
                )
        complete = record.get("complete", True)
        if not isinstance(complete, bool):
            raise _fail(
                path,
                number,
                "complete",
                f"{complete!r} is not true or false",
                'write "complete": false for a partial gold annotation, or leave it out',
            )
        documents.append(LinkedDocument(doc_id, sentences, mentions, complete))
    return documents


def linked_from_mentions(
    doc_id: str, sentences: Sequence[str], per_sentence: Sequence[Sequence[Mention]]
) -> LinkedDocument:
    """A :class:`LinkedDocument` from per-sentence linker output."""
    mentions = [
        SentenceMention(i, m.start, m.end, m.entity_id, m.score)
        for i, ms in enumerate(per_sentence)
        for m in ms
    ]
    return LinkedDocument(doc_id, list(sentences), mentions)
