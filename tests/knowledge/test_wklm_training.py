"""WKLM end to end on the sample: rows, a short training, errors, and the CLI preset."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from knowledge_sample_paths import KG_DIR, VOCAB

from flows.cli import main
from flows.config import compose_config
from flows.runner import pretrain
from ptm_core.families import get
from ptm_knowledge.ernie import knowledge_rows, open_linked_corpus
from ptm_knowledge.kg import KGError, load_knowledge_graph
from ptm_knowledge.linking.corpus import LinkedCorpusError
from ptm_knowledge.wklm import (
    EntityReplacementRows,
    EntityTypeIndex,
    ReplacementBatches,
    SurfaceForms,
)

GOLD = KG_DIR / "gold_mentions.jsonl"


def _wklm(linked: Path, output_dir: Path, steps: int, cache_dir: Path) -> Any:
    """WKLM through the runner: a 1-layer, 32-wide encoder on ``linked``."""
    cfg = compose_config(
        [
            "experiment=wklm_tiny",
            f"data.linked_corpus={linked}",
            f"data.kg={KG_DIR}",
            f"data.tokenizer={VOCAB}",
            "data.max_length=64",
            "data.batch_size=16",
            f"data.cache_dir={cache_dir}",
            "model.hidden_size=32",
            "model.num_layers=1",
            "model.num_heads=2",
            "model.intermediate_size=64",
            "model.max_positions=64",
            f"trainer.max_steps={steps}",
            "trainer.learning_rate=3e-3",
            "trainer.warmup_ratio=0.05",
            "trainer.log_every=5",
            "trainer.save_every=10000",
            "trainer.device=cpu",
            "trainer.progress=false",
            f"trainer.output_dir={output_dir}",
        ]
    )
    return pretrain(get("wklm"), cfg)


def test_sample_rows_replace_within_type_and_spans_hold_the_new_name(
    sample_kg, tmp_path: Path
) -> None:
    store, tok = open_linked_corpus(
        GOLD, output_dir=tmp_path / "run", tokenizer=VOCAB, cache_dir=tmp_path / "cache"
    )
    store.bind_entities(sample_kg.index, known=sample_kg.index)
    types = EntityTypeIndex.from_graph(sample_kg, KG_DIR)
    rows = EntityReplacementRows(
        knowledge_rows(store, tok.vocab_info, 64),
        types,
        SurfaceForms(sample_kg.entities, tok),
        seed=0,
        max_length=64,
    )
    replaced = 0
    for index in range(len(rows)):
        out = rows.replaced(index)
        assert len(out.input_ids) <= 64
        flags = out.replaced
        assert not any(a and b for a, b in itertools.pairwise(flags))
        for (first, stop), old, new, flag in zip(
            out.spans, out.originals, out.entities, out.replaced, strict=True
        ):
            if flag:
                replaced += 1
                assert new != old and types.type_name(new) == types.type_name(old)
                name = tok.encode(sample_kg.entities.names[new]).input_ids[1:-1]
                assert out.input_ids[first:stop] == name
    # Static rows repeat; dynamic ones are redrawn per epoch, the same within one.
    assert rows.replaced(0).input_ids == rows[0]["input_ids"]
    assert rows.replaced(3, epoch=1).replaced == rows.replaced(3, epoch=1).replaced
    assert any(
        rows.replaced(i, epoch=0).replaced != rows.replaced(i, epoch=1).replaced
        for i in range(len(rows))
    )
    batches = ReplacementBatches(rows, 4, pad_id=tok.vocab_info.pad_id, seed=0)
    first, again = batches.batch(1, 0), batches.batch(1, 0)
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert {"mention_labels", "mention_ends", "mention_mask"} <= set(first)
    stats = rows.stats()
    assert stats.replaced == replaced > 20
    assert stats.mentions > 100 and stats.single > 0
    assert abs(stats.replaced / stats.eligible - 0.5) < 4 * np.sqrt(0.25 / stats.eligible)


def test_detection_beats_the_majority_baseline_after_a_short_training(
    sample_kg, tmp_path: Path
) -> None:
    result = _wklm(GOLD, tmp_path, 40, tmp_path / "cache")
    records = [json.loads(x) for x in result.metrics_path.read_text().splitlines() if x.strip()]
    logged = [r for r in records if "detection/loss" in r]
    assert "mlm/loss" in logged[-1] and "detection/accuracy" in logged[-1]
    last = logged[-3:]
    accuracy = np.mean([r["detection/accuracy"] for r in last])
    replaced = np.mean([r["detection/replaced"] for r in last])
    loss = np.mean([r["detection/loss"] for r in last])
    # Chance: always answering "original" scores 1 - replaced share; the best constant
    # prediction's loss is the base rate's entropy.
    assert accuracy > (1 - replaced) + 0.05, (accuracy, replaced)
    entropy = -(replaced * np.log(replaced) + (1 - replaced) * np.log(1 - replaced))
    assert loss < entropy - 0.05, (loss, entropy)
    assert np.mean([r["detection/loss"] for r in logged[:2]]) > loss


def test_mention_of_an_entity_missing_from_the_kg_names_file_and_line(
    sample_kg, tmp_path: Path
) -> None:
    lines = GOLD.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[2])
    record["mentions"][0]["entity"] = "no_such_entity"
    lines[2] = json.dumps(record, ensure_ascii=False)
    bad = tmp_path / "linked.jsonl"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(LinkedCorpusError, match=rf"{bad}:3: unknown entity id 'no_such_entity'"):
        _wklm(bad, tmp_path / "run", 1, tmp_path / "cache")


def test_untyped_entity_is_an_error_naming_the_entity_table_line(tmp_path: Path) -> None:
    lines = (KG_DIR / "entities.tsv").read_text(encoding="utf-8").splitlines()
    number = next(i for i, line in enumerate(lines) if line.startswith("pierre_curie\t"))
    cells = lines[number].split("\t")
    cells[2] = ""
    lines[number] = "\t".join(cells)
    (tmp_path / "entities.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    kg = load_knowledge_graph(tmp_path)
    types = EntityTypeIndex.from_graph(kg, tmp_path)
    assert types.type_name(kg.index["pierre_curie"]) == ""
    assert not types.replaceable(np.array([kg.index["pierre_curie"]]))[0]
    with pytest.raises(
        KGError, match=rf"entities.tsv:{number + 1}: entity 'pierre_curie' has no type"
    ):
        types.require_types(kg.entity_ids)


def test_cli_wklm_tiny_runs_three_steps(tmp_path: Path) -> None:
    code = main(
        [
            "pretrain",
            "experiment=wklm_tiny",
            "trainer.max_steps=3",
            "trainer.log_every=1",
            "trainer.device=cpu",
            "trainer.progress=false",
            "model.hidden_size=32",
            "model.intermediate_size=64",
            "data.max_length=48",
            "data.batch_size=8",
            f"data.linked_corpus={GOLD}",
            f"data.cache_dir={tmp_path / 'cache'}",
            f"trainer.output_dir={tmp_path / 'run'}",
        ]
    )
    assert code == 0
    records = [
        json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines() if x
    ]
    assert {"mlm/loss", "detection/loss", "detection/accuracy"} <= set(records[-1])
    assert (tmp_path / "run" / "final" / "model.safetensors").is_file()
