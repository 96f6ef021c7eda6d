"""GLM's objective: autoregressive blank infilling on ptm's shared encoder."""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F
from torch import nn

from ptm_core.data.layouts import SENTENCE_STARTS
from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.heads.mlm import MaskedLMHead
from ptm_core.modules.attention_structure import AttentionStructure
from ptm_core.objectives.base import IGNORE_INDEX, Batch, Objective, ObjectiveOutput, accuracy
from ptm_core.objectives.causal_lm import padding_of
from ptm_core.tokenization import VocabInfo
from ptm_text.glm.construction import (
    DOCUMENT,
    MASK_RATIO,
    MAX_SPAN_LENGTH,
    POISSON_LAMBDA,
    SENTENCE,
    SPAN,
    BlankInfilling,
    build_blank_infilling,
    sample_row_spans,
    sample_sentence_spans,
)


class GLMObjective(Objective):
    """General Language Model pre-training (Du et al., 2022, "GLM"): blank infilling.

    Data side (per batch): every row ``[CLS] ... [SEP]`` loses spans (Poisson(λ=3)
    lengths until 15% of the row is covered; for a GLM-Sent batch, whole sentences until
    15% is covered; for a GLM-Doc batch, one span of a uniform 50-100% share) to one
    ``[MASK]`` each (part A); the spans follow in shuffled
    order, each read as ``[START] + span`` and predicted as ``span + [END]`` (part B), as
    :func:`~ptm_text.glm.construction.build_blank_infilling` builds them. Part A attends
    bidirectionally, part B causally over B and to all of A: an
    :class:`~ptm_core.modules.attention_structure.AttentionStructure` prefix (per-token
    ``[B, L]`` tensors, never a ``[B, L, L]`` tensor), which the encoder's attention
    backend runs (flex on CUDA).

    2D positions: the first is the encoder's own position table (``position_ids`` = the
    position in A); the second, the position inside a span, is this objective's
    ``block_positions`` table, added to the embedding sum through the encoder's
    ``extra_embeds`` (:meth:`rewrite_inputs`). Its row 0 (all of part A) is fixed at
    zero, unlike GLM's learned row 0: part A then reads exactly as plain text, so the
    saved encoder fine-tunes and serves without this table.

    Multi-task pre-training (GLM section 2.3): each batch is one task, drawn as GLM's
    ``construct_blocks`` draws it: GLM-Doc with ``document_prob``, GLM-Sent with
    ``sentence_prob``, blank infilling otherwise. With ``task_masks``, a sentence's blank
    reads as GLM's ``[sMASK]`` and the document span's as ``[gMASK]``: ptm's vocabularies
    have no such tokens, so each is ``[MASK]`` plus a learned task vector (this
    objective's ``task_embeddings``, row 0 fixed at zero), added through ``extra_embeds``
    like the block positions.

    Loss side: an MLM-shaped head tied to the token table, cross-entropy over part B.

    ptm's vocabularies have no ``[sop]``/``[eop]``: ``[START]`` is ``[CLS]`` (it never
    occurs in part B otherwise, and its block position 1 tells it from the row's first
    token) and ``[END]`` is ``[SEP]``.

    Args:
        vocab: the tokenizer's special ids and vocabulary size.
        hidden_size, vocab_size, tie_to, activation, layer_norm_eps: as
            :class:`~ptm_core.objectives.mlm.MaskedLMObjective`.
        encoder_config: the encoder's config (its ``max_positions`` sizes the block table).
        mask_ratio: share of each row the Poisson spans cover (GLM: 0.15).
        poisson_lambda: mean span length before truncation (GLM: 3).
        max_span_length: lengths ``1 .. max_span_length - 1`` are drawn (GLM: 40).
        document_prob: probability that a batch is a GLM-Doc batch (one long span per
            row); 0 = GLM-Base's blank infilling only.
        sentence_prob: probability that a batch is a GLM-Sent batch (whole sentences
            until ``sentence_ratio`` of each row is covered; GLM's ``gap_sentence_prob``).
            Rows then need the corpus's sentence boundaries (``sentence_starts``), which
            ptm's single-segment layout writes when this is above 0.
        sentence_ratio: share of a row the sentences cover (GLM's ``gap_sentence_ratio``:
            0.15).
        task_masks: mark sentence and document blanks as ``[sMASK]``/``[gMASK]`` (GLM's
            ``--task-mask``); False: every blank is a plain ``[MASK]``.

    Batch keys: reads ``sentence_starts`` (GLM-Sent); writes ``input_ids``,
    ``attention_mask`` (a structure), ``position_ids``, ``token_type_ids`` (zeros),
    ``glm_labels``, ``glm_block_position_ids`` and ``glm_task_ids``.
    Metrics: ``accuracy``, ``predictions``, ``document`` (1 on GLM-Doc batches),
    ``sentence`` (1 on GLM-Sent batches).
    """

    name = "glm"

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        hidden_size: int,
        vocab_size: int,
        encoder_config: EncoderConfig,
        tie_to: nn.Embedding | None = None,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
        mask_ratio: float = MASK_RATIO,
        poisson_lambda: float = POISSON_LAMBDA,
        max_span_length: int = MAX_SPAN_LENGTH,
        document_prob: float = 0.0,
        sentence_prob: float = 0.0,
        sentence_ratio: float = MASK_RATIO,
        task_masks: bool = True,
    ) -> None:
        super().__init__()
        if vocab.vocab_size != vocab_size:
            raise ValueError(
                f"tokenizer has {vocab.vocab_size} ids but the encoder's vocab_size is "
                f"{vocab_size}; build the encoder with the tokenizer's size"
            )
        if not 0.0 < mask_ratio < 1.0:
            raise ValueError(f"glm mask_ratio must be in (0, 1), got {mask_ratio}")
        for key, value in (("document_prob", document_prob), ("sentence_prob", sentence_prob)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"glm {key} must be in [0, 1], got {value}")
        if document_prob + sentence_prob > 1.0 + 1e-9:
            raise ValueError(
                f"glm document_prob + sentence_prob is {document_prob + sentence_prob}; the "
                "two task shares must add up to at most 1 (the rest is blank infilling)"
            )
        if not 0.0 < sentence_ratio < 1.0:
            raise ValueError(f"glm sentence_ratio must be in (0, 1), got {sentence_ratio}")
        if max_span_length < 2 or poisson_lambda <= 0:
            raise ValueError(
                f"glm needs max_span_length >= 2 and poisson_lambda > 0, got "
                f"{max_span_length} and {poisson_lambda}"
            )
        self.vocab = vocab
        self.mask_ratio = mask_ratio
        self.poisson_lambda = poisson_lambda
        self.max_span_length = max_span_length
        self.document_prob = document_prob
        self.sentence_prob = sentence_prob
        self.sentence_ratio = sentence_ratio
        self.task_masks = task_masks
        self.row_keys = (SENTENCE_STARTS,) if sentence_prob > 0 else ()
        width = tie_to.embedding_dim if tie_to is not None else hidden_size
        self.block_positions = nn.Embedding(encoder_config.max_positions + 1, width, padding_idx=0)
        nn.init.normal_(self.block_positions.weight, std=0.02)
        with torch.no_grad():
            self.block_positions.weight[0].zero_()
        self.head = MaskedLMHead(
            hidden_size,
            vocab_size,
            activation=activation,
            layer_norm_eps=layer_norm_eps,
            tie_to=tie_to,
            embedding_size=width if tie_to is not None else None,
        )
        # [MASK] + row 1 reads as [sMASK], [MASK] + row 2 as [gMASK]; row 0 stays zero.
        # Made after the head, so a run without task blanks starts from the same weights
        # as before task masks existed.
        self.task_embeddings: nn.Embedding | None = None
        if task_masks:
            self.task_embeddings = nn.Embedding(3, width, padding_idx=0)
            nn.init.normal_(self.task_embeddings.weight, std=0.02)
            with torch.no_grad():
                self.task_embeddings.weight[0].zero_()

    def blank_rows(
        self,
        rows: list[list[int]],
        rng: random.Random,
        task: int = SPAN,
        sentence_starts: list[list[int]] | None = None,
    ) -> list[BlankInfilling]:
        """Each token row as a GLM sample of ``task`` (spans drawn with ``rng``).

        Args:
            rows: ``[CLS] ... [SEP]`` token rows.
            rng: the batch's random source.
            task: :data:`SPAN` (Poisson spans), :data:`SENTENCE` (whole sentences, needs
                ``sentence_starts``) or :data:`DOCUMENT` (one long span).
            sentence_starts: per-row sentence-start flags, as long as the rows.
        """
        samples = []
        for b, tokens in enumerate(rows):
            if task == SENTENCE:
                if sentence_starts is None:
                    raise ValueError("glm sentence rows need their sentence_starts flags")
                spans = sample_sentence_spans(sentence_starts[b], rng, ratio=self.sentence_ratio)
            else:
                spans = sample_row_spans(
                    len(tokens),
                    rng,
                    document=task == DOCUMENT,
                    ratio=self.mask_ratio,
                    lam=self.poisson_lambda,
                    max_span_length=self.max_span_length,
                )
            samples.append(
                build_blank_infilling(
                    tokens,
                    spans,
                    mask_id=self.vocab.mask_id,
                    start_id=self.vocab.cls_id,
                    end_id=self.vocab.sep_id,
                    task=task if self.task_masks else SPAN,
                )
            )
        return samples

    def draw_task(self, rng: random.Random) -> int:
        """The batch's task, from one uniform draw: GLM-Doc below ``document_prob``, then
        GLM-Sent for the next ``sentence_prob``, blank infilling above."""
        draw = rng.random()
        if draw < self.document_prob:
            return DOCUMENT
        if draw < self.document_prob + self.sentence_prob:
            return SENTENCE
        return SPAN

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        if "document_ids" in batch:
            raise ValueError(
                "glm blanks whole rows and data.pack=true packs several documents in one; "
                "set data.pack=false"
            )
        padding = padding_of(batch)
        ids = batch["input_ids"]
        rows = [ids[b][padding[b]].tolist() for b in range(ids.shape[0])]
        rng = random.Random(int(torch.randint(0, 2**62, (1,), generator=generator)))
        task = self.draw_task(rng)
        starts = None
        if task == SENTENCE:
            flags = batch.get(SENTENCE_STARTS)
            if flags is None:
                raise ValueError(
                    f"glm sentence_prob={self.sentence_prob} needs rows that carry the "
                    f"corpus's sentence boundaries ('{SENTENCE_STARTS}'); ptm's single-segment "
                    "layout writes them (ptm pretrain / build_examples do so for this "
                    "objective). Rows built another way: add the key, or set sentence_prob=0"
                )
            starts = [flags[b][padding[b]].tolist() for b in range(ids.shape[0])]
        return {
            **collate_blank_rows(self.blank_rows(rows, rng, task, starts), self.vocab.pad_id),
            "glm_document": torch.tensor(float(task == DOCUMENT)),
            "glm_sentence": torch.tensor(float(task == SENTENCE)),
        }

    def rewrite_inputs(self, batch: Batch) -> Batch:
        """Add the block (in-span) position embeddings, and the ``[sMASK]``/``[gMASK]``
        task vectors, to the encoder's input."""
        block = batch.get("glm_block_position_ids")
        if block is None:
            return batch
        extra = self.block_positions(block)
        tasks = batch.get("glm_task_ids")
        if tasks is not None and self.task_embeddings is not None:
            extra = extra + self.task_embeddings(tasks)
        return {**batch, "extra_embeds": extra}

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        labels = batch["glm_labels"]
        selected = labels != IGNORE_INDEX
        logits = self.head(encoder_output.last_hidden_state[selected])
        targets = labels[selected]
        loss = F.cross_entropy(logits.float(), targets)
        metrics = {
            "accuracy": accuracy(logits, targets),
            "predictions": selected.sum().detach().float(),
        }
        for key in ("document", "sentence"):
            if f"glm_{key}" in batch:
                metrics[key] = batch[f"glm_{key}"].detach()
        return ObjectiveOutput(loss=loss, metrics=metrics)


