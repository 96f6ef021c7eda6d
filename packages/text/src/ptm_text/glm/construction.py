"""GLM's blank-infilling sample: spans, part A / part B, 2D positions (Du et al., 2022).

Given a token row and its spans, :func:`build_blank_infilling` writes what GLM's
``ConstructBlockStrategy.make_block_data`` (THUDM/GLM, ``blocklm_utils.py``) writes:

* part A: the row with every span replaced by one ``[MASK]``;
* part B: the spans in the given (shuffled) order, each read as ``[START] + span`` and
  predicted as ``span + [END]`` (teacher forcing, so targets are the inputs shifted by one);
* ``position_ids``: a token's position in A; every B token takes its span's ``[MASK]``
  position;
* ``block_position_ids``: 0 in A, ``1 .. len(span) + 1`` inside each B span;
* ``sep``: the length of A (A is bidirectional, B causal over B and sees all of A).

Span sampling follows the same file: lengths from Poisson(λ=3) truncated to
``1 .. max_span_length - 1`` drawn until ``int(ratio * len(row))`` tokens are covered
(:func:`sample_span_lengths`), placed uniformly with at least one unmasked token between
two spans (:func:`place_spans`); the document-level variant masks one span of a uniform
50-100% share of the row (:func:`document_span_length`); the sentence-level variant masks
whole sentences, taken in random order until ``int(ratio * len(row))`` tokens are covered
(:func:`sample_sentence_spans`, GLM's ``gap_sentence`` task in ``construct_blocks``).

GLM marks the task of each blank in part A: ``[MASK]`` for short spans, ``[sMASK]`` for a
sentence, ``[gMASK]`` for the document-level span (``--task-mask``). ptm writes the
:data:`SPAN`/:data:`SENTENCE`/:data:`DOCUMENT` task of each blank in ``task_ids``.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

POISSON_LAMBDA = 3.0
MAX_SPAN_LENGTH = 40  # GLM's ``max_block_length``: lengths 1 .. 39 are drawn
MASK_RATIO = 0.15

# The task of a blank in part A (GLM's ``[MASK]``, ``[sMASK]``, ``[gMASK]``); 0 elsewhere.
SPAN, SENTENCE, DOCUMENT = 0, 1, 2
TASK_NAMES = {SPAN: "[MASK]", SENTENCE: "[sMASK]", DOCUMENT: "[gMASK]"}


@dataclass(frozen=True)
class BlankInfilling:
    """One GLM training row.

    Attributes:
        input_ids: part A then part B (``[START]`` + span for each span).
        targets: the token each position predicts (A: itself, unused; B: the next span
            token, ``[END]`` after the last).
        loss_mask: 1 on part B, 0 on part A.
        position_ids: position in A (B tokens: their span's ``[MASK]`` position).
        block_position_ids: 0 in A; 1, 2, ... inside each B span.
        sep: length of part A.
        task_ids: the task of each part-A ``[MASK]`` (:data:`SENTENCE` for GLM's
            ``[sMASK]``, :data:`DOCUMENT` for ``[gMASK]``), 0 on every other token.
    """

    input_ids: list[int]
    targets: list[int]
    loss_mask: list[int]
    position_ids: list[int]
    block_position_ids: list[int]
    sep: int
    task_ids: list[int] | None = None


def poisson_weights(
    lam: float = POISSON_LAMBDA, max_span_length: int = MAX_SPAN_LENGTH
) -> list[float]:
    """Unnormalised Poisson(``lam``) pmf of the lengths ``1 .. max_span_length - 1``."""
    return [math.exp(-lam) * lam**k / math.factorial(k) for k in range(1, max_span_length)]


def sample_span_lengths(
    row_length: int,
    rng: random.Random,
    *,
    ratio: float = MASK_RATIO,
    lam: float = POISSON_LAMBDA,
    max_span_length: int = MAX_SPAN_LENGTH,
) -> list[int]:
    """Poisson span lengths drawn until ``int(ratio * row_length)`` tokens are covered."""
    weights = poisson_weights(lam, max_span_length)
    lengths = list(range(1, max_span_length))
    drawn: list[int] = []
    covered = 0
    while covered < int(ratio * row_length):
        length = rng.choices(lengths, weights=weights)[0]
        drawn.append(length)
        covered += length
    return drawn


def document_span_length(maskable: int, rng: random.Random, min_ratio: float = 0.5) -> int:
    """GLM-Doc: one span covering a uniform ``min_ratio .. 1`` share of the maskable tokens."""
    low = max(1, int(min_ratio * maskable))
    return rng.randint(low, max(low, maskable))


def place_spans(
    lengths: Sequence[int], total: int, rng: random.Random, offset: int = 0
) -> list[tuple[int, int]]:
    """Place spans of ``lengths`` (in this order) in ``offset .. offset + total``.

    Every arrangement with at least one unmasked token between two spans is reachable:
    the free tokens are split into ``len(lengths) + 1`` gaps by sorted uniform cut points.

    Raises:
        ValueError: the spans and their separators do not fit in ``total`` tokens.
    """
    free = total - sum(lengths)
    slack = free - len(lengths) + 1
    if slack < 0:
        raise ValueError(f"spans of lengths {list(lengths)} do not fit in {total} tokens")
    cuts = sorted(rng.randrange(slack + 1) for _ in lengths)
    spans = []
    for cut, length in zip(cuts, lengths, strict=True):
        spans.append((offset + cut, offset + cut + length))
        offset += length + 1
    return spans


def fit_lengths(lengths: Sequence[int], total: int) -> list[int]:
    """The longest prefix of ``lengths`` that fits in ``total`` tokens with separators."""
    kept: list[int] = []
    used = 0
    for length in lengths:
        if used + length + len(kept) > total:
            break
        kept.append(length)
        used += length
    return kept


def build_blank_infilling(
    tokens: Sequence[int],
    spans: Sequence[tuple[int, int]],
    *,
    mask_id: int,
    start_id: int,
    end_id: int,
    task: int = SPAN,
) -> BlankInfilling:
    """GLM's part A / part B row for ``spans`` (``[start, end)``, given in part-B order).

    Args:
        tokens: the uncorrupted row.
        spans: disjoint, non-empty spans, in the order part B lists them. Poisson spans
            keep a token between two spans; whole sentences may follow each other (two
            ``[sMASK]`` in a row), as in GLM.
        mask_id: the ``[MASK]`` that replaces each span in part A.
        start_id: ``[START]`` (GLM's ``[sop]``), the first input of every B span.
        end_id: ``[END]`` (GLM's ``[eop]``), the last target of every B span.
        task: the task written in ``task_ids`` at each part-A ``[MASK]``
            (:data:`SPAN`, :data:`SENTENCE` or :data:`DOCUMENT`).
    """
    ordered = sorted(spans)
    if any(end <= start for start, end in ordered):
        raise ValueError(f"spans {ordered} include an empty span")
    for (_, end), (start, _) in itertools.pairwise(ordered):
        if start < end:
            raise ValueError(f"spans {ordered} overlap")
    # Position in A: a span collapses to its first position (its [MASK]).
    in_span_tail = [0] * len(tokens)
    for start, end in ordered:
        for i in range(start + 1, end):
            in_span_tail[i] = 1
    positions, current = [], -1
    for tail in in_span_tail:
        current += 0 if tail else 1
        positions.append(current)

    a_ids: list[int] = []
    a_pos: list[int] = []
    a_task: list[int] = []
    last = 0
    for start, end in ordered:
        a_ids += [*list(tokens[last:start]), mask_id]
        a_pos += [*positions[last:start], positions[start]]
        a_task += [0] * (start - last) + [task]
        last = end
    a_ids += list(tokens[last:])
    a_pos += positions[last:]
    a_task += [0] * (len(tokens) - last)

    b_ids: list[int] = []
    b_targets: list[int] = []
    b_pos: list[int] = []
    b_block: list[int] = []
    for start, end in spans:
        span = list(tokens[start:end])
        b_ids += [start_id, *span]
        b_targets += [*span, end_id]
        b_pos += [positions[start]] * (len(span) + 1)
        b_block += list(range(1, len(span) + 2))
    sep = len(a_ids)
    return BlankInfilling(
        input_ids=a_ids + b_ids,
        targets=a_ids + b_targets,
        loss_mask=[0] * sep + [1] * len(b_ids),
        position_ids=a_pos + b_pos,
        block_position_ids=[0] * sep + b_block,
        sep=sep,
        task_ids=a_task + [0] * len(b_ids),
    )


def sample_row_spans(
    row_length: int,
    rng: random.Random,
    *,
    document: bool = False,
    ratio: float = MASK_RATIO,
    lam: float = POISSON_LAMBDA,
    max_span_length: int = MAX_SPAN_LENGTH,
) -> list[tuple[int, int]]:
    """The spans of one ``[CLS] ... [SEP]`` row, in their shuffled part-B order.

    The first and last tokens are never masked (GLM keeps its ``[CLS]`` and the row's end
    token). Lengths that no longer fit (short rows) are dropped, so a short row may cover
    less than ``ratio``; GLM drops such a sample instead.

    Args:
        row_length: tokens in the row, ``[CLS]`` and ``[SEP]`` included.
        rng: the row's random source.
        document: GLM-Doc, one span of a uniform 50-100% share of the maskable tokens,
            instead of Poisson spans covering ``ratio`` of the row.
        ratio, lam, max_span_length: as :func:`sample_span_lengths`.
    """
    maskable = row_length - 2
    if maskable < 1:
        return []
    if document:
        lengths = [document_span_length(maskable, rng)]
    else:
        lengths = sample_span_lengths(
            row_length, rng, ratio=ratio, lam=lam, max_span_length=max_span_length
        )
        rng.shuffle(lengths)
        lengths = fit_lengths(lengths, maskable)
    spans = place_spans(lengths, maskable, rng, offset=1)
    rng.shuffle(spans)
    return spans


def row_sentences(sentence_starts: Sequence[int]) -> list[tuple[int, int]]:
    """The sentences of a ``[CLS] ... [SEP]`` row, in row order, as ``[start, end)`` spans.

    ``sentence_starts`` flags (1) the first token of every sentence that begins in the row
    (:class:`~ptm_core.data.layouts.SegmentRows`); the text before the first flag (a row
    that starts inside a sentence) is a sentence too, as GLM counts the text before the
    first sentence end. ``[CLS]`` and the final ``[SEP]`` belong to no sentence (GLM's
    ``[CLS]`` and ``eos``).
    """
    end = len(sentence_starts) - 1
    if end <= 1:
        return []
    cuts = [i for i in range(2, end) if sentence_starts[i]]
    bounds = [1, *cuts, end]
    return list(itertools.pairwise(bounds))


def choose_sentences(
    sentences_in_random_order: Sequence[tuple[int, int]], row_length: int, ratio: float
) -> list[tuple[int, int]]:
    """GLM's ``gap_sentence`` choice: take sentences in the given (shuffled) order until
    ``int(ratio * row_length)`` tokens are covered; the last one taken may go past it.

    Args:
        sentences_in_random_order: the row's sentences, already shuffled.
        row_length: tokens in the row, ``[CLS]`` and ``[SEP]`` included (GLM's
            ``len(tokens)``).
        ratio: GLM's ``gap_sentence_ratio`` (0.15).
    """
    chosen: list[tuple[int, int]] = []
    covered = 0
    for start, end in sentences_in_random_order:
        chosen.append((start, end))
        covered += end - start
        if covered >= int(ratio * row_length):
            break
    return chosen


def sample_sentence_spans(
    sentence_starts: Sequence[int], rng: random.Random, *, ratio: float = MASK_RATIO
) -> list[tuple[int, int]]:
    """GLM-Sent: whole sentences of one row until ``ratio`` of it is covered, in their
    shuffled part-B order (shuffled, chosen, shuffled again, as GLM does).

    Args:
        sentence_starts: per-token sentence-start flags of the row, ``[CLS]`` and ``[SEP]``
            included (``len(sentence_starts)`` is the row length).
        rng: the row's random source.
        ratio: share of the row to cover (GLM: 0.15).
    """
    sentences = row_sentences(sentence_starts)
    rng.shuffle(sentences)
    chosen = choose_sentences(sentences, len(sentence_starts), ratio)
    rng.shuffle(chosen)
    return chosen
