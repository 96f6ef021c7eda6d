"""SpanBERT span masking (the data side of SpanBERT's MLM and SBO)."""

from __future__ import annotations

import bisect
import itertools
import random
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from ptm_core.objectives.base import IGNORE_INDEX, Batch, Example
from ptm_core.objectives.mlm import MaskedLMObjective, MaskingMode, regular_token_ids
from ptm_core.objectives.whole_word import (
    TokenizerSource,
    WordBoundaries,
    require_boundaries,
)
from ptm_core.tokenization import VocabInfo

# Keys the span objective adds next to ``mlm_labels``; SBO reads them at masked positions.
SPAN_KEYS = ("span_left", "span_right", "span_position")


def span_length_distribution(p: float = 0.2, max_length: int = 10) -> list[float]:
    """``P(len = n)`` for ``n = 1..max_length``: Geometric(p) re-sampled until ``<= max``.

    Re-sampling is the same as truncating and renormalising, so
    ``P(n) = p (1-p)^(n-1) / (1 - (1-p)^max)``; with ``p = 0.2, max = 10`` the mean is
    3.77 words (SpanBERT reports ~3.8).
    """
    if not 0.0 < p <= 1.0:
        raise ValueError(f"the geometric parameter p must be in (0, 1], got {p}")
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    weights = [p * (1 - p) ** (n - 1) for n in range(1, max_length + 1)]
    total = sum(weights)
    return [w / total for w in weights]


@dataclass
class SpanMasking:
    """Result of :func:`span_mask_tokens` (all tensors ``(B, L)``).

    Attributes:
        input_ids: corrupted ids.
        labels: original id at masked positions, ``-100`` elsewhere.
        span_left: index ``s - 1`` of the token before the span (at masked positions).
        span_right: index ``e + 1`` of the token after the span.
        span_position: ``i - s``, the token's offset inside its span (0 = first piece).
        span_words: length in whole words of every span, in order (for statistics).
        span_pieces: length in word pieces of every span.
    """

    input_ids: Tensor
    labels: Tensor
    span_left: Tensor
    span_right: Tensor
    span_position: Tensor
    span_words: list[int] = field(default_factory=list)
    span_pieces: list[int] = field(default_factory=list)


