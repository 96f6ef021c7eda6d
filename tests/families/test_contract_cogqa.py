"""CogQA's contract case: bridge questions generated from a generated KG (not the samples).

CogQA has no self-supervised pre-training: its one stage trains the task system (the
runner's ``finetune`` stage, which ``recipe: cogqa`` selects); the contract's "fine-tune"
trains a saved system further (``init_from`` = its ``final/``).
"""

from __future__ import annotations

from pathlib import Path

from family_contract import FAST, FamilyContract
from generated_knowledge import write_knowledge

FAMILY = "cogqa"

TINY = [
    "experiment=cogqa_tiny",
    "data.corpus=null",
    "data.num_train=12",
    "data.num_distractors=2",
    "model.hidden_size=16",
    "model.intermediate_size=32",
    "model.num_layers=1",
    "cogqa.reader_epochs=1",
    "cogqa.reasoner_epochs=1",
    "cogqa.batch_size=8",
    "cogqa.gnn_hidden=8",
    # Every span kept, so an untrained reader's graphs hold the gold answer and System 2
    # trains too.
    "cogqa.reader.threshold=-1e9",
    "cogqa.reader.hop_threshold=-1e9",
    "cogqa.reader.top_k=4",
]


class TestCogQAContract(FamilyContract):
    family = FAMILY
    finetune_config = "config"

    def _data(self, tmp_path: Path) -> list[str]:
        kg, _ = write_knowledge(tmp_path.parent / "data")
        return [f"data.kg={kg}"]

    def saved_folder(self, tmp_path: Path) -> Path:
        from flows.config import compose_config
        from flows.runner import run_composed, select

        out = tmp_path / "run"
        cfg = compose_config([*FAST, *TINY, *self._data(tmp_path), f"trainer.output_dir={out}"])
        spec, stage = select(cfg)
        assert (spec.name, stage) == (FAMILY, "finetune")
        result = run_composed(cfg)
        assert result.final_metrics["num_train"] == 12
        assert result.final_metrics["num_dev"] > 0
        for phase in ("system1", "system2"):  # both systems took optimiser steps
            assert (out / phase / "metrics.jsonl").read_text().strip(), phase
        return Path(result.last_checkpoint)

    def evaluation_corpus(self, tmp_path: Path) -> str | None:
        from ptm_knowledge.cogqa import generate_bridge_questions, write_hotpot_json
        from ptm_knowledge.kg import load_knowledge_graph

        kg, _ = write_knowledge(tmp_path / "data")
        questions = generate_bridge_questions(load_knowledge_graph(kg), num_distractors=2)
        path = tmp_path / "dev.json"
        write_hotpot_json(questions[:6], path)
        return str(path)

    def finetune_overrides(self, tmp_path: Path, final_dir: Path) -> list[str]:
        return [
            *TINY,
            *self._data(tmp_path),
            f"init_from={final_dir}",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]
