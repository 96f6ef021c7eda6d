"""The recurrent LMs' one objective (NetworkLoss) passes the objective contract, through the
networks the runner trains: AWD-LSTM's BPTT model and ELMo's biLM."""

from __future__ import annotations

from typing import Any

import torch
from cases import ObjectiveTestCase
from torch import Tensor, nn

from ptm_classic.families import AWD_LSTM, ELMO
from ptm_classic.recurrent.awd_lstm import AWDLSTMConfig, AWDLSTMLanguageModel, BPTTLanguageModel
from ptm_classic.recurrent.bilm import BiLM, BiLMConfig, BiLMTraining
from ptm_classic.recurrent.lm_objective import NetworkLoss, network_loss
from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives import Objective


class _NetworkLossCase(ObjectiveTestCase):
    objective_cls = NetworkLoss
    input_keys: tuple[str, ...] = ()

    def make_objective(self, encoder: nn.Module) -> Objective:
        return NetworkLoss()

    def data_side(self, objective: Objective, inputs: Any, generator: torch.Generator) -> Any:
        # The batches come from the family's own batch source; the objective adds nothing.
        return objective.collate(dict(inputs), generator)

    def loss(self, encoder: nn.Module, objective: Objective, batch: Any) -> Tensor:
        model = PretrainingModel(encoder, network_loss(), input_keys=self.input_keys)
        return model(batch).loss


class TestNetworkLossOnAWDLSTM(_NetworkLossCase):
    input_keys = AWD_LSTM.input_keys

    def make_encoder(self) -> nn.Module:
        config = AWDLSTMConfig(vocab_size=30, embedding_size=8, hidden_size=12, num_layers=2)
        return BPTTLanguageModel(AWDLSTMLanguageModel(config), batch_size=2)

    def make_input(self) -> Any:
        ids = torch.randint(4, 30, (2, 7), generator=torch.Generator().manual_seed(0))
        return {"input_ids": ids[:, :-1], "labels": ids[:, 1:], "reset": torch.tensor(True)}


class TestNetworkLossOnELMo(_NetworkLossCase):
    input_keys = ELMO.input_keys

    def make_encoder(self) -> nn.Module:
        config = BiLMConfig(
            vocab_size=20,
            filters=[[1, 4], [2, 4]],
            num_highway=1,
            num_layers=1,
            cell_size=16,
            projection_dim=8,
            cell_clip=None,
            proj_clip=None,
            softmax="full",
        )
        return BiLMTraining(BiLM(config))

    def make_input(self) -> Any:
        gen = torch.Generator().manual_seed(0)
        chars = torch.randint(1, 200, (2, 5, 50), generator=gen)
        mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
        targets = torch.randint(3, 20, (2, 5), generator=gen)
        return {"char_ids": chars, "attention_mask": mask, "word_targets": targets}