def span_mask_tokens(
    input_ids: Tensor,
    special_tokens_mask: Tensor,
    boundaries: WordBoundaries,
    vocab: VocabInfo,
    generator: torch.Generator,
    *,
    mask_prob: float = 0.15,
    geometric_p: float = 0.2,
    max_span_words: int = 10,
    mask_token_prob: float = 0.8,
    random_token_prob: float = 0.1,
) -> SpanMasking:
    """SpanBERT masking (Joshi et al., 2020, Sec. 3.1).

    Per row, until ``mask_prob`` of its maskable pieces are covered: draw a length ``l``
    in whole words from :func:`span_length_distribution`; draw the start uniformly among
    the word starts where ``l`` unmasked words follow (none: draw ``l`` again); mask those
    words. Each span then gets one treatment for all its pieces: ``[MASK]`` with
    ``mask_token_prob``, random tokens with ``random_token_prob``, else unchanged.

    Spans are never cut. SpanBERT's reference clips the span that crosses a row's budget,
    which shortens the realised spans (mean ~3.2 words instead of ~3.8 on 128-piece rows);
    here the overshoot of one row is carried over and lowers the next row's budget, and
    the call's last crossing span is kept whole with probability ``remaining / length``.
    So realised span lengths follow the published distribution and the expected coverage
    is exactly ``mask_prob`` of the call's pieces, while one row's coverage varies by
    about one span around it.

    Args:
        input_ids: ``(B, L)`` ids; padding must be marked special.
        special_tokens_mask: ``(B, L)`` 1/True at ``[CLS]``, ``[SEP]``, padding.
        boundaries: which ids continue a word.
        vocab: special ids and vocabulary size.
        generator: the seeded source of randomness.
        mask_prob: fraction of pieces covered by spans.
        geometric_p: parameter of the span-length geometric distribution.
        max_span_words: longest span in words (longer draws are re-sampled).
        mask_token_prob: probability a span becomes ``[MASK]`` tokens.
        random_token_prob: probability a span becomes random tokens.

    Returns:
        :class:`SpanMasking`.
    """
    lengths_cdf = list(itertools.accumulate(span_length_distribution(geometric_p, max_span_words)))
    # One seed from the torch generator drives a Python RNG: span sampling is sequential,
    # and per-call torch draws would dominate the collator's time.
    rng = random.Random(int(torch.randint(2**62, (1,), generator=generator)))
    candidates = ~special_tokens_mask.bool()
    word_index = boundaries.word_index(input_ids, candidates)  # (B, L)
    # Words are contiguous runs of pieces: per row, each word's first and past-last position.
    before = torch.nn.functional.pad(word_index[:, :-1], (1, 0), value=-1)
    after = torch.nn.functional.pad(word_index[:, 1:], (0, 1), value=-1)
    is_word = word_index >= 0
    flat_starts = (is_word & (word_index != before)).nonzero(as_tuple=True)[1].tolist()
    flat_ends = ((is_word & (word_index != after)).nonzero(as_tuple=True)[1] + 1).tolist()
    words_per_row = (is_word & (word_index != before)).sum(dim=1).tolist()
    pieces_per_row = candidates.sum(dim=1).tolist()
    chosen: list[tuple[int, int, int]] = []  # (row, first, end) of each span
    span_words: list[int] = []
    last_row = max((r for r, n in enumerate(words_per_row) if n), default=-1)
    debt = 0.0  # pieces still to cover, carried from row to row
    offset = 0
    for row, count in enumerate(words_per_row):
        row_starts = flat_starts[offset : offset + count]
        row_ends = flat_ends[offset : offset + count]
        offset += count
        if not count:
            continue
        # A span never crosses a special token inside the row: words carry a run id.
        gaps = (int(s != e) for e, s in zip(row_ends, row_starts[1:], strict=False))
        runs = [0, *itertools.accumulate(gaps)]
        debt += mask_prob * pieces_per_row[row]
        masked = [False] * count
        failures = 0
        while debt > 0 and failures < 100:
            length = min(bisect.bisect_left(lengths_cdf, rng.random()) + 1, max_span_words)
            length = min(length, count)
            # prefix[i] = masked words before i; a start s is free if none in [s, s+length).
            prefix = [0, *itertools.accumulate(masked)]
            starts = [
                s
                for s in range(count - length + 1)
                if prefix[s + length] == prefix[s] and runs[s] == runs[s + length - 1]
            ]
            if not starts:
                failures += 1
                continue
            start = rng.choice(starts)
            first, end = row_starts[start], row_ends[start + length - 1]
            pieces = end - first
            if pieces > debt and row == last_row and span_words and rng.random() >= debt / pieces:
                break  # the call's last crossing span is kept with P = debt / its length
            for w in range(start, start + length):
                masked[w] = True
            debt -= pieces
            span_words.append(length)
            chosen.append((row, first, end))
    return _apply_spans(
        input_ids, chosen, span_words, vocab, generator, rng, mask_token_prob, random_token_prob
    )


def _apply_spans(
    input_ids: Tensor,
    chosen: list[tuple[int, int, int]],
    span_words: list[int],
    vocab: VocabInfo,
    generator: torch.Generator,
    rng: random.Random,
    mask_token_prob: float,
    random_token_prob: float,
) -> SpanMasking:
    """Write labels, boundaries and one 80/10/10 treatment per span ``(row, first, end)``."""
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    left = torch.zeros_like(input_ids)
    right = torch.zeros_like(input_ids)
    position = torch.zeros_like(input_ids)
    corrupted = input_ids.clone()
    if not chosen:
        return SpanMasking(corrupted, labels, left, right, position, [], [])
    spans = torch.tensor(chosen)  # (S, 3)
    lengths = spans[:, 2] - spans[:, 1]  # (S,) pieces
    rows = spans[:, 0].repeat_interleave(lengths)  # (N,)
    firsts = spans[:, 1].repeat_interleave(lengths)
    ends = spans[:, 2].repeat_interleave(lengths)
    cols = (
        firsts + torch.arange(len(rows)) - (lengths.cumsum(0) - lengths).repeat_interleave(lengths)
    )
    labels[rows, cols] = input_ids[rows, cols]
    left[rows, cols] = firsts - 1
    right[rows, cols] = ends
    position[rows, cols] = cols - firsts
    draws = torch.tensor([rng.random() for _ in chosen]).repeat_interleave(lengths)
    allowed = regular_token_ids(vocab)
    picks = allowed[torch.randint(len(allowed), (len(rows),), generator=generator)]
    new = torch.where(draws < mask_token_prob, vocab.mask_id, input_ids[rows, cols])
    new = torch.where(
        (draws >= mask_token_prob) & (draws < mask_token_prob + random_token_prob), picks, new
    )
    corrupted[rows, cols] = new
    return SpanMasking(
        input_ids=corrupted,
        labels=labels,
        span_left=left,
        span_right=right,
        span_position=position,
        span_words=span_words,
        span_pieces=lengths.tolist(),
    )


