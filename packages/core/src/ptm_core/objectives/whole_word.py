"""Whole-word units for masking: word boundaries from WordPiece ``##`` continuations.

Google's whole-word masking (BERT README, 2019 update) selects words, not word pieces:
when a word is split into several pieces, all of them are masked together, while the
masking rate stays 15% of *tokens*. SpanBERT's span masking counts span lengths in the
same whole-word units (:mod:`ptm_core.objectives.span`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor, nn

from ptm_core.objectives.base import IGNORE_INDEX
from ptm_core.objectives.mlm import MaskedLMObjective, MaskingMode, apply_replacements
from ptm_core.tokenization import VocabInfo, WordPieceTokenizer

TokenizerSource = WordPieceTokenizer | str | os.PathLike[str]


class WordBoundaries:
    """Which token ids continue a word (``##xyz`` pieces), as a lookup table.

    Args:
        is_continuation: ``(V,)`` bool, True for ids that continue the previous piece's
            word. Special tokens must be False.
    """

    def __init__(self, is_continuation: Tensor) -> None:
        if is_continuation.dim() != 1 or is_continuation.dtype != torch.bool:
            raise ValueError("is_continuation must be a 1-d bool tensor, one flag per id")
        self.is_continuation = is_continuation

    @classmethod
    def from_tokenizer(cls, tokenizer: TokenizerSource) -> WordBoundaries:
        """From a tokenizer, a ``vocab.txt`` file or a tokenizer directory."""
        if not isinstance(tokenizer, WordPieceTokenizer):
            path = Path(tokenizer)
            if not path.exists():
                raise FileNotFoundError(
                    f"tokenizer {path} not found; word boundaries need the run's vocab.txt "
                    "or tokenizer directory (data.tokenizer)"
                )
            tokenizer = (
                WordPieceTokenizer.from_vocab(path)
                if path.is_file()
                else WordPieceTokenizer.from_directory(path)
            )
        starts = tokenizer.word_start_mask(range(tokenizer.vocab_size))
        return cls(~torch.tensor(starts, dtype=torch.bool))

    @property
    def vocab_size(self) -> int:
        return int(self.is_continuation.shape[0])

    def check_covers(self, vocab: VocabInfo, owner: str) -> None:
        """Raise unless every id of ``vocab`` has a flag (same tokenizer as the run)."""
        if self.vocab_size < vocab.vocab_size:
            raise ValueError(
                f"{owner}: the word-boundary table has {self.vocab_size} ids but the "
                f"tokenizer has {vocab.vocab_size}; pass the run's own tokenizer "
                "(data.tokenizer)"
            )

    def word_index(self, input_ids: Tensor, candidates: Tensor) -> Tensor:
        """Number the words of each row.

        A word starts at every candidate piece that is not a ``##`` continuation, and at a
        candidate that follows a non-candidate (a row cut inside a word).

        Args:
            input_ids: ``(B, L)`` ids.
            candidates: ``(B, L)`` bool, tokens that belong to words (not special).

        Returns:
            ``(B, L)`` long: ``0, 1, ...`` per row in reading order, ``-1`` off candidates.
        """
        cont = self.is_continuation[input_ids.clamp(0, self.vocab_size - 1)]
        previous = torch.nn.functional.pad(candidates[:, :-1], (1, 0), value=False)
        starts = candidates & (~cont | ~previous)
        index = starts.long().cumsum(dim=1) - 1
        return index.masked_fill(~candidates, -1)


@runtime_checkable
class UsesWordBoundaries(Protocol):
    """An objective that needs the tokenizer's word boundaries (bind before batching)."""

    def bind_tokenizer(self, tokenizer: TokenizerSource) -> None: ...


def select_whole_words(
    word_index: Tensor, rate: float, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Choose whole words until ``rate`` of each row's word pieces are covered.

    As Google's ``create_pretraining_data.py``: the row's budget is
    ``k = floor(rate * n + u)`` pieces (``u ~ U(0, 1)``, so its mean is exactly
    ``rate * n``); words are visited in random order and a word is taken only when all of
    its pieces fit the remaining budget. At least one word is taken in a non-empty row.

    Args:
        word_index: ``(B, L)`` from :meth:`WordBoundaries.word_index` (``-1`` = not a word).
        rate: fraction of pieces to cover.
        generator: the seeded source of randomness.

    Returns:
        ``(selected, budget)``: ``(B, L)`` bool and ``(B,)`` long target counts.
    """
    batch, _ = word_index.shape
    counts = (word_index >= 0).sum(dim=1)  # (B,)
    jitter = torch.rand(counts.shape, generator=generator)
    budget = torch.floor(counts.float() * rate + jitter).long().clamp(min=1)
    budget = torch.minimum(budget, counts)
    selected = torch.zeros_like(word_index, dtype=torch.bool)
    for row in range(batch):
        words = word_index[row]
        num_words = int(words.max()) + 1
        if num_words <= 0:
            continue
        lengths = torch.bincount(words[words >= 0], minlength=num_words).tolist()
        order = torch.randperm(num_words, generator=generator).tolist()
        left = int(budget[row])
        chosen: list[int] = []
        for word in order:
            if left == 0:
                break
            if lengths[word] <= left:
                chosen.append(word)
                left -= lengths[word]
        if not chosen:
            chosen.append(order[0])
        selected[row] = torch.isin(words, torch.tensor(chosen))
    return selected, budget


def whole_word_mask_tokens(
    input_ids: Tensor,
    special_tokens_mask: Tensor,
    boundaries: WordBoundaries,
    vocab: VocabInfo,
    generator: torch.Generator,
    *,
    mask_prob: float = 0.15,
    mask_token_prob: float = 0.8,
    random_token_prob: float = 0.1,
) -> tuple[Tensor, Tensor]:
    """Whole-word masking: :func:`select_whole_words`, then BERT's 80/10/10 per piece.

    Args:
        input_ids: ``(B, L)`` ids; padding must be marked special.
        special_tokens_mask: ``(B, L)`` 1/True at special tokens and padding.
        boundaries: which ids continue a word.
        vocab: special ids and vocabulary size.
        generator: the seeded source of randomness.

    Returns:
        ``(corrupted_ids, labels)`` as :func:`ptm_core.objectives.mask_tokens`.
    """
    candidates = ~special_tokens_mask.bool()
    selected, _ = select_whole_words(
        boundaries.word_index(input_ids, candidates), mask_prob, generator
    )
    corrupted = apply_replacements(
        input_ids,
        selected,
        vocab,
        generator,
        mask_token_prob=mask_token_prob,
        random_token_prob=random_token_prob,
    )
    return corrupted, input_ids.masked_fill(~selected, IGNORE_INDEX)


class WholeWordMaskedLMObjective(MaskedLMObjective):
    """Masked LM with whole-word masking (Google BERT WWM, 2019; Cui et al., 2019).

    Same head, loss and 80/10/10 rule as :class:`MaskedLMObjective`; only the selection
    differs: all pieces of a word are chosen together, 15% of pieces on average.

    Args:
        hidden_size, vocab_size, tie_to, activation, layer_norm_eps: as
            :class:`~ptm_core.objectives.mlm.MaskedLMObjective`.
        vocab: the tokenizer's special ids and vocabulary size.
        tokenizer: the run's tokenizer, ``vocab.txt`` or tokenizer directory (the configs
            pass ``${data.tokenizer}``); ``None`` means :meth:`bind_tokenizer` must be
            called before batches are built.
        mask_prob, mask_token_prob, random_token_prob, mode, masked_only: as
            :class:`MaskedLMObjective`.

    Batch keys: as :class:`MaskedLMObjective` (``mlm_labels``).
    """

    name = "wwm"

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
        self.boundaries: WordBoundaries | None = None
        if tokenizer is not None:
            self.bind_tokenizer(tokenizer)

    def bind_tokenizer(self, tokenizer: TokenizerSource) -> None:
        """Read word boundaries from the run's tokenizer."""
        boundaries = WordBoundaries.from_tokenizer(tokenizer)
        boundaries.check_covers(self.vocab, type(self).__name__)
        self.boundaries = boundaries

    def corrupt(self, input_ids: Tensor, special_tokens_mask: Tensor, generator: torch.Generator):
        return whole_word_mask_tokens(
            input_ids,
            special_tokens_mask,
            require_boundaries(self.boundaries, type(self).__name__),
            self.vocab,
            generator,
            mask_prob=self.mask_prob,
            mask_token_prob=self.mask_token_prob,
            random_token_prob=self.random_token_prob,
        )


def require_boundaries(boundaries: WordBoundaries | None, owner: str) -> WordBoundaries:
    """The bound table, or a clear error naming the fix."""
    if boundaries is None:
        raise ValueError(
            f"{owner} needs word boundaries: pass tokenizer= (a vocab.txt or tokenizer "
            "directory; configs use ${data.tokenizer}, which must not be null) or call "
            "bind_tokenizer(tokenizer) before building batches"
        )
    return boundaries
