"""BART's noising functions and the denoising objective (Lewis et al., 2020, section 2.2).

Every transformation is its own function on token ids and they combine freely; the
decoder always reconstructs the original (un-noised) document.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ptm_core.objectives.seq2seq_lm import (
    Seq2SeqExample,
    Seq2SeqObjective,
    Source,
    flatten,
    randint,
    shift_right,
)
from ptm_core.tokenization import VocabInfo


def token_masking(
    ids: Sequence[int], ratio: float, mask_id: int, generator: torch.Generator
) -> list[int]:
    """Replace ``round(ratio * n)`` uniformly chosen tokens by ``[MASK]``."""
    count = round(ratio * len(ids))
    chosen = set(torch.randperm(len(ids), generator=generator)[:count].tolist())
    return [mask_id if i in chosen else t for i, t in enumerate(ids)]


def token_deletion(ids: Sequence[int], ratio: float, generator: torch.Generator) -> list[int]:
    """Delete ``round(ratio * n)`` uniformly chosen tokens (no trace: the model must infer
    where input is missing)."""
    count = round(ratio * len(ids))
    chosen = set(torch.randperm(len(ids), generator=generator)[:count].tolist())
    return [t for i, t in enumerate(ids) if i not in chosen]


def poisson_span_lengths(
    total: int, generator: torch.Generator, poisson_lambda: float = 3.0
) -> list[int]:
    """Span lengths ~ Poisson(lambda) drawn until they cover ``total`` tokens.

    The last span is shortened so that the lengths sum to exactly ``total``; zero-length
    draws are kept (they become inserted masks).
    """
    lengths: list[int] = []
    covered = 0
    rate = torch.tensor([poisson_lambda], dtype=torch.float)
    while covered < total:
        length = int(torch.poisson(rate, generator=generator))
        length = min(length, total - covered)
        lengths.append(length)
        covered += length
    return lengths


def text_infilling(
    ids: Sequence[int],
    ratio: float,
    mask_id: int,
    generator: torch.Generator,
    poisson_lambda: float = 3.0,
) -> tuple[list[int], list[tuple[int, int]]]:
    """Replace spans covering ``round(ratio * n)`` tokens, each by ONE ``[MASK]``.

    Span lengths ~ Poisson(lambda) (:func:`poisson_span_lengths`); a 0-length span inserts
    a mask. Spans do not overlap: each is placed in one of the ``n - masked + 1`` gaps
    between the kept tokens, uniformly and independently.

    Returns:
        The noised ids and the spans as ``(start in the original, length)``.
    """
    n = len(ids)
    lengths = poisson_span_lengths(round(ratio * n), generator, poisson_lambda)
    if not lengths:
        return list(ids), []
    kept = n - sum(lengths)
    # Gap g = before kept token g (g = kept: at the end); several spans may share a gap.
    gaps = torch.randint(0, kept + 1, (len(lengths),), generator=generator).sort().values.tolist()
    order = torch.randperm(len(lengths), generator=generator).tolist()
    out: list[int] = []
    spans: list[tuple[int, int]] = []
    source = 0  # index into ids
    kept_seen = 0
    for span_index, gap in enumerate(gaps):
        while kept_seen < gap:
            out.append(ids[source])
            source += 1
            kept_seen += 1
        length = lengths[order[span_index]]
        spans.append((source, length))
        out.append(mask_id)
        source += length
    out.extend(ids[source:])
    return out, spans


def sentence_permutation(
    sentences: Sequence[Sequence[int]], generator: torch.Generator
) -> list[int]:
    """Shuffle a document's sentences and concatenate them."""
    order = torch.randperm(len(sentences), generator=generator).tolist()
    return [t for i in order for t in sentences[i]]


def document_rotation(ids: Sequence[int], generator: torch.Generator) -> list[int]:
    """Rotate the document to start at a uniformly chosen token."""
    if not ids:
        return []
    start = randint(generator, 0, len(ids))
    return [*ids[start:], *ids[:start]]


def _truncate(source: Source, limit: int) -> list[list[int]]:
    """The leading sentences of ``source`` holding at most ``limit`` tokens (the last cut)."""
    out: list[list[int]] = []
    room = limit
    for sentence in source:
        if room <= 0:
            break
        out.append(list(sentence)[:room])
        room -= len(out[-1])
    return out


class BartDenoisingObjective(Seq2SeqObjective):
    """BART denoising: noise the document, reconstruct it (Lewis et al., 2020).

    Order of the transformations (fairseq's): sentence permutation, token masking, token
    deletion, text infilling, document rotation. The encoder input is
    ``[CLS] noised [SEP]``; the target is ``original [SEP]`` and the decoder input starts
    with ``[CLS]``.

    Args:
        vocab: tokenizer ids (mask, cls = start, sep = end, pad).
        infilling_ratio: share of tokens covered by infilled spans (BART: 0.3).
        poisson_lambda: mean span length.
        token_mask_ratio: share of tokens replaced by ``[MASK]``.
        deletion_ratio: share of tokens deleted.
        permute_sentences: shuffle sentences.
        rotate: rotate the document.
        max_length: longest encoder input and target (special tokens included).
    """

    name = "bart"

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        infilling_ratio: float = 0.3,
        poisson_lambda: float = 3.0,
        token_mask_ratio: float = 0.0,
        deletion_ratio: float = 0.0,
        permute_sentences: bool = True,
        rotate: bool = False,
        max_length: int = 128,
    ) -> None:
        super().__init__(vocab)
        for field, value in (
            ("infilling_ratio", infilling_ratio),
            ("token_mask_ratio", token_mask_ratio),
            ("deletion_ratio", deletion_ratio),
        ):
            if not 0.0 <= value < 1.0:
                raise ValueError(f"BartDenoisingObjective.{field} must be in [0, 1), got {value}")
        self.infilling_ratio = infilling_ratio
        self.poisson_lambda = poisson_lambda
        self.token_mask_ratio = token_mask_ratio
        self.deletion_ratio = deletion_ratio
        self.permute_sentences = permute_sentences
        self.rotate = rotate
        self.max_length = max_length

    def make_example(self, source: Source, generator: torch.Generator) -> Seq2SeqExample:
        v = self.vocab
        limit = self.max_length - 2
        sentences = _truncate(source, limit)  # permuted and original hold the same tokens
        original = flatten(sentences)
        ids = sentence_permutation(sentences, generator) if self.permute_sentences else original
        if self.token_mask_ratio:
            ids = token_masking(ids, self.token_mask_ratio, v.mask_id, generator)
        if self.deletion_ratio:
            ids = token_deletion(ids, self.deletion_ratio, generator)
        if self.infilling_ratio:
            ids, _ = text_infilling(
                ids, self.infilling_ratio, v.mask_id, generator, self.poisson_lambda
            )
        if self.rotate:
            ids = document_rotation(ids, generator)
        target = [*original, v.sep_id]
        return {
            "input_ids": [v.cls_id, *ids[:limit], v.sep_id],
            "decoder_input_ids": shift_right(target, v.cls_id),
            "labels": target,
        }