class SpanMaskingObjective(MaskedLMObjective):
    """SpanBERT's masked LM: span masking in whole words (Joshi et al., 2020).

    Data side: :func:`span_mask_tokens` (15% of pieces in spans of Geometric(0.2) words,
    at most 10, 80/10/10 per span); it also writes the span boundaries that
    :class:`~ptm_core.objectives.span_boundary.SpanBoundaryObjective` reads. Loss side:
    the tied :class:`MaskedLMHead` and cross-entropy on the masked pieces, as
    :class:`MaskedLMObjective`. SpanBERT trains single segments without NSP.

    Args:
        hidden_size, vocab_size, tie_to, activation, layer_norm_eps: as
            :class:`~ptm_core.objectives.mlm.MaskedLMObjective`.
        vocab: the tokenizer's special ids and vocabulary size.
        tokenizer: the run's tokenizer, ``vocab.txt`` or directory (configs pass
            ``${data.tokenizer}``); ``None``: call :meth:`bind_tokenizer` first.
        mask_prob: fraction of pieces covered by spans.
        geometric_p: span-length geometric parameter.
        max_span_words: longest span, in words.
        mask_token_prob, random_token_prob: the per-span 80/10/10 rule.
        mode: ``"dynamic"`` (re-drawn per batch) or ``"static"`` (once per example).
        masked_only: project only masked positions through the head.

    Batch keys: ``mlm_labels``, ``span_left``, ``span_right``, ``span_position`` ``(B, L)``.
    """

    name = "mlm"
    batch_keys: tuple[str, ...] = ("mlm_labels", *SPAN_KEYS)  # type: ignore[assignment]

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        hidden_size: int,
        vocab_size: int,
        tie_to: nn.Embedding | None = None,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
        tokenizer: TokenizerSource | None = None,
        mask_prob: float = 0.15,
        geometric_p: float = 0.2,
        max_span_words: int = 10,
        mask_token_prob: float = 0.8,
        random_token_prob: float = 0.1,
        mode: MaskingMode = "dynamic",
        masked_only: bool = True,
    ) -> None:
        super().__init__(
            vocab,
            hidden_size=hidden_size,
            vocab_size=vocab_size,
            tie_to=tie_to,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            mask_prob=mask_prob,
            mask_token_prob=mask_token_prob,
            random_token_prob=random_token_prob,
            mode=mode,
            masked_only=masked_only,
        )
        span_length_distribution(geometric_p, max_span_words)  # validates both
        self.geometric_p = geometric_p
        self.max_span_words = max_span_words
        self.boundaries: WordBoundaries | None = None
        if tokenizer is not None:
            self.bind_tokenizer(tokenizer)

    def bind_tokenizer(self, tokenizer: TokenizerSource) -> None:
        """Read word boundaries from the run's tokenizer."""
        boundaries = WordBoundaries.from_tokenizer(tokenizer)
        boundaries.check_covers(self.vocab, type(self).__name__)
        self.boundaries = boundaries

    def span_corrupt(
        self, input_ids: Tensor, special_tokens_mask: Tensor, generator: torch.Generator
    ) -> SpanMasking:
        """Apply span masking to ``(B, L)`` ids."""
        return span_mask_tokens(
            input_ids,
            special_tokens_mask,
            require_boundaries(self.boundaries, type(self).__name__),
            self.vocab,
            generator,
            mask_prob=self.mask_prob,
            geometric_p=self.geometric_p,
            max_span_words=self.max_span_words,
            mask_token_prob=self.mask_token_prob,
            random_token_prob=self.random_token_prob,
        )

    def corrupt(self, input_ids: Tensor, special_tokens_mask: Tensor, generator: torch.Generator):
        out = self.span_corrupt(input_ids, special_tokens_mask, generator)
        return out.input_ids, out.labels

    def prepare_example(self, example: Example, generator: torch.Generator) -> Example:
        if self.mode != "static":
            return example
        out = self.span_corrupt(
            torch.tensor([example["input_ids"]]),
            torch.tensor([example["special_tokens_mask"]]),
            generator,
        )
        return {
            **example,
            "input_ids": out.input_ids[0].tolist(),
            "mlm_labels": out.labels[0].tolist(),
            **{key: getattr(out, key)[0].tolist() for key in SPAN_KEYS},
        }

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        if self.mode != "dynamic":
            return batch
        out = self.span_corrupt(batch["input_ids"], batch["special_tokens_mask"], generator)
        return {
            **batch,
            "input_ids": out.input_ids,
            "mlm_labels": out.labels,
            **{key: getattr(out, key) for key in SPAN_KEYS},
        }
