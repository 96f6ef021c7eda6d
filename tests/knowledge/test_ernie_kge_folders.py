"""ERNIE-THU's entity table from ``ptm embed-kg`` folders of any PyKEEN interaction.

A complex model (RotatE, ComplEx) is saved with real and imaginary parts side by side
(width ``2 * dim``); ERNIE-THU reads that folder as its ``knowledge.embeddings_dir`` and
fuses the vectors like TransE's.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from ptm_core.encoders import bert_encoder
from ptm_knowledge.ernie.plans import _entity_table
from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder
from ptm_knowledge.family_ernie import ErnieThuSettings
from ptm_knowledge.kg import train_kg_embeddings


@pytest.mark.parametrize(("model", "width"), [("RotatE", 8), ("ComplEx", 8), ("DistMult", 4)])
def test_embed_kg_folder_is_ernie_entity_table(sample_kg, tmp_path: Path, model, width) -> None:
    folder = tmp_path / model
    train_kg_embeddings(
        sample_kg, model=model, embedding_dim=4, num_epochs=1, seed=0, evaluate_baseline=False
    ).save(folder)
    settings = ErnieThuSettings()
    settings.knowledge.embeddings_dir = str(folder)
    run = SimpleNamespace(settings=settings, seed=0, output_dir=tmp_path / "run")
    entity_ids, vectors, source, known = _entity_table(run, settings, None, None)
    assert entity_ids == sample_kg.entity_ids and source == str(folder) and known is None
    assert vectors.shape == (len(sample_kg), width) and vectors.dtype == torch.float32
    assert torch.isfinite(vectors).all() and vectors.abs().sum() > 0

    torch.manual_seed(0)
    text = bert_encoder(vocab_size=50, hidden_size=32, num_layers=2, num_heads=2, dropout=0.0)
    network = KnowledgeableEncoder.from_text_encoder(text, vectors, 1, entity_heads=2).eval()
    ids = torch.randint(5, 50, (1, 6))
    entities = torch.full((1, 6), -1)
    entities[0, 2] = 3
    fused = network(ids, entity_ids=entities).last_hidden_state
    without = network(ids, entity_ids=torch.full((1, 6), -1)).last_hidden_state
    assert torch.isfinite(fused).all()
    # the entity's (complex-derived) vector reaches its token
    assert not torch.allclose(fused[0, 2], without[0, 2])
