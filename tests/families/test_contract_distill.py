"""The ``distill`` family (DistilBERT, TinyBERT) passes the family contract: its teacher is
pre-trained first, the student's ``final/`` is an ``encoder`` folder (the family has no kind
of its own, so the contract's save/load/evaluate steps are the encoder family's)."""

from __future__ import annotations

from pathlib import Path

from family_contract import FamilyContract
from generated_text import text_overrides

FAMILY = "distill"


class TestDistillContract(FamilyContract):
    family = FAMILY

    def pretrain_overrides(self, tmp_path: Path) -> list[str]:
        return [
            *text_overrides(tmp_path, "distilbert_tiny"),
            "distill.teacher_steps=2",
            "distill.teacher_model.hidden_size=16",
            "distill.teacher_model.intermediate_size=32",
            "model.hidden_size=16",
            "model.intermediate_size=32",
        ]
