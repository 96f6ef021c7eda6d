"""KEPLER's knowledge-embedding objective: a KE loss whose entity embeddings are the text
encoder's ``[CLS]`` states of the entity descriptions, trained in the same mix as MLM."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from ptm_core.encoders.transformer import EncoderOutput, TransformerEncoder
from ptm_core.objectives.base import Batch, Objective, ObjectiveOutput
from ptm_core.tokenization import VocabInfo
from ptm_knowledge.kepler.descriptions import EntityDescriptions
from ptm_knowledge.kepler.ke_loss import corrupt_triples, ke_loss, transe_distance

KE_KEYS = (
    "ke_input_ids",
    "ke_attention_mask",
    "ke_relations",
    "ke_heads",
    "ke_tails",
    "ke_negative_heads",
    "ke_negative_tails",
)


def encode_descriptions(encoder: TransformerEncoder, input_ids: Tensor, mask: Tensor) -> Tensor:
    """KEPLER's entity embedding: the encoder's state at ``[CLS]`` (position 0).

    Args:
        encoder: the shared text encoder.
        input_ids: ``(U, L)`` description ids (``[CLS] ... [SEP]``, padded).
        mask: ``(U, L)`` bool, True on real tokens.

    Returns:
        ``(U, D)`` float32 entity embeddings.
    """
    return encoder(input_ids, attention_mask=mask).last_hidden_state[:, 0].float()


class KnowledgeEmbeddingObjective(Objective):
    """KEPLER's KE objective (Wang et al., 2021), TransE form, with negative sampling.

    Data side (:meth:`collate`, seeded, on the CPU): draw ``batch_size`` training triples,
    ``num_negatives`` corruptions of each (head or tail replaced,
    :func:`~ptm_knowledge.kepler.ke_loss.corrupt_triples`), and the padded descriptions of
    the distinct entities they name (from the ids tokenised once,
    :class:`~ptm_knowledge.kepler.descriptions.EntityDescriptions`). Loss side: encode those
    descriptions with the shared encoder (``[CLS]`` state), look up the relations in a
    learnable table, and apply :func:`~ptm_knowledge.kepler.ke_loss.ke_loss`.

    The text batch of the mix is left untouched, so MLM and KE are summed in one step.

    Args:
        encoder: the shared encoder (referenced, not owned: its weights stay the encoder's).
        vocab: the tokenizer's special ids (unused; objectives are built with it).
        descriptions: every entity's tokenised description.
        triples: ``(T, 3)`` int64 ``(head, relation, tail)`` training triples.
        num_relations: size of the relation table.
        batch_size: triples per step.
        num_negatives: ``n`` negatives per triple.
        margin: ``gamma``.
        p_norm: the norm of the TransE distance.

    Batch keys: writes ``ke_input_ids``/``ke_attention_mask`` ``(U, Ld)``,
    ``ke_relations``/``ke_heads``/``ke_tails`` ``(B,)`` and
    ``ke_negative_heads``/``ke_negative_tails`` ``(B, n)`` (entity positions index the
    ``U`` encoded descriptions).
    """

    name = "ke"
    batch_keys = KE_KEYS

    def __init__(
        self,
        encoder: TransformerEncoder,
        vocab: VocabInfo | None = None,
        *,
        descriptions: EntityDescriptions,
        triples: Tensor | np.ndarray,
        num_relations: int,
        batch_size: int = 16,
        num_negatives: int = 1,
        margin: float = 4.0,
        p_norm: float = 1.0,
    ) -> None:
        super().__init__()
        triples = torch.as_tensor(np.asarray(triples), dtype=torch.long)
        if triples.dim() != 2 or triples.shape[1] != 3 or not len(triples):
            raise ValueError(
                f"triples must be a non-empty (T, 3) array, got {tuple(triples.shape)}"
            )
        if batch_size < 1 or num_negatives < 1:
            raise ValueError(
                f"batch_size and num_negatives must be >= 1, got {batch_size}, {num_negatives}"
            )
        # Not a sub-module: the encoder belongs to the pre-training model (one copy of its
        # weights in checkpoints and in heads.safetensors).
        self.__dict__["encoder"] = encoder
        self.descriptions = descriptions
        self.triples = triples
        self.num_entities = len(descriptions)
        self.batch_size = batch_size
        self.num_negatives = num_negatives
        self.margin = float(margin)
        self.p_norm = float(p_norm)
        hidden = encoder.hidden_size
        self.relations = nn.Embedding(num_relations, hidden)
        # RotatE/KEPLER initialisation: uniform in +-(gamma + 2) / D.
        bound = (self.margin + 2.0) / hidden
        nn.init.uniform_(self.relations.weight, -bound, bound)

    @property
    def text_encoder(self) -> TransformerEncoder:
        """The shared encoder whose ``[CLS]`` states are the entity embeddings."""
        return self.__dict__["encoder"]

    def sample(self, generator: torch.Generator) -> Batch:
        """The KE part of a batch (see the class docstring for the keys)."""
        rows = self.triples[
            torch.randint(len(self.triples), (self.batch_size,), generator=generator)
        ]
        heads, relations, tails = rows[:, 0], rows[:, 1], rows[:, 2]
        negative_heads, negative_tails = corrupt_triples(
            heads, tails, self.num_entities, self.num_negatives, generator
        )
        everything = torch.cat([heads, tails, negative_heads.flatten(), negative_tails.flatten()])
        unique, positions = torch.unique(everything, return_inverse=True)
        b, n = self.batch_size, self.batch_size * self.num_negatives
        input_ids, mask = self.descriptions.batch(unique)
        return {
            "ke_input_ids": input_ids,
            "ke_attention_mask": mask,
            "ke_relations": relations,
            "ke_heads": positions[:b],
            "ke_tails": positions[b : 2 * b],
            "ke_negative_heads": positions[2 * b : 2 * b + n].view(b, -1),
            "ke_negative_tails": positions[2 * b + n :].view(b, -1),
        }

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        return {**batch, **self.sample(generator)}

    def forward(self, encoder_output: EncoderOutput, batch: Batch) -> ObjectiveOutput:
        entities = encode_descriptions(
            self.text_encoder, batch["ke_input_ids"], batch["ke_attention_mask"]
        )  # (U, D)
        relations = self.relations(batch["ke_relations"]).float()  # (B, D)
        positive = transe_distance(
            entities[batch["ke_heads"]], relations, entities[batch["ke_tails"]], self.p_norm
        )  # (B,)
        negative = transe_distance(
            entities[batch["ke_negative_heads"]],
            relations[:, None],
            entities[batch["ke_negative_tails"]],
            self.p_norm,
        )  # (B, n)
        loss = ke_loss(positive, negative, self.margin)
        return ObjectiveOutput(
            loss=loss,
            metrics={
                "positive_distance": positive.mean().detach(),
                "negative_distance": negative.mean().detach(),
                # Share of negatives farther than their true triple.
                "pair_accuracy": (negative > positive[:, None]).float().mean().detach(),
            },
        )
