"""link_entities (sharded, cached) and embed_knowledge_graph flows on the bundled samples."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("prefect_harness")]

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "data_specs" / "text_corpus" / "sample" / "corpus.txt"
KG = ROOT / "data_specs" / "knowledge_graph" / "sample"


def test_link_entities_rerun_skips_cached_shards(tmp_path: Path) -> None:
    from flows.link_entities import link_entities

    text = CORPUS.read_text()
    documents = text.strip().split("\n\n")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(documents[:12]) + "\n")
    output = tmp_path / "linked.jsonl"

    first = link_entities(str(corpus), str(KG), str(output), shard_size=4)
    assert first["shards"] == 3 and first["executed"] == 3
    assert first["mentions"] > 0
    lines = output.read_text().splitlines()
    assert len(lines) == 12 and all(json.loads(x)["sentences"] for x in lines)

    again = link_entities(str(corpus), str(KG), str(output), shard_size=4)
    assert again["executed"] == 0, "unchanged shards must come from the cache"
    assert output.read_text().splitlines() == lines

    corpus.write_text("\n\n".join(documents[:16]) + "\n")  # one new shard
    grown = link_entities(str(corpus), str(KG), str(output), shard_size=4)
    assert grown["shards"] == 4 and grown["executed"] == 1

    changed = link_entities(
        str(corpus), str(KG), str(output), shard_size=4, linker={"threshold": 0.9}
    )
    assert changed["executed"] == 4, "new linker settings invalidate every shard"


def test_link_entities_bad_line_names_file_and_line(tmp_path: Path) -> None:
    from flows.link_entities import link_entities
    from ptm_core.data import CorpusError

    corpus = tmp_path / "bad.jsonl"
    corpus.write_text('{"text": "Marie Curie lived in Paris."}\n{"txt": "oops"}\n')
    output = tmp_path / "linked.jsonl"
    output.write_text("previous good output\n")
    with pytest.raises(CorpusError, match=r"bad\.jsonl:2"):
        link_entities(str(corpus), str(KG), str(output))
    assert output.read_text() == "previous good output\n"  # never half-overwritten


def test_embed_knowledge_graph_writes_embeddings_and_beats_random(tmp_path: Path) -> None:
    from flows.embed_knowledge_graph import embed_knowledge_graph

    kg = tmp_path / "kg"
    shutil.copytree(KG, kg)
    summary = embed_knowledge_graph(str(kg), str(tmp_path / "emb"), num_epochs=60)
    files = {p.name for p in Path(summary["output_dir"]).iterdir()}
    assert any(name.endswith(".safetensors") for name in files)
    assert summary["metrics"]["mrr"] > summary["random_baseline"]["mrr"]
