"""System 1's span supervision, one training item at a time.

Ding et al. (2019), §3.4: for a bridge question with gold chain ``A -> B``, the first
paragraph (read with the question, no clues) must point at the bridge entity with the hop
head; the bridge paragraph, read with the first supporting sentence as clue, must point at
the answer with the answer head; distractor paragraphs point at ``[CLS]`` ("no span"). The
bridge paragraph is also read once without clue (clue dropout), so the same reader serves
the graph-free baseline.

A question gives :func:`num_reader_items` items in a fixed slot order (first paragraph,
bridge with clue, bridge without clue, then distractors), so item ``k`` of a question can be
built alone (:func:`reader_item`) without encoding the others.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from ptm_knowledge.cogqa.evaluation import normalize_answer
from ptm_knowledge.cogqa.examples import MultiHopExample
from ptm_knowledge.cogqa.system1 import ReaderInput, find_span

Chain = tuple[str, int, str, int]
Encode = Callable[[str, Sequence[str], Sequence[str]], ReaderInput]
# Items of every chain question before its distractors: first, bridge + clue, bridge alone.
GOLD_SLOTS = 3


def gold_chain(example: MultiHopExample) -> Chain | None:
    """``(first title, its fact sentence, bridge title, its fact sentence)`` of a bridge
    question: the first paragraph's supporting sentence names the bridge title. ``None``
    when the supporting facts do not form such a chain."""
    facts = [(t, i) for t, i in example.supporting_facts if example.paragraph(t) is not None]
    for t1, i1 in facts:
        for t2, i2 in facts:
            if t1 == t2:
                continue
            sentence = example.paragraph(t1)[i1]  # type: ignore[index]
            if normalize_answer(t2) in normalize_answer(sentence):
                return t1, i1, t2, i2
    return None


def distractor_titles(example: MultiHopExample, chain: Chain) -> list[str]:
    """Titles of the paragraphs that are on neither end of the gold chain, in context order."""
    return [title for title, _ in example.context if title not in (chain[0], chain[2])]


def num_reader_items(example: MultiHopExample, num_distractors: int) -> int:
    """How many System 1 items the question gives (0 without a gold chain)."""
    chain = gold_chain(example)
    if chain is None:
        return 0
    return GOLD_SLOTS + min(num_distractors, len(distractor_titles(example, chain)))


def reader_item(
    example: MultiHopExample,
    chain: Chain,
    slot: int,
    encode: Encode,
    distractors: Sequence[str],
) -> tuple[ReaderInput, list[int]]:
    """Item ``slot`` of a question with its ``[hop s, hop e, ans s, ans e]`` targets.

    Args:
        example: the question.
        chain: its :func:`gold_chain`.
        slot: 0 first paragraph, 1 bridge paragraph with clue, 2 bridge paragraph without
            clue, ``3 + k`` the ``k``-th of ``distractors``.
        encode: the reader's :meth:`~ptm_knowledge.cogqa.system1.CogQAReader.encode`.
        distractors: the distractor titles sampled for this question.
    """
    t1, i1, t2, i2 = chain
    p1, p2 = example.paragraph(t1), example.paragraph(t2)
    assert p1 is not None and p2 is not None
    if slot == 0:
        first = encode(example.question, [], p1)
        return first, [*find_span(first, i1, t2), 0, 0]
    if slot in (1, 2):
        second = encode(example.question, [p1[i1]] if slot == 1 else [], p2)
        return second, [0, 0, *find_span(second, i2, example.answer)]
    paragraph = example.paragraph(distractors[slot - GOLD_SLOTS])
    assert paragraph is not None
    return encode(example.question, [], paragraph), [0, 0, 0, 0]


def reader_examples(
    example: MultiHopExample, reader: object, rng: random.Random, num_distractors: int
) -> list[tuple[ReaderInput, list[int]]]:
    """Every System 1 training item of one question (``rng`` samples the distractors).

    Args:
        example: the question.
        reader: a :class:`~ptm_knowledge.cogqa.system1.CogQAReader` (its ``encode``).
        rng: draws ``num_distractors`` distractor paragraphs.
        num_distractors: distractor paragraphs per question.
    """
    chain = gold_chain(example)
    if chain is None:
        return []
    others = distractor_titles(example, chain)
    chosen = rng.sample(others, min(num_distractors, len(others)))
    encode: Encode = reader.encode  # type: ignore[attr-defined]
    return [
        reader_item(example, chain, slot, encode, chosen)
        for slot in range(GOLD_SLOTS + len(chosen))
    ]
