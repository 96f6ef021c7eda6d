"""MLM streams, TLM pairs, and the batch source that samples languages and alternates them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from ptm_core.data import pad_examples
from ptm_core.seeding import generator_for
from ptm_core.tokenization import VocabInfo
from ptm_multilingual.sampling import LanguageSampler

Example = dict[str, Any]
Batch = dict[str, Tensor]
BatchTransform = Callable[[Batch, torch.Generator], Batch]


def build_mlm_streams(
    sentences: Sequence[Sequence[int]], lang_id: int, vocab: VocabInfo, stream_length: int
) -> list[Example]:
    """Cut one language's text into fixed-length streams (XLM's MLM, no sentence pairs).

    Sentences are concatenated, each followed by ``</s>``, and the stream is cut into
    rows of ``stream_length`` tokens: ``<s>`` + ``stream_length - 1`` stream tokens (the
    last row may be shorter). Positions run ``0..n-1``; every token has ``lang_id``.

    Returns:
        examples with ``input_ids``, ``position_ids``, ``langs``, ``special_tokens_mask``
        and ``tlm`` = 0.
    """
    if stream_length < 3:
        raise ValueError(f"stream_length must be >= 3, got {stream_length}")
    stream: list[int] = []
    for ids in sentences:
        stream.extend(ids)
        stream.append(vocab.sep_id)
    specials = frozenset(vocab.special_ids)
    step = stream_length - 1
    out: list[Example] = []
    for start in range(0, len(stream), step):
        ids = [vocab.cls_id, *stream[start : start + step]]
        if len(ids) < 3:
            continue
        out.append(mlm_stream_row(ids, lang_id, specials))
    return out


def mlm_stream_row(ids: list[int], lang_id: int, specials: frozenset[int]) -> Example:
    """The example of one MLM stream row ``ids`` (``<s>`` first), as :func:`build_mlm_streams`."""
    return {
        "input_ids": ids,
        "position_ids": list(range(len(ids))),
        "langs": [lang_id] * len(ids),
        "special_tokens_mask": [int(t in specials) for t in ids],
        "tlm": 0,
    }


def build_tlm_example(
    source: Sequence[int],
    target: Sequence[int],
    source_lang: int,
    target_lang: int,
    vocab: VocabInfo,
    max_length: int,
) -> Example:
    """One TLM row: ``<s> source </s> <s> target </s>`` (Lample & Conneau, 2019, Fig. 1).

    Positions restart at 0 on the target sentence, ``langs`` follow the sides, and each
    side is truncated to at most ``max_length // 2`` tokens (specials included).

    Returns:
        an example with ``input_ids``, ``position_ids``, ``langs``, ``special_tokens_mask``
        and ``tlm`` = 1 (all lists of equal length).
    """
    half = max_length // 2
    if half < 3:
        raise ValueError(f"max_length must be >= 6 for a TLM pair, got {max_length}")
    first = [vocab.cls_id, *list(source)[: half - 2], vocab.sep_id]
    second = [vocab.cls_id, *list(target)[: half - 2], vocab.sep_id]
    specials = set(vocab.special_ids)
    ids = first + second
    return {
        "input_ids": ids,
        "position_ids": list(range(len(first))) + list(range(len(second))),
        "langs": [source_lang] * len(first) + [target_lang] * len(second),
        "special_tokens_mask": [int(t in specials) for t in ids],
        "tlm": 1,
    }


def build_tlm_examples(
    pairs: Sequence[tuple[Sequence[int], Sequence[int]]],
    source_lang: int,
    target_lang: int,
    vocab: VocabInfo,
    max_length: int,
) -> list[Example]:
    """:func:`build_tlm_example` for every ``(source ids, target ids)`` pair."""
    return [build_tlm_example(s, t, source_lang, target_lang, vocab, max_length) for s, t in pairs]


class XLMBatches:
    """Deterministic, resumable batches that alternate MLM and TLM steps.

    Step ``s`` (counted over epochs) is an MLM batch when ``s mod (mlm_steps + tlm_steps)
    < mlm_steps``, else a TLM batch. Each row first draws its stream (a language for MLM,
    a language pair/direction for TLM) from :class:`LanguageSampler` with
    ``q_l ∝ (n_l/N)^alpha``, then an example of that stream uniformly. Every draw uses a
    generator seeded by ``(seed, epoch, index)``, so a batch depends only on its position
    (resume-safe) and the global RNG is untouched.

    Args:
        mlm: language -> MLM stream examples (may be empty): a list, or rows built per
            index (:class:`~ptm_multilingual.rows.MLMStreamRows`); they are not copied.
        tlm: pair name (``"en-fr"``) -> TLM examples (may be empty), likewise.
        batch_size: rows per batch.
        pad_id: padding id.
        transform: the objectives' dynamic data side (masking).
        seed: base seed.
        alpha: language smoothing exponent.
        mlm_counts, tlm_counts: ``n_l`` per key (default: number of examples).
        mlm_steps, tlm_steps: the alternation pattern.
        batches_per_epoch: length of an "epoch" (sampling is with replacement).
    """

    def __init__(
        self,
        mlm: Mapping[str, Sequence[Example]],
        tlm: Mapping[str, Sequence[Example]],
        batch_size: int,
        *,
        pad_id: int,
        transform: BatchTransform | None = None,
        seed: int = 0,
        alpha: float = 0.5,
        mlm_counts: Mapping[str, int] | None = None,
        tlm_counts: Mapping[str, int] | None = None,
        mlm_steps: int = 1,
        tlm_steps: int = 1,
        batches_per_epoch: int = 100,
    ) -> None:
        # Sequences are kept as given: prepared rows are built only when drawn.
        self.mlm = {k: v for k, v in mlm.items() if len(v)}
        self.tlm = {k: v for k, v in tlm.items() if len(v)}
        if mlm_steps < 0 or tlm_steps < 0 or mlm_steps + tlm_steps == 0:
            raise ValueError(
                f"mlm_steps and tlm_steps must be >= 0 and not both 0, got {mlm_steps}, {tlm_steps}"
            )
        if mlm_steps and not self.mlm:
            raise ValueError("mlm_steps > 0 but there are no monolingual streams; set mlm_steps=0")
        if tlm_steps and not self.tlm:
            raise ValueError("tlm_steps > 0 but there are no parallel pairs; set tlm_steps=0")
        if batch_size < 1 or batches_per_epoch < 1:
            raise ValueError("batch_size and batches_per_epoch must be >= 1")
        self.mlm_sampler = (
            LanguageSampler(mlm_counts or {k: len(v) for k, v in self.mlm.items()}, alpha)
            if mlm_steps
            else None
        )
        self.tlm_sampler = (
            LanguageSampler(tlm_counts or {k: len(v) for k, v in self.tlm.items()}, alpha)
            if tlm_steps
            else None
        )
        self.batch_size = batch_size
        self.pad_id = pad_id
        self.transform = transform
        self.seed = seed
        self.mlm_steps = mlm_steps
        self.tlm_steps = tlm_steps
        self._batches_per_epoch = batches_per_epoch

    @property
    def batches_per_epoch(self) -> int:
        return self._batches_per_epoch

    def __len__(self) -> int:
        return self._batches_per_epoch

    def kind(self, epoch: int, index: int) -> str:
        """``"mlm"`` or ``"tlm"``: which objective data step ``(epoch, index)`` uses."""
        step = epoch * self._batches_per_epoch + index
        return "mlm" if step % (self.mlm_steps + self.tlm_steps) < self.mlm_steps else "tlm"

    def sample_keys(self, epoch: int, index: int) -> tuple[str, list[str]]:
        """The batch kind and the language (pair) of each row of batch ``(epoch, index)``."""
        kind = self.kind(epoch, index)
        sampler = self.mlm_sampler if kind == "mlm" else self.tlm_sampler
        assert sampler is not None
        return kind, sampler.sample(self.batch_size, generator_for(self.seed, epoch, index, "lang"))

    def batch(self, epoch: int, index: int) -> Batch:
        """Build batch ``index`` of ``epoch``."""
        kind, keys = self.sample_keys(epoch, index)
        pools = self.mlm if kind == "mlm" else self.tlm
        generator = generator_for(self.seed, epoch, index, "rows")
        rows = [
            pools[key][int(torch.randint(len(pools[key]), (1,), generator=generator))]
            for key in keys
        ]
        batch = pad_examples(rows, self.pad_id)
        if self.transform is not None:
            batch = self.transform(batch, generator_for(self.seed, epoch, index, "collate"))
        return batch

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[Batch]:
        for index in range(start, self._batches_per_epoch):
            yield self.batch(epoch, index)
