"""T5 span corruption (Raffel et al., 2020, section 3.3.4)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch

from ptm_core.objectives.seq2seq_lm import (
    Seq2SeqExample,
    Seq2SeqObjective,
    Source,
    flatten,
    shift_right,
)
from ptm_core.tokenization import VocabInfo


def _random_segmentation(items: int, segments: int, generator: torch.Generator) -> list[int]:
    """Split ``items`` into ``segments`` non-empty parts uniformly at random; their lengths."""
    cuts = (torch.randperm(items - 1, generator=generator)[: segments - 1] + 1).sort().values
    bounds = [0, *cuts.tolist(), items]
    return [b - a for a, b in itertools.pairwise(bounds)]


def random_spans_noise_mask(
    length: int,
    generator: torch.Generator,
    noise_density: float = 0.15,
    mean_span_length: float = 3.0,
) -> list[bool]:
    """T5's noise mask: ``round(density * n)`` noise tokens in ``round(noise / mean)`` spans.

    Noise and non-noise tokens are each cut into the same number of non-empty runs at
    random and interleaved, starting with non-noise (as ``random_spans_noise_mask`` in the
    T5 code base).

    Returns:
        ``length`` booleans, True = dropped (noise).
    """
    if length < 2:
        return [False] * length
    noise = min(max(round(length * noise_density), 1), length - 1)
    spans = max(1, round(noise / mean_span_length))
    spans = min(spans, noise, length - noise)
    noise_lengths = _random_segmentation(noise, spans, generator)
    keep_lengths = _random_segmentation(length - noise, spans, generator)
    mask: list[bool] = []
    for keep, drop in zip(keep_lengths, noise_lengths, strict=True):
        mask.extend([False] * keep)
        mask.extend([True] * drop)
    return mask


def t5_span_corruption(
    ids: Sequence[int],
    sentinel_ids: Sequence[int],
    generator: torch.Generator,
    noise_density: float = 0.15,
    mean_span_length: float = 3.0,
) -> tuple[list[int], list[int]]:
    """Corrupt ``ids``: each dropped span becomes the next sentinel in the input; the
    target is each sentinel followed by its span, ended by one final sentinel.

    Example: ``a b c d e`` with ``b c`` dropped -> input ``a <0> d e``, target
    ``<0> b c <1>``.

    Raises:
        ValueError: more spans than sentinels; the message gives both numbers.
    """
    mask = random_spans_noise_mask(len(ids), generator, noise_density, mean_span_length)
    inputs: list[int] = []
    targets: list[int] = []
    span = -1
    for i, (token, noisy) in enumerate(zip(ids, mask, strict=True)):
        if noisy:
            if i == 0 or not mask[i - 1]:
                span += 1
                if span + 1 >= len(sentinel_ids):
                    raise ValueError(
                        f"{span + 2} sentinels needed but only {len(sentinel_ids)} exist; raise "
                        "num_sentinels or shorten data.max_length"
                    )
                inputs.append(sentinel_ids[span])
                targets.append(sentinel_ids[span])
            targets.append(token)
        else:
            inputs.append(token)
    targets.append(sentinel_ids[span + 1])
    return inputs, targets


def t5_reconstruct(
    inputs: Sequence[int], targets: Sequence[int], sentinel_ids: Sequence[int]
) -> list[int]:
    """Undo :func:`t5_span_corruption`: put each sentinel's span back into the input."""
    sentinels = set(sentinel_ids)
    spans: dict[int, list[int]] = {}
    current: int | None = None
    for token in targets:
        if token in sentinels:
            current = token
            spans[current] = []
        elif current is not None:
            spans[current].append(token)
    out: list[int] = []
    for token in inputs:
        out.extend(spans.get(token, []) if token in sentinels else [token])
    return out


class T5SpanCorruptionObjective(Seq2SeqObjective):
    """T5's unsupervised objective: corrupted text in, sentinels + dropped spans out.

    Sentinels are ``num_sentinels`` ids appended after the tokenizer's vocabulary
    (``extra_tokens``: the model gets ``vocab_size + num_sentinels`` ids), ``<i>`` =
    ``vocab.vocab_size + i``. Input ``corrupted [SEP]``, target ``sentinels+spans [SEP]``,
    decoder start ``[CLS]``.

    Args:
        vocab: tokenizer ids.
        noise_density: share of dropped tokens (T5: 0.15).
        mean_span_length: mean dropped-span length (T5: 3).
        num_sentinels: distinct sentinels available.
        max_length: longest source (special tokens included).
    """

    name = "t5"

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        noise_density: float = 0.15,
        mean_span_length: float = 3.0,
        num_sentinels: int = 32,
        max_length: int = 128,
    ) -> None:
        super().__init__(vocab)
        if not 0.0 < noise_density < 1.0:
            raise ValueError(
                f"T5SpanCorruptionObjective.noise_density must be in (0, 1), got {noise_density}"
            )
        self.noise_density = noise_density
        self.mean_span_length = mean_span_length
        self.extra_tokens = num_sentinels
        self.sentinel_ids = [vocab.vocab_size + i for i in range(num_sentinels)]
        self.max_length = max_length

    def make_example(self, source: Source, generator: torch.Generator) -> Seq2SeqExample:
        ids = flatten(source)[: self.max_length - 1]
        inputs, targets = t5_span_corruption(
            ids, self.sentinel_ids, generator, self.noise_density, self.mean_span_length
        )
        target = [*targets, self.vocab.sep_id][: self.max_length]
        return {
            "input_ids": [*inputs, self.vocab.sep_id],
            "decoder_input_ids": shift_right(target, self.vocab.cls_id),
            "labels": target,
        }
