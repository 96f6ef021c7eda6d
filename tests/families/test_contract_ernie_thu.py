"""ERNIE-THU's contract case: TransE on a generated KG, MLM+NSP+dEA on a generated linked
corpus, then an entity-typing fine-tune under both config roots."""

from __future__ import annotations

from pathlib import Path

from knowledge_data import LinkedKnowledgeContract

FAMILY = "ernie_thu"


class TestErnieThuContract(LinkedKnowledgeContract):
    family = FAMILY
    pretrain_experiment = "ernie_thu_tiny"
    finetune_experiment = "ernie_thu_finetune_tiny"
    finetune_task_key = "ernie_finetune.task"
    kg_overrides = (
        "knowledge.kg_embeddings.num_epochs=2",
        "knowledge.kg_embeddings.embedding_dim=8",
    )


def test_ptm_finetune_of_an_ernie_thu_folder_runs_its_task_adapter(tmp_path: Path) -> None:
    """``ptm finetune model=<ERNIE-THU final/>`` (configs/finetune.yaml): the folder's kind
    picks this family, which reads the ``task`` and ``finetune`` blocks."""
    case = TestErnieThuContract()
    final = case.saved_folder(tmp_path / "pretrain")
    result = case.ptm_finetune(final, tmp_path, tmp_path / "finetune")
    # The knowledge layers fine-tuned with the text layers (knowledge_config.json beside them).
    assert (Path(result.encoder_dir) / "knowledge_config.json").is_file()
    task = (Path(result.encoder_dir) / "task.json").read_text()
    assert '"recipe": "ernie_thu_finetune"' in task
