"""UniLM: one shared encoder, four self-attention masks, cloze loss (Dong et al., 2019)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor, nn

from ptm_core.data.layouts import (
    SegmentPairRows,
    cached_plan,
    iter_segment_pairs,
)
from ptm_core.data.segments import TokenizedDocument, build_segment_pair_examples
from ptm_core.data.token_store import TokenStore
from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.modules.attention_masks import UNILM_MASK_KINDS, unilm_mask
from ptm_core.modules.attention_structure import unilm_structure
from ptm_core.objectives.base import Batch, Example, ObjectiveOutput
from ptm_core.objectives.causal_lm import padding_of
from ptm_core.objectives.mlm import MaskedLMObjective, MaskingMode
from ptm_core.tokenization import VocabInfo

# The paper's schedule: 1/3 bidirectional, 1/3 seq2seq, 1/6 each unidirectional direction.
PAPER_PROPORTIONS: dict[str, float] = {
    "bidirectional": 1 / 3,
    "seq2seq": 1 / 3,
    "left_to_right": 1 / 6,
    "right_to_left": 1 / 6,
}


class UniLMObjective(MaskedLMObjective):
    """Unified LM pre-training (Dong et al., 2019, "UniLM").

    One encoder is trained with the cloze (masked LM) loss under a self-attention mask
    that is drawn once per batch: bidirectional (BERT), left-to-right, right-to-left
    (GPT-style unidirectional LMs: a ``[MASK]`` sees only the tokens on one side and
    itself) or sequence-to-sequence (segment A is the source and sees itself; segment B
    is the target and sees the source and its own prefix). Masks come from
    :mod:`ptm_core.modules.attention_masks`; masking (15%, 80/10/10) as
    :class:`MaskedLMObjective`.

    Examples are segment pairs ``[CLS] A [SEP] B [SEP]`` where B is the true continuation
    of A (source and target of the seq2seq LM; the other masks read the pair as one text).

    Args:
        hidden_size, vocab_size, tie_to, activation, layer_norm_eps: as
            :class:`~ptm_core.objectives.mlm.MaskedLMObjective`.
        vocab: the tokenizer's special ids and vocabulary size.
        proportions: mask kind -> probability per batch (normalised; missing kinds are
            never drawn); default :data:`PAPER_PROPORTIONS`.
        mask_prob, mask_token_prob, random_token_prob, mode, masked_only: as
            :class:`MaskedLMObjective`.
        short_seq_prob: probability of a shorter example (as BERT's pairs).
        structured_masks: write ``attention_mask`` as an
            :class:`~ptm_core.modules.attention_structure.AttentionStructure` (per-token
            ``[B, L]`` tensors; the encoder's attention backend runs it, e.g. flex on CUDA)
            instead of the ``(B, L, L)`` tensor. Same visibility (``.dense()`` equals the
            tensor); off by default.

    Batch keys: writes ``input_ids``, ``mlm_labels``, ``attention_mask`` ``(B, L, L)``
    (or a structure, see ``structured_masks``) and ``unilm_mask_kind`` (0-d index into
    :data:`UNILM_MASK_KINDS`).
    Metrics: ``loss_<kind>`` (the batch's kind only) and the MLM metrics.
    """

    name = "unilm"

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        hidden_size: int,
        vocab_size: int,
        tie_to: nn.Embedding | None = None,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
        proportions: Mapping[str, float] | None = None,
        mask_prob: float = 0.15,
        mask_token_prob: float = 0.8,
        random_token_prob: float = 0.1,
        mode: MaskingMode = "dynamic",
        masked_only: bool = True,
        short_seq_prob: float = 0.1,
        structured_masks: bool = False,
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
        given = dict(PAPER_PROPORTIONS if proportions is None else proportions)
        unknown = sorted(set(given) - set(UNILM_MASK_KINDS))
        if unknown:
            raise ValueError(
                f"unknown UniLM mask kind(s) {unknown} in proportions; valid kinds: "
                f"{', '.join(UNILM_MASK_KINDS)}"
            )
        if any(p < 0 for p in given.values()) or sum(given.values()) <= 0:
            raise ValueError(f"proportions must be >= 0 with a positive sum, got {given}")
        total = sum(given.values())
        self.proportions = {kind: given.get(kind, 0.0) / total for kind in UNILM_MASK_KINDS}
        self.short_seq_prob = short_seq_prob
        self.structured_masks = structured_masks

    def rows(self, store: TokenStore, max_length: int, seed: int) -> SegmentPairRows:
        """Source/target pairs (no random B, no label), planned once and built per index."""
        settings = {"max_length": max_length, "seed": seed, "short_seq_prob": self.short_seq_prob}
        plan = cached_plan(
            store,
            "unilm",
            settings,
            lambda: iter_segment_pairs(
                store,
                max_length,
                random.Random(seed),
                random_next_prob=0.0,
                short_seq_prob=self.short_seq_prob,
            ),
        )
        return SegmentPairRows(store, plan, self.vocab, label_key=None)

    def build_examples(
        self,
        documents: Sequence[TokenizedDocument],
        max_length: int,
        rng: random.Random,
    ) -> list[Example]:
        """Source/target pairs: consecutive text of one document, never a random B."""
        examples = build_segment_pair_examples(
            documents,
            self.vocab,
            max_length,
            rng,
            random_next_prob=0.0,
            short_seq_prob=self.short_seq_prob,
        )
        for example in examples:
            example.pop("next_sentence_label", None)
        return examples

    def draw_kind(self, generator: torch.Generator) -> int:
        """Index into :data:`UNILM_MASK_KINDS` of this batch's mask."""
        probs = torch.tensor([self.proportions[k] for k in UNILM_MASK_KINDS])
        return int(torch.multinomial(probs, 1, generator=generator))

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        padding = padding_of(batch)
        batch = super().collate(batch, generator)
        kind = self.draw_kind(generator)
        build = unilm_structure if self.structured_masks else unilm_mask
        mask = build(UNILM_MASK_KINDS[kind], padding, batch.get("token_type_ids"))
        return {**batch, "attention_mask": mask, "unilm_mask_kind": torch.tensor(kind)}  # type: ignore[dict-item]

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        out = super().forward(encoder_output, batch)
        kind_index: Tensor | None = batch.get("unilm_mask_kind")
        if kind_index is not None:
            kind = UNILM_MASK_KINDS[int(kind_index)]
            out.metrics[f"loss_{kind}"] = out.loss.detach()
        return out
