"""SentiLARE's network: a core encoder whose input adds POS, word-polarity and sentence-label
embeddings (Ke et al., 2020, Sec. 3.2; thu-coai/SentiLARE ``BertEmbeddings``)."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.transformer import EncoderOutput, TransformerEncoder
from ptm_text.sentilr.knowledge import NEUTRAL, OTHER, POLARITY_NAMES, POS_NAMES

# The batch keys of the knowledge inputs, (B, L) each.
POS_KEY, POLARITY_KEY, LABEL_KEY = "sentilr_pos", "sentilr_polarity", "sentilr_label_ids"


class SentiLRKnowledgeEmbeddings(nn.Module):
    """The three tables SentiLARE adds to BERT's embedding sum, before its LayerNorm.

    As the reference: POS ``(5, E)`` whose "other" row (4) is its padding row, word
    polarity ``(3, E)`` padded at "neutral" (2), sentence label ``(num_labels + 1, E)``
    padded at "unknown" (``num_labels``); every row drawn from ``N(0, 0.02)`` (BERT's
    ``init_weights`` overwrites the zero padding rows), and the padding rows get no
    gradient through the lookup (they do through a tied prediction head).

    Args:
        hidden_size: the width ``E`` of the encoder's embedding sum.
        num_labels: sentence classes of the pre-training corpus.

    Shapes:
        pos / polarity / label_ids ``(B, L)`` -> ``(B, L, E)``.
    """

    def __init__(self, hidden_size: int, num_labels: int) -> None:
        super().__init__()
        if num_labels < 2:
            raise ValueError(f"num_labels={num_labels}: a sentiment corpus has >= 2 labels")
        self.num_labels = num_labels
        self.pos = nn.Embedding(len(POS_NAMES), hidden_size, padding_idx=OTHER)
        self.polarity = nn.Embedding(len(POLARITY_NAMES), hidden_size, padding_idx=NEUTRAL)
        self.label = nn.Embedding(num_labels + 1, hidden_size, padding_idx=num_labels)
        for table in (self.pos, self.polarity, self.label):
            nn.init.normal_(table.weight, std=0.02)

    def forward(self, pos: Tensor, polarity: Tensor, label_ids: Tensor | None = None) -> Tensor:
        summed = self.pos(pos) + self.polarity(polarity)
        if label_ids is not None:
            summed = summed + self.label(label_ids)
        return summed  # (B, L, E)


class SentiLRModel(nn.Module):
    """A core :class:`~ptm_core.encoders.transformer.TransformerEncoder` read with SentiLARE's
    knowledge inputs (through the encoder's ``extra_embeds`` seam).

    Args:
        encoder: the text encoder (BERT preset, or a pre-trained ``final/``).
        knowledge: the POS/polarity/label tables.
        record: the ``sentilr`` record its folder keeps (label names, knowledge settings).

    Inputs: the encoder's (``input_ids``, ``attention_mask``, ``position_ids``,
    ``token_type_ids``) and ``sentilr_pos``, ``sentilr_polarity`` ``(B, L)`` and, optional,
    ``sentilr_label_ids`` ``(B, L)`` (left out, every position reads "unknown", as the
    reference feeds it when fine-tuning). Returns the encoder's output.
    """

    def __init__(
        self,
        encoder: TransformerEncoder,
        knowledge: SentiLRKnowledgeEmbeddings,
        record: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.knowledge = knowledge
        self.record = dict(record or {})

    def forward(
        self,
        input_ids: Tensor,
        sentilr_pos: Tensor,
        sentilr_polarity: Tensor,
        attention_mask: Any = None,
        position_ids: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        sentilr_label_ids: Tensor | None = None,
        **kwargs: Any,
    ) -> EncoderOutput:
        if sentilr_label_ids is None:
            sentilr_label_ids = sentilr_pos.new_full(sentilr_pos.shape, self.knowledge.num_labels)
        extra = self.knowledge(sentilr_pos, sentilr_polarity, sentilr_label_ids)
        return self.encoder(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            token_type_ids=token_type_ids,
            extra_embeds=extra,
            **kwargs,
        )

    # TextBackbone: objectives read the text stack's numbers and token table.
    @property
    def hidden_size(self) -> int:
        return self.encoder.hidden_size

    @property
    def vocab_size(self) -> int:
        return self.encoder.vocab_size

    @property
    def word_embeddings(self) -> nn.Embedding:
        return self.encoder.word_embeddings

    @property
    def text_config(self) -> EncoderConfig:
        return self.encoder.config

    @property
    def config(self) -> EncoderConfig:
        return self.encoder.config

    def checkpoint_config(self) -> dict[str, Any]:
        """What training checkpoints record beside the encoder's config."""
        return {"sentilr": {"num_labels": self.knowledge.num_labels}}
