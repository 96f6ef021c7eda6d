"""The KG-embedding family's contract case: ``ptm embed-kg``'s training step on a generated
KG (no pre-training through the runner, no fine-tune)."""

from __future__ import annotations

import json
from pathlib import Path

from family_contract import FamilyContract
from knowledge_data import generate

FAMILY = "kg_embeddings"


class TestKgEmbeddingsContract(FamilyContract):
    family = FAMILY

    def saved_folder(self, tmp_path: Path) -> Path:
        from flows.kg_embedding import train_embeddings

        data = generate(tmp_path.parent / "data")
        out = tmp_path / "kg_embeddings"
        summary = train_embeddings(
            str(data.kg), str(out), "TransE", 0, {"embedding_dim": 8, "num_epochs": 2}
        )
        assert summary["entities"] == len(data.entity_ids)
        return out


def test_a_folder_without_config_json_is_recognised(tmp_path: Path) -> None:
    """Folders written before config.json named the kind still load and score."""
    from flows.evaluation import model_family
    from flows.runner import family_of_folder
    from ptm_core.checkpoints import registry

    folder = TestKgEmbeddingsContract().saved_folder(tmp_path / "run")
    (folder / "config.json").unlink()
    spec = family_of_folder(folder)
    assert spec is not None and spec.name == FAMILY
    result = registry.load(FAMILY, folder)
    assert result.entity_ids == json.loads((folder / "entity_ids.json").read_text())
    assert model_family(folder) == FAMILY
