"""What every pre-training objective provides: a data side and a loss side."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import torch
from torch import Tensor, nn

from ptm_core.data.token_store import TokenStore
from ptm_core.encoders.transformer import EncoderOutput

Example = dict[str, Any]
Batch = dict[str, Tensor]

IGNORE_INDEX = -100


@dataclass
class ObjectiveOutput:
    """The loss side's result.

    Attributes:
        loss: 0-d tensor to minimise (unweighted).
        metrics: detached scalars to log (accuracy, counts), keyed without prefix.
    """

    loss: Tensor
    metrics: dict[str, Tensor] = field(default_factory=dict)


class Objective(nn.Module):
    """Base class of pre-training objectives.

    An objective owns both halves of its job (DESIGN.md):

    * data side, on the CPU and seeded: :meth:`prepare_example` runs once per example at
      preprocessing (static corruption, BERT), :meth:`collate` runs every time a batch is
      built (dynamic corruption, RoBERTa), :meth:`build_examples` (optional) turns
      tokenised documents into examples when the objective decides how segments are
      paired (NSP, SOP);
    * loss side: the heads it needs (as sub-modules) and :meth:`forward`, which maps the
      encoder output and the batch to an :class:`ObjectiveOutput`.

    Attributes:
        name: short name used as the metrics prefix (``mlm``, ``nsp``).
        batch_keys: keys this objective adds to a batch; the collator pads them.
        needs_segments: the objective embeds a second segment as token type 1 (NSP, SOP,
            StructBERT's sentence-structural task), so an encoder with a one-row token-type
            table (RoBERTa, XLM-R) cannot run it
            (:func:`~ptm_core.checkpoints.init_report.check_segment_objectives` refuses it).
        row_keys: per-token keys this objective reads that the rows must carry beyond
            ``input_ids`` (``"sentence_starts"``: where the corpus's sentences begin, see
            :class:`~ptm_core.data.layouts.SegmentRows`); the layout writes them only when
            an objective of the run asks.
    """

    name: str = "objective"
    batch_keys: tuple[str, ...] = ()
    needs_segments: ClassVar[bool] = False
    row_keys: tuple[str, ...] = ()

    def prepare_example(self, example: Example, generator: torch.Generator) -> Example:
        """Static data side, once per example; default: unchanged."""
        return example

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        """Dynamic data side, once per built batch; default: unchanged."""
        return batch

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        raise NotImplementedError


@runtime_checkable
class BuildsExamples(Protocol):
    """An objective that decides how documents become examples (NSP, SOP, UniLM pairing).

    ``rows`` plans the layout once from the store's boundaries (cached beside a prepared
    corpus) and returns a sequence that builds each example when it is indexed, so the
    corpus is never held in memory; ``build_examples`` builds every example of in-memory
    documents with the same plan.
    """

    def rows(self, store: TokenStore, max_length: int, seed: int) -> Sequence[Example]: ...

    def build_examples(
        self, documents: Sequence[Sequence[Sequence[int]]], max_length: int, rng: random.Random
    ) -> list[Example]: ...


def accuracy(logits: Tensor, labels: Tensor) -> Tensor:
    """Fraction of rows whose arg-max equals the label (labels already filtered).

    Read as "the label's logit is the row's maximum" (a tie counts as correct): on CPU a
    max reduction is about six times cheaper than ``argmax`` over a 30k vocabulary, and
    this metric runs on every training step.
    """
    if labels.numel() == 0:
        return logits.new_zeros(())
    with torch.no_grad():
        picked = logits.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
        return (picked >= logits.amax(dim=-1)).float().mean()
