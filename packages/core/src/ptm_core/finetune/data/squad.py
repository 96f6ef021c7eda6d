"""SQuAD v1.1 / v2.0 JSON for extractive QA (Rajpurkar et al., 2016 and 2018).

``{"version": ..., "data": [{"title": ..., "paragraphs": [{"context": ..., "qas": [{"id",
"question", "answers": [{"text", "answer_start"}], "is_impossible"}]}]}]}``. See
``data_specs/squad_qa/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ptm_core.data.errors import DataError
from ptm_core.data.lines import read_utf8
from ptm_core.data.text_cells import check_text, loads_json
from ptm_core.finetune.data.examples import QAAnswer, QAExample
from ptm_core.finetune.data.records import ExampleList, no_examples


class SquadExamples(ExampleList):
    """The questions of a SQuAD file, in file order.

    Attributes:
        version_2: whether any question is unanswerable (``is_impossible``), i.e. the file
            needs SQuAD v2.0 post-processing and metrics.
    """

    def __init__(self, path: Path, examples: list[QAExample]) -> None:
        super().__init__(path, examples)
        self.version_2 = any(example.is_impossible for example in examples)


def read_squad(path: str | Path, *, check_answers: bool = True) -> SquadExamples:
    """Read a SQuAD v1.1 or v2.0 JSON file.

    The file is one JSON document, so it is loaded whole, as the official evaluation script
    and Hugging Face ``run_qa`` do (SQuAD v2.0 train is 40 MB; examples hold strings, no
    token ids). Every question is validated: its ``id`` is unique, its answers lie in the
    context (``context[answer_start:answer_start + len(text)] == text``), an answerable
    question has at least one answer and an ``is_impossible`` one has none (its
    ``plausible_answers`` are ignored).

    Args:
        path: the JSON file (UTF-8).
        check_answers: check each answer's text against the context at ``answer_start``
            (turn off only for data known to be offset by a few characters).

    Returns:
        The questions (:class:`QAExample`, one per ``qas`` entry) and ``version_2``.

    Raises:
        DataError: invalid UTF-8 or JSON (with its line), or a wrong field, named by its
            JSON path such as ``data[0].paragraphs[2].qas[1].answers[0]``, with the fix.
    """
    path = Path(path)
    text = read_utf8(path)
    document = loads_json(
        path, None, text, "fix the JSON (a SQuAD file is one JSON object with a 'data' list)"
    )
    data = _get(path, document, "data", list, "")
    examples: list[QAExample] = []
    seen: dict[str, str] = {}
    for a, article in enumerate(data):
        where_a = f"data[{a}]"
        _expect(path, article, dict, where_a)
        paragraphs = _get(path, article, "paragraphs", list, where_a)
        for p, paragraph in enumerate(paragraphs):
            where_p = f"{where_a}.paragraphs[{p}]"
            _expect(path, paragraph, dict, where_p)
            context = check_text(
                path, None, f"{where_p}.context", _get(path, paragraph, "context", str, where_p)
            )
            for q, qa in enumerate(_get(path, paragraph, "qas", list, where_p)):
                where_q = f"{where_p}.qas[{q}]"
                example = _question(path, qa, context, where_q, check_answers)
                if example.id in seen:
                    raise DataError(
                        path,
                        None,
                        f"{where_q}.id",
                        f"id {example.id!r} is already used at {seen[example.id]}",
                        "give every question a unique id (predictions are keyed by it)",
                    )
                seen[example.id] = where_q
                examples.append(example)
    if not examples:
        raise no_examples(path, "questions (data[].paragraphs[].qas[])")
    return SquadExamples(path, examples)


def _question(path: Path, qa: Any, context: str, where: str, check: bool) -> QAExample:
    _expect(path, qa, dict, where)
    ident = qa.get("id")
    if not isinstance(ident, (str, int)) or isinstance(ident, bool) or str(ident) == "":
        raise DataError(
            path,
            None,
            f"{where}.id",
            "missing or empty question id",
            "give the question a unique string id",
        )
    question = check_text(path, None, f"{where}.question", _get(path, qa, "question", str, where))
    if not question.strip():
        raise DataError(
            path,
            None,
            f"{where}.question",
            f"question {ident!r} is empty",
            "write the question, or drop the entry",
        )
    impossible = qa.get("is_impossible", False)
    if not isinstance(impossible, bool):
        raise DataError(
            path,
            None,
            f"{where}.is_impossible",
            f"expected true or false, got {impossible!r}",
            "write true or false",
        )
    raw_answers = qa.get("answers", [])
    _expect(path, raw_answers, list, f"{where}.answers")
    if impossible and raw_answers:
        raise DataError(
            path,
            None,
            f"{where}.answers",
            f"an is_impossible question has {len(raw_answers)} answers",
            "empty 'answers' (SQuAD v2.0 keeps them as 'plausible_answers'), or set "
            "is_impossible to false",
        )
    if not impossible and not raw_answers:
        raise DataError(
            path,
            None,
            f"{where}.answers",
            "an answerable question has no answer",
            'add an answer {"text", "answer_start"}, or set is_impossible to true (SQuAD v2.0)',
        )
    answers = [
        _answer(path, answer, context, f"{where}.answers[{i}]", check)
        for i, answer in enumerate(raw_answers)
    ]
    return QAExample(
        id=str(ident),
        question=question,
        context=context,
        answers=answers,
        is_impossible=impossible,
        path=where,
    )


def _answer(path: Path, answer: Any, context: str, where: str, check: bool) -> QAAnswer:
    _expect(path, answer, dict, where)
    text = _get(path, answer, "text", str, where)
    start = answer.get("answer_start")
    if not isinstance(start, int) or isinstance(start, bool) or not 0 <= start <= len(context):
        raise DataError(
            path,
            None,
            f"{where}.answer_start",
            f"answer_start {start!r} is not a character index of the context (0..{len(context)})",
            "write the index of the answer's first character in the context",
        )
    if not text.strip():
        raise DataError(
            path,
            None,
            f"{where}.text",
            "empty answer text",
            "write the answer span, or mark the question is_impossible (v2.0)",
        )
    found = context[start : start + len(text)]
    if check and found != text:
        elsewhere = context.find(text)
        hint = (
            f"the text occurs at {elsewhere}: set answer_start to {elsewhere}"
            if elsewhere >= 0
            else "the text does not occur in the context: copy it from the context"
        )
        raise DataError(
            path,
            None,
            f"{where}.answer_start",
            f"the context at {start} reads {found!r}, not the answer text {text!r}",
            hint,
        )
    return QAAnswer(text=text, start=start)


def _expect(path: Path, value: Any, kind: type, where: str) -> None:
    if not isinstance(value, kind):
        raise DataError(
            path,
            None,
            where or "(top level)",
            f"expected a JSON {_json_name(kind)}, got {_json_name(type(value))}",
            "follow the SQuAD layout (see data_specs/squad_qa/README.md)",
        )


def _get(path: Path, parent: Any, key: str, kind: type, where: str) -> Any:
    _expect(path, parent, dict, where)
    field = f"{where}.{key}" if where else key
    if key not in parent:
        raise DataError(
            path,
            None,
            field,
            f"missing key {key!r}",
            "follow the SQuAD layout (see data_specs/squad_qa/README.md)",
        )
    _expect(path, parent[key], kind, field)
    return parent[key]


def _json_name(kind: type) -> str:
    names = {dict: "object", list: "list", str: "string", int: "number", bool: "boolean"}
    return names.get(kind, "null" if kind is type(None) else kind.__name__)


__all__ = ["SquadExamples", "read_squad"]
