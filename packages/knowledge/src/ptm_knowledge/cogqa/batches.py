"""CogQA's batch sources for the core Trainer: deterministic, resumable, built per index.

:class:`ReaderSpanBatches` (System 1) walks an epoch's shuffled items and encodes only the
items of the batch asked for; :class:`GraphBatches` (System 2) yields one grown graph per
batch, by index. Both shuffle with a generator seeded from ``(seed, epoch)``, never the
global RNG, so ``iter_batches(epoch, start)`` is the same in every run and a resumed run
sees the batches an uninterrupted one would (the core ``BatchSource`` contract).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import numpy as np
import torch

from ptm_core.seeding import derive_seed, generator_for
from ptm_knowledge.cogqa.examples import MultiHopExample
from ptm_knowledge.cogqa.supervision import (
    GOLD_SLOTS,
    distractor_titles,
    gold_chain,
    num_reader_items,
    reader_item,
)
from ptm_knowledge.cogqa.system1 import CogQAReader, ReaderInput


class ReaderSpanBatches:
    """System 1 span-supervision batches (a core ``BatchSource``).

    One pass over ``examples`` at construction counts each question's items (3 + its
    distractors, 0 without a gold chain) into an offsets array; nothing is encoded then.
    Epoch ``e`` shuffles the flat item indices with ``generator_for(seed, "cogqa-reader",
    e)``; the distractors of question ``q`` in epoch ``e`` are drawn with
    ``Random(derive_seed(seed, e, q))``, so every epoch reads fresh distractors, as the
    original loop did, yet any batch can be rebuilt alone.

    Args:
        examples: the training questions (a list, or any lazily read ``Sequence``).
        reader: the reader whose ``encode`` (vocabulary, length limit) builds the inputs.
        batch_size: sequences per batch (the last, smaller batch of an epoch is kept).
        num_distractors: distractor paragraphs per question.
        seed: shuffling and sampling seed.

    Batches: ``input_ids``, ``token_type_ids``, ``attention_mask``, ``span_mask``
    ``[B, L]`` and ``targets`` ``[B, 4]`` (hop start/end, answer start/end; 0 = no span).
    """

    def __init__(
        self,
        examples: Sequence[MultiHopExample],
        reader: CogQAReader,
        *,
        batch_size: int,
        num_distractors: int,
        seed: int,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.examples = examples
        self.reader = reader
        self.batch_size = batch_size
        self.num_distractors = num_distractors
        self.seed = seed
        questions: list[int] = []
        counts: list[int] = []
        for index in range(len(examples)):
            count = num_reader_items(examples[index], num_distractors)
            if count:
                questions.append(index)
                counts.append(count)
        self._questions = np.asarray(questions, dtype=np.int64)
        self._offsets = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])

    @property
    def num_items(self) -> int:
        """Sequences per epoch."""
        return int(self._offsets[-1])

    @property
    def batches_per_epoch(self) -> int:
        return -(-self.num_items // self.batch_size)

    def item(self, epoch: int, index: int) -> tuple[ReaderInput, list[int]]:
        """Flat item ``index`` of ``epoch``: ``(ReaderInput, targets)``."""
        position = int(np.searchsorted(self._offsets, index, side="right")) - 1
        slot = index - int(self._offsets[position])
        question = int(self._questions[position])
        example = self.examples[question]
        chain = gold_chain(example)
        assert chain is not None
        distractors: list[str] = []
        if slot >= GOLD_SLOTS:
            others = distractor_titles(example, chain)
            rng = random.Random(derive_seed(self.seed, epoch, question))
            distractors = rng.sample(others, min(self.num_distractors, len(others)))
        return reader_item(example, chain, slot, self.reader.encode, distractors)

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[dict[str, torch.Tensor]]:
        order = torch.randperm(
            self.num_items, generator=generator_for(self.seed, "cogqa-reader", epoch)
        )
        for b in range(start, self.batches_per_epoch):
            rows = order[b * self.batch_size : (b + 1) * self.batch_size].tolist()
            items = [self.item(epoch, i) for i in rows]
            batch = self.reader.collate([inp for inp, _ in items])
            batch["targets"] = torch.tensor([t for _, t in items], dtype=torch.long)
            yield batch


class GraphBatches:
    """System 2 batches: one training graph per batch, ``{"index": [1]}`` into the graphs.

    Args:
        num_graphs: how many training graphs there are.
        seed: shuffling seed (per epoch).
    """

    def __init__(self, num_graphs: int, seed: int) -> None:
        self.num_graphs = num_graphs
        self.seed = seed

    @property
    def batches_per_epoch(self) -> int:
        return self.num_graphs

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[dict[str, torch.Tensor]]:
        order = torch.randperm(
            self.num_graphs, generator=generator_for(self.seed, "cogqa-reasoner", epoch)
        )
        for b in range(start, self.num_graphs):
            yield {"index": order[b : b + 1].clone()}
