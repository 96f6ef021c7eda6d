"""Sequence-to-sequence objectives (BART, T5, MASS): shared data side, batches and loss."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ptm_core.objectives.base import IGNORE_INDEX, Batch, Objective, ObjectiveOutput
from ptm_core.tokenization import VocabInfo

# One training source: a document chunk as a list of sentences, each a list of token ids.
Source = Sequence[Sequence[int]]
Seq2SeqExample = dict[str, list[int]]


class Seq2SeqObjective(Objective):
    """Base of sequence-to-sequence objectives: noise a source into an example, and score
    the decoder.

    Data side: an example has ``input_ids`` (encoder input), ``decoder_input_ids`` and
    ``labels`` (``IGNORE_INDEX`` = not predicted), the last two of equal length.
    Subclasses implement :meth:`make_example`; noise is drawn per batch (dynamic), from a
    generator seeded by the batch position, so runs are reproducible and resumable.
    :meth:`collate` takes the sources (sentence lists), not a token batch: the objective
    decides both sides of the pair.

    Loss side (:meth:`forward`): the decoder's token cross-entropy over the predicted
    positions and its accuracy; the output projection is the model's own (tied), so the
    objective has no parameters.

    Args:
        vocab: the tokenizer's :class:`~ptm_core.tokenization.VocabInfo`.
    """

    name = "seq2seq"
    batch_keys: tuple[str, ...] = (
        "input_ids",
        "attention_mask",
        "decoder_input_ids",
        "decoder_attention_mask",
        "labels",
    )
    # Ids the model needs beyond the tokenizer's (T5 sentinels).
    extra_tokens = 0

    def __init__(self, vocab: VocabInfo) -> None:
        super().__init__()
        self.vocab = vocab

    def make_example(self, source: Source, generator: torch.Generator) -> Seq2SeqExample:
        raise NotImplementedError

    def collate(  # type: ignore[override]  # sources in, not a token batch
        self, sources: Sequence[Source], generator: torch.Generator
    ) -> dict[str, Tensor]:
        """Noise every source and pad into a batch (see :func:`pad_seq2seq`)."""
        return pad_seq2seq([self.make_example(s, generator) for s in sources], self.vocab.pad_id)

    def forward(self, model_output: Any, batch: Batch) -> ObjectiveOutput:
        """Token cross-entropy of ``model_output.logits`` ``(B, T, V)`` against ``labels``."""
        logits = model_output.logits
        labels = batch["labels"]
        loss = F.cross_entropy(
            logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX
        )
        predicted = labels != IGNORE_INDEX
        correct = (logits.argmax(-1) == labels) & predicted
        accuracy = correct.sum() / predicted.sum().clamp(min=1)
        return ObjectiveOutput(loss=loss, metrics={"accuracy": accuracy.detach().float()})


def shift_right(target: Sequence[int], start_id: int) -> list[int]:
    """Teacher-forcing decoder input: ``[start] + target[:-1]``."""
    return [start_id, *target[:-1]]


def pad_seq2seq(examples: Sequence[Seq2SeqExample], pad_id: int) -> dict[str, Tensor]:
    """Right-pad examples into ``input_ids``/``attention_mask`` ``(B, S)`` and
    ``decoder_input_ids``/``decoder_attention_mask``/``labels`` ``(B, T)``."""
    if not examples:
        raise ValueError("cannot build a batch from zero examples")
    source_len = max(len(e["input_ids"]) for e in examples)
    target_len = max(len(e["decoder_input_ids"]) for e in examples)

    def pad(rows: list[list[int]], length: int, value: int) -> Tensor:
        return torch.tensor([r + [value] * (length - len(r)) for r in rows], dtype=torch.long)

    inputs = [list(e["input_ids"]) for e in examples]
    dec = [list(e["decoder_input_ids"]) for e in examples]
    return {
        "input_ids": pad(inputs, source_len, pad_id),
        "attention_mask": pad([[1] * len(r) for r in inputs], source_len, 0),
        "decoder_input_ids": pad(dec, target_len, pad_id),
        "decoder_attention_mask": pad([[1] * len(r) for r in dec], target_len, 0),
        "labels": pad([list(e["labels"]) for e in examples], target_len, IGNORE_INDEX),
    }


def flatten(source: Source) -> list[int]:
    """The source's sentences concatenated."""
    return [token for sentence in source for token in sentence]


def randint(generator: torch.Generator, low: int, high: int) -> int:
    """Uniform integer in ``[low, high)``."""
    return int(torch.randint(low, high, (1,), generator=generator))
