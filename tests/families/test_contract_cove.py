"""The cove family passes the contract: pre-train the translation model, save, load,
fine-tune a classifier on [GloVe; CoVe]."""

from __future__ import annotations

from pathlib import Path

from classic_corpora import write_parallel, write_sentiment_task, write_vector_table
from family_contract import FamilyContract

FAMILY = "cove"


class TestCoVeContract(FamilyContract):
    family = FAMILY

    def pretrain_overrides(self, tmp_path: Path) -> list[str]:
        parallel = write_parallel(tmp_path / "parallel")
        glove = write_vector_table(tmp_path / "glove")
        return [
            "experiment=cove_tiny",
            f"data.parallel={parallel}",
            f"data.glove={glove}",
            "data.target_langs=[de]",
            f"data.heldout={parallel}",
            "data.batch_size=8",
            "model.hidden_size=8",
            "model.target_embedding_dim=8",
            "trainer.max_steps=2",
            # family_contract.FAST sets 0, which TrainerConfig refuses (>= 1): one save, at the end
            "trainer.save_every=2",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]

    def evaluation_corpus(self, tmp_path: Path) -> str | None:
        return str(write_parallel(tmp_path / "heldout", pairs=16, seed=1))

    def finetune_overrides(self, tmp_path: Path, final_dir: Path) -> list[str]:
        train, dev = write_sentiment_task(tmp_path / "task")
        return [
            f"family={FAMILY}",
            "task=gain_sentiment",
            f"task.train={train}",
            f"task.dev={dev}",
            f"init_from={final_dir}",
            "trainer.max_steps=2",
            "trainer.save_every=2",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]
