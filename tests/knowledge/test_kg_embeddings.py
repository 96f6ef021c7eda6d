"""TransE through PyKEEN on the sample KG: better than random embeddings; safetensors export."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ptm_knowledge.kg import load_entity_embeddings, train_kg_embeddings


@pytest.fixture(scope="module")
def transe(sample_kg):
    return train_kg_embeddings(
        sample_kg,
        model="TransE",
        embedding_dim=32,
        num_epochs=60,
        batch_size=32,
        learning_rate=0.02,
        seed=0,
    )


def test_transe_beats_random_baseline(transe) -> None:
    print(f"\nTransE test metrics {transe.metrics}\nrandom baseline {transe.baseline_metrics}")
    assert transe.num_test > 10
    # Random ranking among ~110 entities gives MRR ~0.05; the trained model must do far better.
    assert transe.metrics["mrr"] > 2 * transe.baseline_metrics["mrr"]
    assert transe.metrics["hits_at_10"] > transe.baseline_metrics["hits_at_10"]


def test_export_keyed_by_entity_ids(transe, sample_kg, tmp_path: Path) -> None:
    out = transe.save(tmp_path / "emb")
    ids, matrix = load_entity_embeddings(out)
    assert ids == sample_kg.entity_ids
    assert matrix.shape == (len(sample_kg), 32)
    # Our row of "vienna" is PyKEEN's row of "vienna".
    pykeen_rows = transe.pykeen_model.entity_representations[0](indices=None).detach()
    vienna = pykeen_rows[transe.pykeen_entity_to_id["vienna"]]
    assert torch.equal(matrix[sample_kg.index["vienna"]], vienna)
    assert (out / "metrics.json").is_file()


def test_unknown_model_lists_valid_names(sample_kg) -> None:
    with pytest.raises(ValueError, match=r"valid names: .*TransE"):
        train_kg_embeddings(sample_kg, model="NoSuchModel")
