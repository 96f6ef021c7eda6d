"""ERNIE-THU's contract case: TransE on a generated KG, MLM+NSP+dEA on a generated linked
corpus, then an entity-typing fine-tune under both config roots."""

from __future__ import annotations

from pathlib import Path

from family_contract import FAST, FamilyContract
from knowledge_data import generate

FAMILY = "ernie_thu"
TINY = [
    "model.hidden_size=32",
    "model.num_heads=2",
    "model.intermediate_size=64",
    "data.max_length=32",
    "data.batch_size=8",
    "trainer.max_steps=2",
    "trainer.device=cpu",
]


def _task(data_root: Path, key: str) -> list[str]:
    data = generate(data_root / "data")
    return [
        f"{key}.train={data.train}",
        f"{key}.dev={data.dev}",
        f"{key}.max_length=16",
        f"{key}.batch_size=8",
    ]


class TestErnieThuContract(FamilyContract):
    family = FAMILY
    finetune_config = "config"  # experiment=ernie_thu_finetune_tiny

    def pretrain_overrides(self, tmp_path: Path) -> list[str]:
        data = generate(tmp_path.parent / "data")
        return [
            "experiment=ernie_thu_tiny",
            *TINY,
            f"data.kg={data.kg}",
            f"data.linked_corpus={data.linked_corpus}",
            "data.tokenizer=null",
            "data.vocab_size=200",
            "knowledge.kg_embeddings.num_epochs=2",
            "knowledge.kg_embeddings.embedding_dim=8",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]

    def evaluation_corpus(self, tmp_path: Path) -> str | None:
        return str(generate(tmp_path / "data").linked_corpus)

    def finetune_overrides(self, tmp_path: Path, final_dir: Path) -> list[str]:
        return [
            "experiment=ernie_thu_finetune_tiny",
            f"init_from={final_dir}",
            *_task(tmp_path.parent, "ernie_finetune.task"),
            "trainer.max_steps=2",
            "trainer.device=cpu",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]


def test_ptm_finetune_of_an_ernie_thu_folder_runs_its_task_adapter(tmp_path: Path) -> None:
    """``ptm finetune model=<ERNIE-THU final/>`` (configs/finetune.yaml): the folder's kind
    picks this family, which reads the ``task`` and ``finetune`` blocks."""
    from flows import runner
    from flows.config import compose_config

    final = TestErnieThuContract().saved_folder(tmp_path / "pretrain")
    cfg = compose_config(
        [
            *FAST,
            "task=kg_entity_typing",
            *_task(tmp_path, "task"),
            f"init_from={final}",
            "trainer.max_steps=2",
            "trainer.device=cpu",
            f"trainer.output_dir={tmp_path / 'finetune'}",
        ],
        config_name="finetune",
    )
    spec = runner.family_of_folder(final)
    assert spec is not None and spec.name == FAMILY
    result = runner.finetune(spec, cfg)
    # The knowledge layers fine-tuned with the text layers (knowledge_config.json beside them).
    assert (Path(result.encoder_dir) / "knowledge_config.json").is_file()
    task = (Path(result.encoder_dir) / "task.json").read_text()
    assert '"recipe": "ernie_thu_finetune"' in task
