"""KEPLER's contract case: MLM + KE on a generated corpus and KG (not the samples)."""

from __future__ import annotations

import json
from pathlib import Path

from family_contract import FamilyContract
from generated_knowledge import write_knowledge

FAMILY = "kepler"

TINY_MODEL = [
    "model.hidden_size=32",
    "model.num_layers=1",
    "model.num_heads=2",
    "model.intermediate_size=64",
    "model.max_positions=64",
]


class TestKeplerContract(FamilyContract):
    family = FAMILY

    def pretrain_overrides(self, tmp_path: Path) -> list[str]:
        kg, corpus = write_knowledge(tmp_path / "data")
        return [
            "experiment=kepler_tiny",
            f"data.corpus={corpus}",
            f"data.kg={kg}",
            "data.tokenizer=null",
            "data.vocab_size=300",
            "data.max_length=32",
            "data.batch_size=4",
            *TINY_MODEL,
            "trainer.max_steps=2",
            "trainer.device=cpu",
            "kepler.ke_batch_size=4",
            "kepler.description_max_length=16",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]

    def saved_folder(self, tmp_path: Path) -> Path:
        final = super().saved_folder(tmp_path)
        # The family's own result beside the encoder: link prediction on held-out triples.
        report = json.loads((final.parent / "link_prediction.json").read_text())
        assert report["num_test"] > 0 and 0.0 < report["test"]["mrr"] <= 1.0
        return final
