"""KnowBERT's contract case: TransE on a generated KG, MLM + NSP + linking with one KAR on
a generated linked corpus, then an entity-typing fine-tune (experiment and ptm finetune)."""

from __future__ import annotations

import json
from pathlib import Path

from knowledge_data import LinkedKnowledgeContract

FAMILY = "knowbert"


class TestKnowBertContract(LinkedKnowledgeContract):
    family = FAMILY
    pretrain_experiment = "knowbert_tiny"
    finetune_experiment = "knowbert_finetune_tiny"
    finetune_task_key = "knowbert_finetune.task"
    kg_overrides = (
        "knowbert.kgs.kg.kg_embeddings.num_epochs=2",
        "knowbert.kgs.kg.kg_embeddings.embedding_dim=8",
        "knowbert.kgs.kg.num_heads=2",
    )


def test_ptm_finetune_of_a_knowbert_folder_runs_its_task_adapter(tmp_path: Path) -> None:
    """``ptm finetune model=<KnowBERT final/>`` (configs/finetune.yaml): the folder's kind
    picks this family; ``finetune.use_entities=false`` is the ablation without KARs."""
    case = TestKnowBertContract()
    final = case.saved_folder(tmp_path / "pretrain")
    for use in (True, False):
        result = case.ptm_finetune(
            final,
            tmp_path,
            tmp_path / f"finetune_{use}",
            f"finetune.use_entities={str(use).lower()}",
        )
        record = json.loads((Path(result.encoder_dir) / "task.json").read_text())
        assert record["recipe"] == "knowbert_finetune" and record["use_kar"] is use
        assert (Path(result.encoder_dir) / "knowbert_config.json").is_file()
        # Its run goes through train_task, as every family's: eval.json says what trained.
        assert result.final_metrics["parameters/trainable_share"] == 1.0
