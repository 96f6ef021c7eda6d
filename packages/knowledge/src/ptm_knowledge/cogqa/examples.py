"""The HotpotQA-format example, its validation errors and the parsing of one record.

:class:`MultiHopExample` is one question with its paragraphs and gold supporting facts;
:func:`parse_record` checks and converts one JSON record (errors name the file, the
record and the field, with a fix). The readers (:mod:`ptm_knowledge.cogqa.hotpot_file`,
:mod:`ptm_knowledge.cogqa.data`) and the generator build on this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class MultiHopDataError(ValueError):
    """A malformed HotpotQA-format file; the message names file, example, field and fix."""


@dataclass
class MultiHopExample:
    """One HotpotQA-style example.

    Args:
        id: unique id (HotpotQA ``_id``).
        question: the question text.
        answer: the gold answer text.
        context: ``(title, sentences)`` paragraphs, gold and distractors mixed.
        supporting_facts: gold ``(title, sentence index)`` pairs.
        type: ``"bridge"`` or ``"comparison"`` (HotpotQA's types).
        aliases: optional ``title -> other surface forms`` used for entity linking.
    """

    id: str
    question: str
    answer: str
    context: list[tuple[str, list[str]]]
    supporting_facts: list[tuple[str, int]]
    type: str = "bridge"
    aliases: dict[str, list[str]] = field(default_factory=dict)

    def paragraph(self, title: str) -> list[str] | None:
        """Sentences of the paragraph titled ``title``, or ``None`` if absent."""
        for name, sentences in self.context:
            if name == title:
                return sentences
        return None

    def to_json(self) -> dict[str, Any]:
        """The HotpotQA JSON record (``_id``, ``question``, ``answer``, ...)."""
        record: dict[str, Any] = {
            "_id": self.id,
            "question": self.question,
            "answer": self.answer,
            "type": self.type,
            "supporting_facts": [[t, i] for t, i in self.supporting_facts],
            "context": [[t, list(s)] for t, s in self.context],
        }
        if self.aliases:
            record["aliases"] = self.aliases
        return record


def field_error(
    path: Path, where: str, field_name: str, problem: str, fix: str
) -> MultiHopDataError:
    return MultiHopDataError(f"{path}: {where}: field {field_name!r}: {problem}. Fix: {fix}")


def line_error(path: Path, line: int | None, field_name: str, problem: str, fix: str) -> Exception:
    where = str(path) if line is None else f"{path}:{line}"
    return MultiHopDataError(f"{where}: field {field_name!r}: {problem}. Fix: {fix}")


def parse_record(path: Path, where: str, record: Any) -> MultiHopExample:
    if not isinstance(record, dict):
        raise field_error(path, where, "<record>", "not a JSON object", "each record is {...}")
    for key in ("_id", "question", "answer"):
        if not isinstance(record.get(key), str):
            raise field_error(path, where, key, "missing or not a string", f"add a string {key!r}")
    context = record.get("context")
    if not isinstance(context, list) or not context:
        raise field_error(path, where, "context", "missing or empty", "give [[title, [sentences]]]")
    paragraphs: list[tuple[str, list[str]]] = []
    for j, item in enumerate(context):
        ok = (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], list)
            and all(isinstance(s, str) for s in item[1])
        )
        if not ok:
            raise field_error(
                path,
                where,
                f"context[{j}]",
                "not [title, [sentence, ...]]",
                'write each paragraph as ["Title", ["Sentence one.", ...]]',
            )
        paragraphs.append((item[0], list(item[1])))
    lengths = {title: len(sentences) for title, sentences in paragraphs}
    facts: list[tuple[str, int]] = []
    for j, fact in enumerate(record.get("supporting_facts", [])):
        ok = isinstance(fact, list) and len(fact) == 2 and isinstance(fact[0], str)
        ok = ok and isinstance(fact[1], int) and not isinstance(fact[1], bool)
        if not ok:
            raise field_error(
                path,
                where,
                f"supporting_facts[{j}]",
                "not [title, sentence index]",
                'write ["Title", 0]',
            )
        facts.append((fact[0], fact[1]))
    for j, (title, sent) in enumerate(facts):
        # HotpotQA keeps a few facts whose paragraph or sentence is missing; we drop none
        # silently but only check those whose paragraph exists.
        if title in lengths and not 0 <= sent < lengths[title]:
            raise field_error(
                path,
                where,
                f"supporting_facts[{j}]",
                f"sentence index {sent} outside paragraph {title!r} ({lengths[title]} sentences)",
                "use a 0-based index into the paragraph",
            )
    aliases = record.get("aliases", {})
    if not isinstance(aliases, dict):
        raise field_error(path, where, "aliases", "not an object", "give {title: [alias, ...]}")
    return MultiHopExample(
        id=record["_id"],
        question=record["question"],
        answer=record["answer"],
        context=paragraphs,
        supporting_facts=facts,
        type=str(record.get("type", "bridge")),
        aliases={str(k): [str(a) for a in v] for k, v in aliases.items()},
    )
