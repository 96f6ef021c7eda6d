"""The ``sentilr`` family (SentiLARE) passes the family contract on generated labelled
reviews and a generated sentiment task (never the bundled samples)."""

from __future__ import annotations

from pathlib import Path

from family_contract import FamilyContract
from generated_text import write_review_task, write_reviews

FAMILY = "sentilr"


class TestSentiLRContract(FamilyContract):
    family = FAMILY

    def pretrain_overrides(self, tmp_path: Path) -> list[str]:
        return [
            "experiment=sentilr_tiny",
            f"data.corpus={write_reviews(tmp_path / 'corpus')}",
            "data.label_field=label",
            "data.vocab_size=120",
            "data.max_length=48",
            "data.batch_size=4",
            "model.hidden_size=16",
            "model.num_heads=2",
            "model.intermediate_size=32",
            "trainer.max_steps=2",
            "trainer.save_every=100",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]

    def evaluation_corpus(self, tmp_path: Path) -> str | None:
        return str(write_reviews(tmp_path / "heldout", reviews=20, seed=9))

    def finetune_overrides(self, tmp_path: Path, final_dir: Path) -> list[str]:
        return [
            f"init_from={final_dir}",
            *write_review_task(tmp_path / "task"),
            "trainer.max_steps=2",
            "trainer.save_every=100",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]
