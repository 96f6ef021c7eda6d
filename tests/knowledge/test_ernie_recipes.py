"""The ERNIE presets compose, and their families run end to end for a few steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.config import compose_config
from flows.runner import run_composed

TINY = [
    "model.hidden_size=32",
    "model.num_heads=2",
    "model.intermediate_size=64",
    "data.max_length=48",
    "data.batch_size=8",
    "trainer.max_steps=4",
    "trainer.log_every=2",
    "trainer.progress=false",
    "trainer.device=cpu",
]


@pytest.mark.parametrize("experiment", ["ernie_baidu_tiny", "ernie_thu_tiny"])
def test_ernie_preset_runs(experiment: str, tmp_path: Path) -> None:
    extra = ["knowledge.kg_embeddings.num_epochs=5"] if experiment == "ernie_thu_tiny" else []
    cfg = compose_config(
        [f"experiment={experiment}", *TINY, *extra, f"trainer.output_dir={tmp_path}"]
    )
    assert cfg.recipe == experiment.removesuffix("_tiny")
    result = run_composed(cfg)
    assert (tmp_path / "linked_corpus.jsonl").is_file()
    assert (result.encoder_dir / "model.safetensors").is_file()
    records = [json.loads(x) for x in result.metrics_path.read_text().splitlines() if x.strip()]
    assert "mlm/loss" in records[-1]
    if experiment == "ernie_thu_tiny":
        assert "dea/loss" in records[-1]
        assert (tmp_path / "kg_embeddings" / "entity_embeddings.safetensors").is_file()


def test_ernie_thu_reads_a_rotate_folder(tmp_path: Path) -> None:
    """A RotatE ``embed-kg`` folder (complex, stored as 2*dim real columns) is ERNIE-THU's
    entity table: the K-Encoder's entity width is the stored width, not ``embedding_dim``."""
    from safetensors.torch import load_file

    from ptm_knowledge.kg import load_knowledge_graph, train_kg_embeddings

    kg_dir = Path(__file__).resolve().parents[2] / "data_specs" / "knowledge_graph" / "sample"
    rotate = train_kg_embeddings(
        load_knowledge_graph(kg_dir),
        model="RotatE",
        embedding_dim=4,
        num_epochs=2,
        evaluate_baseline=False,
    )
    assert rotate.embeddings.shape[1] == 8  # real and imaginary halves side by side
    folder = rotate.save(tmp_path / "rotate")
    cfg = compose_config(
        [
            "experiment=ernie_thu_tiny",
            *TINY,
            f"knowledge.embeddings_dir={folder}",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]
    )
    result = run_composed(cfg)
    tables = [
        tensor
        for path in sorted(result.encoder_dir.parent.rglob("*.safetensors"))
        for key, tensor in load_file(str(path)).items()
        if key.endswith("entity_table")
    ]
    assert tables and tables[0].shape[1] == 8
    assert not (tmp_path / "run" / "kg_embeddings").exists()  # the folder was used, not retrained
