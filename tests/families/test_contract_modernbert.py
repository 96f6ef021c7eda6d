"""The ``modernbert`` family (rotary positions, GeGLU, local/global attention) passes the
family contract."""

from __future__ import annotations

from pathlib import Path

from family_contract import FamilyContract
from generated_text import text_overrides, write_pair_task

FAMILY = "modernbert"


class TestModernBertContract(FamilyContract):
    family = FAMILY

    def pretrain_overrides(self, tmp_path: Path) -> list[str]:
        return [
            *text_overrides(tmp_path, "modernbert_tiny"),
            "model.hidden_size=16",
            "model.num_heads=2",
            "model.intermediate_size=24",
            "model.local_attention=4",
        ]

    def evaluation_corpus(self, tmp_path: Path) -> str | None:
        return str(tmp_path / "pretrain" / "corpus" / "corpus.txt")

    def finetune_overrides(self, tmp_path: Path, final_dir: Path) -> list[str]:
        return [
            f"family={FAMILY}",
            f"init_from={final_dir}",
            *write_pair_task(tmp_path / "task"),
            f"trainer.output_dir={tmp_path / 'run'}",
        ]
