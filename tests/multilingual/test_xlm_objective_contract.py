"""The objective contract (tests/core/objectives/cases.py) for XLM's MLM/TLM objective."""

from __future__ import annotations

from typing import Any

import torch
from cases import ObjectiveTestCase, token_batch

from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives import ObjectiveMix
from ptm_core.tokenization import VocabInfo
from ptm_multilingual import XLMMaskedLMObjective, xlm_text_encoder
from ptm_multilingual.families import XLM
from ptm_multilingual.model import XLMEncoder

VOCAB = VocabInfo(vocab_size=200, cls_id=0, sep_id=1, pad_id=2, unk_id=3, mask_id=4)


class TestXLMMaskedLMContract(ObjectiveTestCase):
    """A TLM batch: both sentences of a pair in one row, languages per side."""

    objective_cls = XLMMaskedLMObjective
    vocab = VOCAB

    def make_encoder(self) -> torch.nn.Module:
        text = xlm_text_encoder(vocab_size=200, hidden_size=16, num_layers=1, num_heads=2)
        return XLMEncoder(text, ["en", "fr"])

    def make_input(self) -> dict[str, torch.Tensor]:
        batch = token_batch(VOCAB)
        langs = (torch.arange(batch["input_ids"].shape[1]) > 8).long().expand_as(batch["input_ids"])
        return {**batch, "langs": langs.clone(), "tlm": torch.ones(4, dtype=torch.bool)}

    def loss(self, encoder: torch.nn.Module, objective: Any, batch: Any) -> torch.Tensor:
        mix = ObjectiveMix({objective.name: objective})
        return PretrainingModel(encoder, mix, input_keys=XLM.input_keys)(batch).loss
