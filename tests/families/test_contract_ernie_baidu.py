"""ERNIE-Baidu's contract case: a generated text corpus linked to a generated KG, then
staged knowledge masking (it saves a plain encoder: no kind, evaluation or fine-tune of its
own)."""

from __future__ import annotations

from pathlib import Path

from family_contract import FamilyContract
from knowledge_data import generate

FAMILY = "ernie_baidu"


class TestErnieBaiduContract(FamilyContract):
    family = FAMILY

    def pretrain_overrides(self, tmp_path: Path) -> list[str]:
        data = generate(tmp_path.parent / "data")
        return [
            "experiment=ernie_baidu_tiny",
            "model.hidden_size=32",
            "model.num_heads=2",
            "model.intermediate_size=64",
            f"data.corpus={data.corpus}",
            f"data.kg={data.kg}",
            "data.tokenizer=null",
            "data.vocab_size=200",
            "data.max_length=32",
            "data.batch_size=8",
            "objective.phrases=[made up]",
            "trainer.max_steps=3",
            "trainer.device=cpu",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]

    def test_the_corpus_was_linked_to_the_generated_kg(self, tmp_path: Path) -> None:
        final = self.saved_folder(tmp_path / "pretrain")
        linked = final.parent / "linked_corpus.jsonl"
        assert '"person_' in linked.read_text()  # mentions of the generated people
