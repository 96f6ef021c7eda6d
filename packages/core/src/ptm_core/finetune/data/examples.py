"""The examples of the four downstream task formats, as the readers return them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SentenceExample:
    """One classification or regression example (GLUE-style), single sentence or pair.

    Args:
        text: the first (or only) sentence.
        pair: the second sentence of a pair task, else ``None``.
        label: class index (into the reader's ``label_names``), a float for regression, or
            ``None`` in a file without labels (prediction).
        id: the ``id``/``idx`` column when the file has one, else the line number.
        line: 1-based line of the example in its file (for error messages).
    """

    text: str
    pair: str | None
    label: int | float | None
    id: str
    line: int


@dataclass(frozen=True)
class TaggedExample:
    """One sentence of a tagging (NER) file: words and one tag index per word.

    Args:
        words: the words (the first column of a CoNLL file).
        tags: tag indices into the reader's ``label_names``, one per word, or ``None``
            for a file without tags.
        line: 1-based line of the sentence's first word.
    """

    words: list[str]
    tags: list[int] | None
    line: int


@dataclass(frozen=True)
class QAAnswer:
    """A gold answer span: its text and the character where it starts in the context."""

    text: str
    start: int

    @property
    def end(self) -> int:
        """Character just past the answer (``context[start:end] == text``)."""
        return self.start + len(self.text)


@dataclass(frozen=True)
class QAExample:
    """One SQuAD question about a context paragraph.

    Args:
        id: the question id (``qas[].id``), the key of predictions and references.
        question: the question.
        context: the paragraph.
        answers: gold answers (SQuAD v1.1 train has one, dev three); empty when
            ``is_impossible``.
        is_impossible: SQuAD v2.0 question without an answer in the context.
        path: JSON path of the question, e.g. ``data[0].paragraphs[2].qas[1]``.
    """

    id: str
    question: str
    context: str
    answers: list[QAAnswer]
    is_impossible: bool
    path: str


@dataclass(frozen=True)
class ChoiceExample:
    """One multiple-choice example (SWAG): a context, the start of the next sentence and
    the endings that may complete it.

    Args:
        context: the first sentence (``sent1``).
        start: the start of the second sentence (``sent2``), prepended to each ending.
        endings: the candidate endings (``ending0``, ``ending1``, ...).
        label: index of the correct ending, or ``None`` in a file without labels.
        id: the ``id``/``fold-ind`` column when the file has one, else the line number.
        line: 1-based line of the example.
    """

    context: str
    start: str
    endings: list[str]
    label: int | None
    id: str
    line: int


__all__ = ["ChoiceExample", "QAAnswer", "QAExample", "SentenceExample", "TaggedExample"]
