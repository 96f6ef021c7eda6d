"""InfoWord's span choice: one contiguous n-gram per sentence, masked in the sentence and
kept apart as the local view (Kong et al., 2020, Sec. 4)."""

from __future__ import annotations

import bisect
import itertools
import random
from dataclasses import dataclass

import torch
from torch import Tensor

from ptm_core.objectives.span import span_length_distribution
from ptm_core.tokenization import VocabInfo


def ngram_length_distribution(max_ngram: int = 5, geometric_p: float | None = None) -> list[float]:
    """``P(n)`` for ``n = 1..max_ngram``.

    ``geometric_p=None``: uniform, ``1 / max_ngram`` each. A number: SpanBERT's clipped
    geometric (:func:`~ptm_core.objectives.span.span_length_distribution`).
    """
    if max_ngram < 1:
        raise ValueError(f"max_ngram must be >= 1, got {max_ngram}")
    if geometric_p is None:
        return [1.0 / max_ngram] * max_ngram
    if not 0.0 < geometric_p <= 1.0:
        raise ValueError(f"geometric_p must be in (0, 1] or null (uniform), got {geometric_p}")
    return span_length_distribution(geometric_p, max_ngram)


@dataclass
class NgramChoice:
    """Result of :func:`choose_ngrams`.

    Attributes:
        input_ids: ``(B, L)`` the sentences with their n-gram replaced by ``[MASK]``.
        ngram_ids: ``(B, max_ngram + 2)`` each n-gram alone, ``[CLS] x_i..x_j [SEP]``, padded.
        ngram_mask: ``(B, max_ngram + 2)`` 1 on the real tokens of ``ngram_ids``.
        has_ngram: ``(B,)`` 1 where the row had a free token to mask (0: the row takes no
            part in the loss, as a positive or as a negative).
        starts: ``(B,)`` first masked position (0 where no n-gram).
        lengths: ``(B,)`` ``n`` of each row's n-gram (0 where none).
    """

    input_ids: Tensor
    ngram_ids: Tensor
    ngram_mask: Tensor
    has_ngram: Tensor
    starts: Tensor
    lengths: Tensor


def choose_ngrams(
    input_ids: Tensor,
    free: Tensor,
    vocab: VocabInfo,
    generator: torch.Generator,
    *,
    max_ngram: int = 5,
    geometric_p: float | None = None,
) -> NgramChoice:
    """Pick and mask one n-gram per row.

    Per row: draw ``n`` from :func:`ngram_length_distribution`, then the start uniformly
    among the positions where ``n`` consecutive ``free`` tokens begin; all ``n`` become
    ``[MASK]`` (the paper's ``x̂_{i:j}``; no 80/10/10: an n-gram left visible would make
    its own view trivial). A row whose longest free run is shorter than ``n`` gets an
    n-gram of that run's length (rows of the pre-training length almost never do).

    Args:
        input_ids: ``(B, L)`` token ids (not modified).
        free: ``(B, L)`` bool, tokens the n-gram may cover (not special, not chosen by
            another objective's masking).
        vocab: special ids.
        generator: the seeded source of randomness.
        max_ngram: longest n-gram.
        geometric_p: ``None`` for uniform lengths, else the clipped-geometric parameter.

    Returns:
        :class:`NgramChoice`.
    """
    cdf = list(itertools.accumulate(ngram_length_distribution(max_ngram, geometric_p)))
    # One seed from the torch generator drives a Python RNG: the choice is sequential.
    rng = random.Random(int(torch.randint(2**62, (1,), generator=generator)))
    rows, width = input_ids.shape
    starts = torch.zeros(rows, dtype=torch.long)
    lengths = torch.zeros(rows, dtype=torch.long)
    for row, flags in enumerate(free.bool().tolist()):
        # run[k] = free tokens in a row ending at k (inclusive).
        run = list(itertools.accumulate(flags, lambda acc, f: acc + 1 if f else 0, initial=0))[1:]
        longest = max(run, default=0)
        if not longest:
            continue
        n = min(bisect.bisect_left(cdf, rng.random()) + 1, max_ngram, longest)
        ends = [k for k in range(width) if run[k] >= n]  # last token of a valid n-gram
        starts[row] = rng.choice(ends) - n + 1
        lengths[row] = n
    positions = torch.arange(width)[None, :]
    covered = (positions >= starts[:, None]) & (positions < (starts + lengths)[:, None])
    masked = input_ids.masked_fill(covered, vocab.mask_id)
    ngram_ids = torch.full((rows, max_ngram + 2), vocab.pad_id, dtype=input_ids.dtype)
    ngram_ids[:, 0] = vocab.cls_id
    offsets = torch.arange(max_ngram)[None, :]
    inside = offsets < lengths[:, None]  # (B, max_ngram)
    gather = (starts[:, None] + offsets).clamp(max=width - 1)
    ngram_ids[:, 1:-1] = torch.where(inside, input_ids.gather(1, gather), vocab.pad_id)
    ngram_ids[torch.arange(rows), lengths + 1] = vocab.sep_id
    has = lengths > 0
    ngram_ids[~has] = vocab.pad_id
    ngram_mask = (torch.arange(max_ngram + 2)[None, :] < (lengths + 2)[:, None]) & has[:, None]
    return NgramChoice(
        input_ids=masked,
        ngram_ids=ngram_ids,
        ngram_mask=ngram_mask.long(),
        has_ngram=has.long(),
        starts=starts,
        lengths=lengths,
    )
