"""XNLG's denoising noise: local word shuffle, word drop and word blank (Chi et al., 2020).

Stage 2 of XNLG trains the decoder with denoising auto-encoding (DAE): the encoder reads a
noised sentence and the decoder rebuilds the clean one. The noise is the one of the
reference code (``CZWin32768/XNLG``, ``xnlg/src/trainer.py``: ``word_shuffle``,
``word_dropout``, ``word_blank``, applied in that order by ``add_noise``), which XNLG
inherits from XLM / unsupervised MT (Lample et al., 2018), with the rates of its stage-2
command (``--word_shuffle 3 --word_dropout 0.1 --word_blank 0.1``):

- **shuffle** (``k``): word ``i`` gets the score ``i + u_i``, ``u_i ~ U(0, k)``, and the
  words are sorted by score; the start symbol keeps score ``-1``. Two words ``k`` or more
  apart never swap, so no word moves by ``k`` places or more; neighbours swap with
  probability ``(k - 1)^2 / (2 k^2)``.
- **drop** (``p``): every word but the start symbol is removed with probability ``p``; a
  sentence left with no word gets one of its words back, drawn uniformly.
- **blank** (``p``): every word but the start symbol is replaced by ``[MASK]`` with
  probability ``p``.

A sentence is ``[start] w_1 ... w_n [end]`` (the reference's ``</s> ... </s>``; ptm's
``[CLS] ... [SEP]``): the end symbol is never moved, dropped or blanked. The pure functions
take the random draws as arrays (the golden test feeds the reference's construction the
same arrays); :class:`DenoisingNoise` draws them from a torch generator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

#: The reference's stage-2 rates (README, "Training New Models for Stage #2").
REFERENCE_SHUFFLE = 3.0
REFERENCE_DROP = 0.1
REFERENCE_BLANK = 0.1


def _check_sentence(ids: Sequence[int]) -> None:
    if len(ids) < 3:
        raise ValueError(
            f"a sentence to noise needs a start symbol, at least one word and an end symbol; "
            f"got {len(ids)} ids"
        )


def shuffle_words(ids: Sequence[int], noise: np.ndarray) -> list[int]:
    """Local shuffle: sort ``ids[:-1]`` by ``position + noise`` (``noise[0]`` is ignored:
    the start symbol scores ``-1`` and stays first).

    Args:
        ids: ``[start, w_1 .. w_n, end]``.
        noise: ``(len(ids) - 1,)`` draws of ``U(0, k)``.

    Returns:
        The shuffled sentence (same length, same end symbol).
    """
    _check_sentence(ids)
    body = len(ids) - 1
    if noise.shape != (body,):
        raise ValueError(f"noise must have shape ({body},), got {noise.shape}")
    scores = np.arange(body) + noise
    scores[0] = -1.0
    order = scores.argsort(kind="stable")
    return [int(ids[j]) for j in order] + [int(ids[-1])]


def drop_words(ids: Sequence[int], keep: np.ndarray, refill: int | None = None) -> list[int]:
    """Word drop: keep ``ids[j]`` where ``keep[j]`` (the start symbol always).

    Args:
        ids: ``[start, w_1 .. w_n, end]``.
        keep: ``(len(ids) - 1,)`` booleans.
        refill: index in ``[1, len(ids) - 1)`` of the word put back when every word was
            dropped (the reference draws it uniformly); required only then.

    Returns:
        The sentence without the dropped words (at least one word left).
    """
    _check_sentence(ids)
    body = len(ids) - 1
    if keep.shape != (body,):
        raise ValueError(f"keep must have shape ({body},), got {keep.shape}")
    kept = [int(ids[0])] + [int(ids[j]) for j in range(1, body) if keep[j]]
    if len(kept) == 1:
        if refill is None or not 1 <= refill < body:
            raise ValueError(f"every word was dropped: give refill in [1, {body})")
        kept.append(int(ids[refill]))
    return [*kept, int(ids[-1])]


def blank_words(ids: Sequence[int], keep: np.ndarray, mask_id: int) -> list[int]:
    """Word blank: replace ``ids[j]`` by ``mask_id`` where not ``keep[j]`` (never the start
    or end symbol).

    Args:
        ids: ``[start, w_1 .. w_n, end]``.
        keep: ``(len(ids) - 1,)`` booleans.
        mask_id: the ``[MASK]`` id.
    """
    _check_sentence(ids)
    body = len(ids) - 1
    if keep.shape != (body,):
        raise ValueError(f"keep must have shape ({body},), got {keep.shape}")
    out = [int(ids[0])] + [int(ids[j]) if keep[j] else mask_id for j in range(1, body)]
    return [*out, int(ids[-1])]


@dataclass(frozen=True)
class DenoisingNoise:
    """XNLG's ``add_noise``: shuffle, then drop, then blank, drawn from a torch generator.

    Args:
        mask_id: the ``[MASK]`` id blanks become.
        shuffle: ``k`` of the local shuffle (``0``: off; else it must exceed 1).
        drop: word-drop probability (``0``: off).
        blank: word-blank probability (``0``: off).
    """

    mask_id: int
    shuffle: float = REFERENCE_SHUFFLE
    drop: float = REFERENCE_DROP
    blank: float = REFERENCE_BLANK

    def __post_init__(self) -> None:
        if self.shuffle != 0 and self.shuffle <= 1:
            raise ValueError(f"xnlg.word_shuffle must be 0 (off) or > 1, got {self.shuffle}")
        for name, rate in (("word_dropout", self.drop), ("word_blank", self.blank)):
            if not 0 <= rate < 1:
                raise ValueError(f"xnlg.{name} must be in [0, 1), got {rate}")

    def __call__(self, ids: Sequence[int], generator: torch.Generator) -> list[int]:
        """The noised copy of ``[start, w_1 .. w_n, end]`` (``ids`` is not changed)."""
        out = list(ids)
        if self.shuffle:
            noise = torch.rand(len(out) - 1, generator=generator, dtype=torch.float64)
            out = shuffle_words(out, noise.numpy() * self.shuffle)
        if self.drop:
            keep = torch.rand(len(out) - 1, generator=generator).numpy() >= self.drop
            refill = None
            if not keep[1:].any():
                refill = int(torch.randint(1, len(out) - 1, (1,), generator=generator))
            out = drop_words(out, keep, refill)
        if self.blank:
            keep = torch.rand(len(out) - 1, generator=generator).numpy() >= self.blank
            out = blank_words(out, keep, self.mask_id)
        return out


__all__ = [
    "REFERENCE_BLANK",
    "REFERENCE_DROP",
    "REFERENCE_SHUFFLE",
    "DenoisingNoise",
    "blank_words",
    "drop_words",
    "shuffle_words",
]
