"""KnowBERT's contract case: TransE on a generated KG, MLM + NSP + linking with one KAR on
a generated linked corpus, then an entity-typing fine-tune (experiment and ptm finetune)."""

from __future__ import annotations

from pathlib import Path

from family_contract import FAST, FamilyContract
from knowledge_data import generate

FAMILY = "knowbert"
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


class TestKnowBertContract(FamilyContract):
    family = FAMILY
    finetune_config = "config"  # experiment=knowbert_finetune_tiny

    def pretrain_overrides(self, tmp_path: Path) -> list[str]:
        data = generate(tmp_path.parent / "data")
        return [
            "experiment=knowbert_tiny",
            *TINY,
            f"data.kg={data.kg}",
            f"data.linked_corpus={data.linked_corpus}",
            "data.tokenizer=null",
            "data.vocab_size=200",
            "knowbert.kgs.kg.kg_embeddings.num_epochs=2",
            "knowbert.kgs.kg.kg_embeddings.embedding_dim=8",
            "knowbert.kgs.kg.num_heads=2",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]

    def evaluation_corpus(self, tmp_path: Path) -> str | None:
        return str(generate(tmp_path / "data").linked_corpus)

    def finetune_overrides(self, tmp_path: Path, final_dir: Path) -> list[str]:
        return [
            "experiment=knowbert_finetune_tiny",
            f"init_from={final_dir}",
            *_task(tmp_path.parent, "knowbert_finetune.task"),
            "trainer.max_steps=2",
            "trainer.device=cpu",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]


def test_ptm_finetune_of_a_knowbert_folder_runs_its_task_adapter(tmp_path: Path) -> None:
    """``ptm finetune model=<KnowBERT final/>`` (configs/finetune.yaml): the folder's kind
    picks this family; ``finetune.use_entities=false`` is the ablation without KARs."""
    import json

    from flows import runner
    from flows.config import compose_config

    final = TestKnowBertContract().saved_folder(tmp_path / "pretrain")
    spec = runner.family_of_folder(final)
    assert spec is not None and spec.name == FAMILY
    for use in (True, False):
        cfg = compose_config(
            [
                *FAST,
                "task=kg_entity_typing",
                *_task(tmp_path, "task"),
                f"init_from={final}",
                f"finetune.use_entities={str(use).lower()}",
                "trainer.max_steps=2",
                "trainer.device=cpu",
                f"trainer.output_dir={tmp_path / f'finetune_{use}'}",
            ],
            config_name="finetune",
        )
        result = runner.finetune(spec, cfg)
        record = json.loads((Path(result.encoder_dir) / "task.json").read_text())
        assert record["recipe"] == "knowbert_finetune" and record["use_kar"] is use
        assert (Path(result.encoder_dir) / "knowbert_config.json").is_file()
