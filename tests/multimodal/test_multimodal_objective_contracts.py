"""The objective contract (tests/core/objectives/cases.py) for ptm-multimodal's objectives,
on a few synthetic image-caption pairs (one caption swapped, so matching has both labels)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from cases import ObjectiveTestCase

from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives import ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import WordPieceTokenizer
from ptm_multimodal import (
    AlignmentObjective,
    ImageTextBatches,
    ImageTextMatchObjective,
    MaskedRegionObjective,
    read_image_text_pairs,
    vilbert,
    visualbert,
)
from ptm_multimodal.families import INPUT_KEYS
from ptm_multimodal.lxmert import lxmert
from ptm_multimodal.lxmert_pretraining import (
    LxmertImageQAObjective,
    LxmertMaskedLMObjective,
    LxmertMatchingObjective,
    LxmertObjectPredictionObjective,
)
from ptm_multimodal.synthetic import vocabulary

TINY = dict(
    hidden_size=32,
    num_layers=1,
    num_heads=2,
    intermediate_size=64,
    max_positions=32,
    dropout=0.0,
    attention_dropout=0.0,
)


class _MultimodalContract(ObjectiveTestCase):
    architecture = "vilbert"

    @pytest.fixture(autouse=True)
    def _pairs(
        self, synthetic_dirs: tuple[Path, Path], caption_tokenizer: WordPieceTokenizer
    ) -> None:
        self.pairs = read_image_text_pairs(synthetic_dirs[0])
        self.tokenizer = caption_tokenizer

    def make_encoder(self) -> torch.nn.Module:
        spec = self.pairs.features.spec
        common = dict(vocab_size=self.tokenizer.vocab_info.vocab_size, feature_spec=spec)
        if self.architecture == "visualbert":
            return visualbert(visual_embedding_dim=spec.feature_size, **common, **TINY)
        if self.architecture == "lxmert":
            return lxmert(
                visual_embedding_dim=spec.feature_size,
                hidden_size=32,
                num_heads=2,
                intermediate_size=64,
                l_layers=1,
                r_layers=1,
                x_layers=1,
                max_positions=32,
                **common,
            )
        return vilbert(
            visual_embedding_dim=spec.feature_size,
            image_hidden_size=16,
            image_num_layers=1,
            image_num_heads=2,
            co_hidden_size=32,
            co_num_heads=2,
            co_attention_after=[[1, 0]],
            **common,
            **TINY,
        )

    def make_objective(self, encoder: torch.nn.Module) -> Any:
        return build_objective(
            self.objective_cls, encoder, self.tokenizer.vocab_info, **self.kwargs
        )

    def make_input(self) -> dict[str, torch.Tensor]:
        batches = ImageTextBatches(self.pairs, self.tokenizer, 4, seed=0)
        return batches.build([0, 1, 2, 3], [0, 1, 3, 2], None)

    def data_side(self, objective: Any, inputs: Any, generator: torch.Generator) -> Any:
        return objective.collate(dict(inputs), generator)

    def loss(self, encoder: torch.nn.Module, objective: Any, batch: Any) -> torch.Tensor:
        model = PretrainingModel(
            encoder, ObjectiveMix({objective.name: objective}), input_keys=INPUT_KEYS
        )
        return model(batch).loss


class TestImageTextMatchContract(_MultimodalContract):
    objective_cls = ImageTextMatchObjective
    architecture = "visualbert"

    def make_objective(self, encoder: torch.nn.Module) -> Any:
        return build_objective(ImageTextMatchObjective, encoder, self.tokenizer.vocab_info)


class TestMaskedRegionContract(_MultimodalContract):
    objective_cls = MaskedRegionObjective


class TestAlignmentContract(_MultimodalContract):
    objective_cls = AlignmentObjective


class TestLxmertMaskedLMContract(_MultimodalContract):
    objective_cls = LxmertMaskedLMObjective
    architecture = "lxmert"


class TestLxmertObjectPredictionContract(_MultimodalContract):
    objective_cls = LxmertObjectPredictionObjective
    architecture = "lxmert"


class TestLxmertMatchingContract(_MultimodalContract):
    objective_cls = LxmertMatchingObjective
    architecture = "lxmert"


class TestLxmertImageQAContract(_MultimodalContract):
    objective_cls = LxmertImageQAObjective
    architecture = "lxmert"

    def make_objective(self, encoder: torch.nn.Module) -> Any:
        answers = [vocabulary().index(w) for w in ("red", "green", "blue", "circle", "square")]
        return build_objective(
            LxmertImageQAObjective, encoder, self.tokenizer.vocab_info, answer_token_ids=answers
        )