def collate_blank_rows(samples: list[BlankInfilling], pad_id: int) -> Batch:
    """Pad GLM samples into one batch (the structure hides padding; labels ignore it)."""
    length = max(len(s.input_ids) for s in samples)
    size = (len(samples), length)
    input_ids = torch.full(size, pad_id, dtype=torch.long)
    labels = torch.full(size, IGNORE_INDEX, dtype=torch.long)
    positions = torch.zeros(size, dtype=torch.long)
    block = torch.zeros(size, dtype=torch.long)
    tasks = torch.zeros(size, dtype=torch.long)
    part = torch.ones(size, dtype=torch.long)
    real = torch.zeros(size, dtype=torch.bool)
    for b, s in enumerate(samples):
        n = len(s.input_ids)
        input_ids[b, :n] = torch.tensor(s.input_ids)
        loss_mask = torch.tensor(s.loss_mask, dtype=torch.bool)
        labels[b, :n] = torch.tensor(s.targets).masked_fill(~loss_mask, IGNORE_INDEX)
        positions[b, :n] = torch.tensor(s.position_ids)
        block[b, :n] = torch.tensor(s.block_position_ids)
        if s.task_ids is not None:
            tasks[b, :n] = torch.tensor(s.task_ids)
        part[b, : s.sep] = 0
        real[b, :n] = True
    return {
        "input_ids": input_ids,
        "attention_mask": AttentionStructure.prefix(real, part),  # type: ignore[dict-item,unused-ignore]
        "position_ids": positions,
        "token_type_ids": torch.zeros_like(input_ids),
        "glm_labels": labels,
        "glm_block_position_ids": block,
        "glm_task_ids": tasks,
    }
