"""MASS: masked sequence-to-sequence pre-training (Song et al., 2019)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ptm_core.objectives.base import IGNORE_INDEX
from ptm_core.objectives.seq2seq_lm import (
    Seq2SeqExample,
    Seq2SeqObjective,
    Source,
    flatten,
    randint,
)
from ptm_core.tokenization import VocabInfo


def mass_mask(
    ids: Sequence[int],
    mask_id: int,
    generator: torch.Generator,
    fragment_ratio: float = 0.5,
    fragment_length: int | None = None,
) -> tuple[Seq2SeqExample, int, int]:
    """Mask one contiguous fragment ``[u, u + k)`` of a sentence of ``m`` tokens.

    Encoder input: the sentence with the fragment replaced by ``[MASK]``. Decoder (same
    ``m`` positions): input at ``t`` is the previous fragment token ``x[t-1]`` when
    ``u < t < u + k`` and ``[MASK]`` elsewhere; labels are ``x[t]`` on the fragment and
    ignored elsewhere. ``k = 1`` is MLM (one masked token, the decoder sees nothing);
    ``k = m`` is a left-to-right LM (the encoder sees nothing, the decoder gets
    ``[MASK] x[0..m-2]``).

    Args:
        ids: the sentence ``x``.
        mask_id: ``[MASK]``.
        generator: draws the start ``u`` uniformly in ``[0, m - k]``.
        fragment_ratio: ``k = max(1, round(ratio * m))`` (MASS: 0.5).
        fragment_length: ``k`` directly (overrides the ratio; clipped to ``m``).

    Returns:
        The example, ``u`` and ``k``.
    """
    m = len(ids)
    k = fragment_length if fragment_length is not None else max(1, round(fragment_ratio * m))
    k = max(1, min(k, m))
    u = randint(generator, 0, m - k + 1)
    inside = range(u, u + k)
    example = {
        "input_ids": [mask_id if t in inside else x for t, x in enumerate(ids)],
        "decoder_input_ids": [
            ids[t - 1] if (t in inside and t - 1 in inside) else mask_id for t in range(m)
        ],
        "labels": [x if t in inside else IGNORE_INDEX for t, x in enumerate(ids)],
    }
    return example, u, k


class MassObjective(Seq2SeqObjective):
    """MASS pre-training: the decoder predicts the masked fragment (Song et al., 2019).

    Args:
        vocab: tokenizer ids.
        fragment_ratio: share of the sentence masked (MASS: 0.5).
        fragment_length: a fixed ``k`` instead of the ratio (1 = MLM, ``m`` = LM).
        max_length: longest sentence used (longer ones are truncated).
    """

    name = "mass"

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        fragment_ratio: float = 0.5,
        fragment_length: int | None = None,
        max_length: int = 128,
    ) -> None:
        super().__init__(vocab)
        if not 0.0 < fragment_ratio <= 1.0:
            raise ValueError(
                f"MassObjective.fragment_ratio must be in (0, 1], got {fragment_ratio}"
            )
        self.fragment_ratio = fragment_ratio
        self.fragment_length = fragment_length
        self.max_length = max_length

    def make_example(self, source: Source, generator: torch.Generator) -> Seq2SeqExample:
        ids = flatten(source)[: self.max_length]
        example, _, _ = mass_mask(
            ids, self.vocab.mask_id, generator, self.fragment_ratio, self.fragment_length
        )
        return example
