"""The elmo family passes the contract: pre-train the biLM, save, load, evaluate."""

from __future__ import annotations

from pathlib import Path

from classic_corpora import write_corpus
from family_contract import FamilyContract

FAMILY = "elmo"


class TestElmoContract(FamilyContract):
    family = FAMILY

    def pretrain_overrides(self, tmp_path: Path) -> list[str]:
        corpus = write_corpus(tmp_path / "corpus")
        return [
            "experiment=elmo_tiny",
            f"data.corpus={corpus}",
            "data.batch_size=4",
            "model.cell_size=32",
            "model.projection_dim=16",
            "model.filters=[[1,4],[2,4],[3,8]]",
            "trainer.max_steps=2",
            # family_contract.FAST sets 0, which TrainerConfig refuses (>= 1): one save, at the end
            "trainer.save_every=2",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]

    def evaluation_corpus(self, tmp_path: Path) -> str | None:
        return str(write_corpus(tmp_path / "heldout", sentences=40, seed=1))
