"""WKLM's contract case: a generated corpus linked to a generated KG (not the samples)."""

from __future__ import annotations

from pathlib import Path

from family_contract import FamilyContract
from generated_knowledge import write_knowledge
from test_contract_kepler import TINY_MODEL

FAMILY = "wklm"


class TestWKLMContract(FamilyContract):
    family = FAMILY

    def pretrain_overrides(self, tmp_path: Path) -> list[str]:
        kg, corpus = write_knowledge(tmp_path / "data")
        return [
            "experiment=wklm_tiny",
            f"data.corpus={corpus}",
            f"data.kg={kg}",
            "data.tokenizer=null",
            "data.vocab_size=300",
            "data.max_length=48",
            "data.batch_size=4",
            *TINY_MODEL,
            "trainer.max_steps=2",
            "trainer.device=cpu",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]

    def saved_folder(self, tmp_path: Path) -> Path:
        final = super().saved_folder(tmp_path)
        # The corpus was linked to the generated KG by the run itself.
        assert (tmp_path / "run" / "linked_corpus.jsonl").stat().st_size > 0
        return final
