"""The awd_lstm family passes the contract: pre-train, save, load, evaluate, ULMFiT fine-tune."""

from __future__ import annotations

from pathlib import Path

from classic_corpora import write_corpus, write_sentiment_task
from family_contract import FamilyContract

FAMILY = "awd_lstm"


class TestAWDLSTMContract(FamilyContract):
    family = FAMILY

    def pretrain_overrides(self, tmp_path: Path) -> list[str]:
        corpus = write_corpus(tmp_path / "corpus")
        return [
            "experiment=awd_lstm_tiny",
            f"data.corpus={corpus}",
            "data.vocab_size=120",
            "data.batch_size=4",
            "data.bptt=8",
            "model.embedding_size=16",
            "model.hidden_size=24",
            "trainer.max_steps=2",
            # family_contract.FAST sets 0, which TrainerConfig refuses (>= 1): one save, at the end
            "trainer.save_every=2",
            f"data.cache_dir={tmp_path / 'prepared'}",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]

    def evaluation_corpus(self, tmp_path: Path) -> str | None:
        return str(write_corpus(tmp_path / "heldout", sentences=40, seed=1))

    def finetune_overrides(self, tmp_path: Path, final_dir: Path) -> list[str]:
        train, dev = write_sentiment_task(tmp_path / "task")
        return [
            # `ptm finetune model=<folder>`; family= selects the spec (no recipe claims "finetune")
            f"family={FAMILY}",
            "task=gain_sentiment",
            f"task.train={train}",
            f"task.dev={dev}",
            f"init_from={final_dir}",
            "trainer.max_steps=2",
            # family_contract.FAST sets 0, which TrainerConfig refuses (>= 1): one save, at the end
            "trainer.save_every=2",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]
