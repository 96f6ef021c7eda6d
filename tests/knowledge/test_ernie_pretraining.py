"""Tiny ERNIE-THU and ERNIE-Baidu pre-training runs on the sample corpus and KG."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ernie_runs import pretrain_ernie
from knowledge_sample_paths import KG_DIR, VOCAB

from ptm_core.encoders import bert_encoder
from ptm_core.training import TrainerConfig
from ptm_knowledge.family_ernie import Knowledge
from ptm_knowledge.kg import train_kg_embeddings
from ptm_knowledge.linking import read_linked_corpus


def _tiny(vocab_size: int):
    return bert_encoder(
        vocab_size=vocab_size,
        hidden_size=32,
        num_layers=3,
        num_heads=2,
        intermediate_size=64,
        max_positions=64,
    )


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def linked(sample_kg):
    return read_linked_corpus(KG_DIR / "gold_mentions.jsonl", sample_kg.entity_ids)


@pytest.mark.slow
def test_ernie_thu_tiny_run_learns(sample_kg, linked, tmp_path: Path) -> None:
    kg_embeddings = train_kg_embeddings(
        sample_kg,
        embedding_dim=16,
        num_epochs=15,
        batch_size=64,
        learning_rate=0.02,
        evaluate_baseline=False,
    )
    trainer = TrainerConfig(
        output_dir=str(tmp_path / "thu"),
        max_steps=40,
        learning_rate=3e-3,
        warmup_ratio=0.05,
        log_every=5,
        save_every=1000,
        progress=False,
        device="cpu",
    )
    result = pretrain_ernie(
        "ernie_thu",
        linked=linked,
        embeddings=(kg_embeddings.entity_ids, kg_embeddings.embeddings),
        encoder=_tiny,
        trainer=trainer,
        tokenizer=str(VOCAB),
        max_length=48,
        batch_size=8,
        knowledge=Knowledge(num_knowledge_layers=1, entity_heads=2),
    )
    records = _records(result.metrics_path)
    first, last = records[0], records[-1]
    print(f"\nERNIE-THU first {first}\nlast {last}")
    assert last["mlm/loss"] < first["mlm/loss"]
    assert last["dea/loss"] < first["dea/loss"]
    # Over seeds 0-5 and both dropout kernels, the last window's dEA accuracy spans 0.32-0.46
    # against chance 0.165: 1.5x chance leaves room for that spread, not for no learning.
    assert last["dea/accuracy"] > 1.5 * last["dea/chance"]
    assert (result.encoder_dir / "knowledge_layers.safetensors").is_file()


def test_ernie_baidu_tiny_run_walks_the_schedule(linked, tmp_path: Path) -> None:
    trainer = TrainerConfig(
        output_dir=str(tmp_path / "baidu"),
        max_steps=12,
        learning_rate=3e-3,
        log_every=4,
        save_every=1000,
        progress=False,
        device="cpu",
    )
    result = pretrain_ernie(
        "ernie_baidu",
        linked=linked,
        encoder=_tiny,
        trainer=trainer,
        tokenizer=str(VOCAB),
        max_length=48,
        batch_size=8,
    )
    records = _records(result.metrics_path)
    assert records[-1]["mlm/loss"] < records[0]["mlm/loss"]
    assert (result.encoder_dir / "model.safetensors").is_file()
