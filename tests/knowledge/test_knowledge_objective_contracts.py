"""The objective contract (tests/core/objectives/cases.py) for ptm-knowledge's objectives."""

from __future__ import annotations

from typing import Any

import torch
from cases import ObjectiveTestCase, token_batch
from knowledge_sample_paths import KG_DIR
from knowledge_sample_paths import VOCAB as VOCAB_FILE

from ptm_core.encoders import bert_encoder
from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives import ObjectiveMix
from ptm_core.tokenization import VocabInfo, WordPieceTokenizer
from ptm_knowledge.ernie.dea import DenoisingEntityAutoencoderObjective
from ptm_knowledge.ernie.knowledge_masking import KnowledgeMaskingObjective
from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder
from ptm_knowledge.family_ernie import ERNIE_THU_INPUTS
from ptm_knowledge.kepler import (
    KnowledgeEmbeddingObjective,
    load_description_graph,
    tokenize_descriptions,
    triple_array,
)
from ptm_knowledge.wklm import EntityReplacementObjective, OutsideMentionsMLMObjective

VOCAB = VocabInfo(vocab_size=50, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


class TestDenoisingEntityAutoencoderContract(ObjectiveTestCase):
    objective_cls = DenoisingEntityAutoencoderObjective
    vocab = VOCAB

    def make_encoder(self) -> torch.nn.Module:
        text = bert_encoder(vocab_size=50, hidden_size=32, num_layers=2, num_heads=2)
        return KnowledgeableEncoder(text, torch.randn(20, 8), 1, entity_heads=2)

    def make_input(self) -> dict[str, torch.Tensor]:
        batch = token_batch(VOCAB)
        entity_ids = torch.full_like(batch["input_ids"], -1)
        entity_ids[:, 1::3] = torch.arange(entity_ids[:, 1::3].numel()).view(4, -1) % 20
        return {**batch, "entity_ids": entity_ids}

    def loss(self, encoder: torch.nn.Module, objective: Any, batch: Any) -> torch.Tensor:
        mix = ObjectiveMix({objective.name: objective})
        return PretrainingModel(encoder, mix, input_keys=ERNIE_THU_INPUTS)(batch).loss


class TestKnowledgeMaskingContract(ObjectiveTestCase):
    objective_cls = KnowledgeMaskingObjective

    def make_input(self) -> dict[str, torch.Tensor]:
        batch = token_batch(self.vocab)
        positions = torch.arange(batch["input_ids"].shape[1]).expand_as(batch["input_ids"])
        real = batch["special_tokens_mask"] == 0
        phrases = torch.where(real, positions // 3, -1)
        entities = torch.where(real & (positions % 5 < 2), positions // 5, -1)
        return {**batch, "phrase_units": phrases, "entity_units": entities}


class TestEntityReplacementContract(ObjectiveTestCase):
    objective_cls = EntityReplacementObjective

    def make_input(self) -> dict[str, torch.Tensor]:
        batch = token_batch(self.vocab)
        labels = torch.full_like(batch["input_ids"], -100)
        ends = torch.zeros_like(batch["input_ids"])
        labels[:, 1], ends[:, 1] = 1, 3
        labels[:, 5], ends[:, 5] = 0, 6
        return {**batch, "mention_labels": labels, "mention_ends": ends}


class TestOutsideMentionsMLMContract(ObjectiveTestCase):
    objective_cls = OutsideMentionsMLMObjective

    def make_input(self) -> dict[str, torch.Tensor]:
        batch = token_batch(self.vocab)
        mentions = torch.zeros_like(batch["input_ids"])
        mentions[:, 2:5] = 1
        return {**batch, "mention_mask": mentions}


class TestKnowledgeEmbeddingContract(ObjectiveTestCase):
    objective_cls = KnowledgeEmbeddingObjective
    tokenizer = WordPieceTokenizer.from_vocab(VOCAB_FILE, lowercase=True)
    vocab = tokenizer.vocab_info

    def make_objective(self, encoder: torch.nn.Module) -> Any:
        kg = load_description_graph(KG_DIR)
        v = self.vocab
        descriptions = tokenize_descriptions(
            kg, self.tokenizer, cls_id=v.cls_id, sep_id=v.sep_id, pad_id=v.pad_id, max_length=40
        )
        return KnowledgeEmbeddingObjective(
            encoder,
            v,
            descriptions=descriptions,
            triples=triple_array(kg),
            num_relations=len(kg.triples.relation_names),
            batch_size=4,
        )
