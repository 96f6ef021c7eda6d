"""SentiLARE's label-aware masked language model (Ke et al., 2020, Sec. 3.3)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ptm_core.encoders.transformer import EncoderOutput
from ptm_core.heads.mlm import MaskedLMHead
from ptm_core.objectives.base import IGNORE_INDEX, Batch, Objective, ObjectiveOutput, accuracy
from ptm_core.tokenization import VocabInfo
from ptm_text.sentilr.knowledge import NEUTRAL, OTHER
from ptm_text.sentilr.masking import (
    LATE_SUPERVISION_PROB,
    MASK_TOKEN_PROB,
    RANDOM_TOKEN_PROB,
    SENTIMENT_WORD_PROB,
    WORD_PROB,
    check_probability,
    label_aware_masking,
)
from ptm_text.sentilr.model import LABEL_KEY, POLARITY_KEY, POS_KEY, SentiLRKnowledgeEmbeddings

# Example keys the data side reads (written by ptm_text.sentilr.data): the 1-based word of
# each piece (0 at [CLS], [SEP] and padding, which pad_examples fills with 0) and the label.
WORD_KEY, SENTENCE_LABEL_KEY = "sentilr_word", "sentilr_label"


def knowledge_at_words(batch: Batch) -> tuple[Tensor, Tensor, Tensor]:
    """``(word_index, pos, polarity)`` of a padded batch: 0-based word index (-1 off words),
    and "other"/"neutral" off words (padding reads 0 after ``pad_examples``)."""
    word_index = batch[WORD_KEY].long() - 1
    on_word = word_index >= 0
    pos = torch.where(on_word, batch[POS_KEY].long(), OTHER)
    polarity = torch.where(on_word, batch[POLARITY_KEY].long(), NEUTRAL)
    return word_index, pos, polarity


class LabelAwareMLMObjective(Objective):
    """SentiLARE's label-aware masked language model (Ke et al., 2020).

    Data side (every batch, :func:`~ptm_text.sentilr.masking.label_aware_masking`): whole
    words are masked, 15% of ordinary words and 30% of sentiment words, 80/10/10; each row
    is an *early fusion* row (the sentence label added to every word's input) or, with
    probability ``late_supervision_prob`` = 0.2, a *late supervision* row (label
    "unknown"; the label is predicted at ``[CLS]``).

    Loss side, as the reference's ``RobertaForPreTraining``: four heads (dense, GELU,
    LayerNorm, decoder tied to the matching input table) predict the masked words' tokens,
    POS tags and polarities, and, at ``[CLS]`` of late-supervision rows, the sentence label
    (``num_labels + 1`` classes, the table's rows). Loss = the sum of the four
    cross-entropies, each averaged over its own targets (a part with no target in the
    batch adds 0).

    Args:
        vocab: the tokenizer's special ids.
        hidden_size, vocab_size, tie_to, activation, layer_norm_eps: the text stack's (as
            :class:`~ptm_core.objectives.mlm.MaskedLMObjective`).
        knowledge: the network's knowledge tables (the POS, polarity and label heads tie
            to them); default ``encoder.knowledge``.
        encoder: the network (a :class:`~ptm_text.sentilr.model.SentiLRModel`), when
            ``knowledge`` is not given.
        word_prob: chance that an ordinary word is chosen (15%).
        sentiment_word_prob: chance that a sentiment word is chosen (30%).
        late_supervision_prob: share of late-supervision rows (0.2).
        mask_token_prob: chosen words replaced by ``[MASK]`` (0.8).
        random_token_prob: chosen words replaced by other pieces (0.1).
        use_labels: ``False`` is the label-free ablation: the label input is "unknown"
            everywhere and never predicted (the knowledge inputs, whole-word masking and
            the POS/polarity targets stay).

    Batch keys: reads ``sentilr_word``, ``sentilr_pos``, ``sentilr_polarity``,
    ``sentilr_label``; writes the corrupted ``input_ids``, ``sentilr_pos``,
    ``sentilr_polarity``, ``sentilr_label_ids`` and the targets.
    Metrics: ``token_accuracy``, ``pos_accuracy``, ``polarity_accuracy``,
    ``label_accuracy``, the four part losses, ``late_rows``.
    """

    name = "sentilr"
    batch_keys = (
        LABEL_KEY,
        "sentilr_token_labels",
        "sentilr_pos_labels",
        "sentilr_polarity_labels",
        "sentilr_label_targets",
        "sentilr_late",
    )

    def __init__(
        self,
        vocab: VocabInfo,
        *,
        hidden_size: int,
        vocab_size: int,
        knowledge: SentiLRKnowledgeEmbeddings | None = None,
        encoder: torch.nn.Module | None = None,
        tie_to: torch.nn.Embedding | None = None,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
        word_prob: float = WORD_PROB,
        sentiment_word_prob: float = SENTIMENT_WORD_PROB,
        late_supervision_prob: float = LATE_SUPERVISION_PROB,
        mask_token_prob: float = MASK_TOKEN_PROB,
        random_token_prob: float = RANDOM_TOKEN_PROB,
        use_labels: bool = True,
    ) -> None:
        super().__init__()
        knowledge = knowledge if knowledge is not None else getattr(encoder, "knowledge", None)
        if not isinstance(knowledge, SentiLRKnowledgeEmbeddings):
            raise TypeError(
                "LabelAwareMLMObjective predicts POS, polarity and the label through the "
                "network's knowledge tables: build it on a SentiLRModel (family sentilr), "
                f"not on a {type(encoder).__name__}"
            )
        for key, value in (
            ("word_prob", word_prob),
            ("sentiment_word_prob", sentiment_word_prob),
            ("late_supervision_prob", late_supervision_prob),
            ("mask_token_prob + random_token_prob", mask_token_prob + random_token_prob),
        ):
            check_probability(key, value)
        self.vocab = vocab
        self.num_labels = knowledge.num_labels
        self.use_labels = use_labels
        self.rates = {
            "word_prob": word_prob,
            "sentiment_word_prob": sentiment_word_prob,
            "late_supervision_prob": late_supervision_prob,
            "mask_token_prob": mask_token_prob,
            "random_token_prob": random_token_prob,
        }

        def head(size: int, table: torch.nn.Embedding | None) -> MaskedLMHead:
            return MaskedLMHead(
                hidden_size, size, activation=activation, layer_norm_eps=layer_norm_eps,
                tie_to=table,
            )  # fmt: skip

        self.token_head = head(vocab_size, tie_to)
        self.pos_head = head(knowledge.pos.num_embeddings, knowledge.pos)
        self.polarity_head = head(knowledge.polarity.num_embeddings, knowledge.polarity)
        self.label_head = head(knowledge.label.num_embeddings, knowledge.label)

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        missing = [
            k for k in (WORD_KEY, POS_KEY, POLARITY_KEY, SENTENCE_LABEL_KEY) if k not in batch
        ]
        if missing:
            raise KeyError(
                f"LabelAwareMLMObjective needs {missing} in the batch: build the examples with "
                "ptm_text.sentilr.data (family sentilr, a labelled corpus)"
            )
        word_index, pos, polarity = knowledge_at_words(batch)
        masked = label_aware_masking(
            batch["input_ids"],
            word_index,
            pos,
            polarity,
            batch[SENTENCE_LABEL_KEY].long(),
            num_labels=self.num_labels,
            mask_id=self.vocab.mask_id,
            generator=generator,
            **self.rates,
        )
        label_ids, label_targets = masked.label_ids, masked.label_targets
        if not self.use_labels:
            label_ids = torch.full_like(label_ids, self.num_labels)
            label_targets = torch.full_like(label_targets, IGNORE_INDEX)
        return {
            **batch,
            "input_ids": masked.input_ids,
            POS_KEY: masked.pos,
            POLARITY_KEY: masked.polarity,
            LABEL_KEY: label_ids,
            "sentilr_token_labels": masked.token_labels,
            "sentilr_pos_labels": masked.pos_labels,
            "sentilr_polarity_labels": masked.polarity_labels,
            "sentilr_label_targets": label_targets,
            "sentilr_late": masked.late,
        }

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        hidden = encoder_output.last_hidden_state  # (B, L, D)
        chosen = batch["sentilr_token_labels"] != IGNORE_INDEX
        states = hidden[chosen]  # (M, D)
        metrics: dict[str, Tensor] = {}
        total = hidden.new_zeros(())
        parts = (
            ("token", self.token_head, states, batch["sentilr_token_labels"][chosen]),
            ("pos", self.pos_head, states, batch["sentilr_pos_labels"][chosen]),
            ("polarity", self.polarity_head, states, batch["sentilr_polarity_labels"][chosen]),
            ("label", self.label_head, hidden[:, 0], batch["sentilr_label_targets"]),
        )
        for name, head, inputs, targets in parts:
            keep = targets != IGNORE_INDEX
            logits = head(inputs[keep]).float()
            # nothing to predict in this batch: 0, still attached to the graph
            loss = F.cross_entropy(logits, targets[keep]) if keep.any() else logits.sum() * 0.0
            total = total + loss
            metrics[f"{name}_loss"] = loss.detach()
            metrics[f"{name}_accuracy"] = accuracy(logits.detach(), targets[keep])
        metrics["late_rows"] = batch["sentilr_late"].float().sum().detach()
        return ObjectiveOutput(loss=total, metrics=metrics)
