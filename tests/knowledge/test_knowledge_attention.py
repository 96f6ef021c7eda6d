"""Attention on knowledge tokens without --mark-tokens: K-BERT's injected branches (under
the visible matrix) and ERNIE-THU's entity-aligned tokens, on tiny folders and the sample
KG; the masses on [CLS], [SEP], knowledge and the rest sum to 1 for every query."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ptm_core.analysis.attention import AttentionAccumulator, key_masses
from ptm_core.encoders.presets import bert_encoder
from ptm_core.tokenization import WordPieceTokenizer
from ptm_knowledge.probing.knowledge_attention import read_with_knowledge

REPO = Path(__file__).resolve().parents[2]
KG = REPO / "data_specs/knowledge_graph/sample"
SENTENCES = [
    "Marie Curie was born in Warsaw .",
    "Paris is a city in France and Pierre Curie lived in Paris .",
    "the river runs north .",
]


def _tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(REPO / "data_specs/text_corpus/sample-vocab.txt")


def _encoder(tokenizer: WordPieceTokenizer) -> torch.nn.Module:
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=tokenizer.vocab_size, hidden_size=24, num_layers=2, num_heads=2
    )
    with torch.no_grad():  # sharper than the init's near-uniform attention
        for p in encoder.parameters():
            p.mul_(4.0)
    return encoder


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tokenizer = _tokenizer()
    folder = tmp_path_factory.mktemp("kattn") / "bert"
    _encoder(tokenizer).save_pretrained(folder, extra_writers=[tokenizer.save])
    return folder


@pytest.fixture(scope="module")
def ernie(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder
    from ptm_knowledge.kg import load_knowledge_graph

    tokenizer = _tokenizer()
    ids = [e.id for e in load_knowledge_graph(KG).entities]
    text = bert_encoder(vocab_size=tokenizer.vocab_size, hidden_size=24, num_layers=3, num_heads=2)
    thu = KnowledgeableEncoder.from_text_encoder(text, torch.randn(len(ids), 8), 1, entity_heads=2)
    folder = tmp_path_factory.mktemp("kattn") / "thu"
    thu.save_pretrained(folder, entity_ids=ids, kg=KG, extra_writers=[tokenizer.save])
    return folder


def _check_every_query_sums_to_one(reading: object) -> tuple[int, int]:
    """Every real query of every layer: cls + sep + knowledge + rest = 1 (1e-6)."""
    layers = knowledge_keys = 0
    for batch in reading.batches:  # type: ignore[attr-defined]
        real = batch.real
        keys = {
            "cls": (batch.input_ids == reading.special_ids["cls"]) & real,  # type: ignore[attr-defined]
            "sep": (batch.input_ids == reading.special_ids["sep"]) & real,  # type: ignore[attr-defined]
            "knowledge": batch.knowledge & real,
        }
        knowledge_keys += int(keys["knowledge"].sum())
        layers = len(batch.probs)
        for layer in batch.probs:
            masses = key_masses(layer.double(), keys, real)
            total = sum(masses.values())  # (B, h, L)
            assert (total - 1).abs().permute(0, 2, 1)[real].max() < 1e-6
            if batch.visibility is not None:  # a query never puts mass on what it cannot see
                hidden = ~batch.visibility[:, None]
                assert layer.masked_select(hidden & real[:, None, :, None]).abs().sum() == 0
    return layers, knowledge_keys


def test_kbert_branches_under_the_visible_matrix(bert: Path) -> None:
    reading = read_with_knowledge(bert, SENTENCES, KG, batch_size=2)
    assert reading.kind == "kbert" and reading.details["max_entities"] == 2
    layers, knowledge = _check_every_query_sums_to_one(reading)
    assert layers == 2 and knowledge > 0
    # sentence tokens that are no subject never see a branch: their knowledge mass is 0
    again = read_with_knowledge(bert, SENTENCES, KG, batch_size=8)
    batch = next(again.batches)
    sees = (batch.visibility & batch.knowledge[:, None, :]).any(-1) & batch.real
    blind = batch.real & ~sees
    assert blind.any() and sees.any()
    for layer in batch.probs:
        mass = (layer * batch.knowledge[:, None, None, :]).sum(-1)  # (B, h, L)
        assert mass.permute(0, 2, 1)[blind].abs().max() == 0
        assert mass.permute(0, 2, 1)[sees & ~batch.knowledge].max() > 0


def test_ernie_thu_entity_aligned_tokens(ernie: Path) -> None:
    reading = read_with_knowledge(ernie, SENTENCES, None, batch_size=2)
    assert reading.kind == "ernie_thu" and reading.kg == str(KG.resolve())
    layers, knowledge = _check_every_query_sums_to_one(reading)
    assert layers == 2 + 1  # 2 T-Encoder layers (of 3), then the aggregator's token attention
    # Marie Curie, Warsaw, Paris, France, Pierre Curie, Paris: the first piece of each
    assert knowledge == reading.details["aligned_tokens"] >= 4
    assert reading.details["entity_table"] > 100


def test_ptm_analyze_attention_with_kg_writes_the_knowledge_column(
    bert: Path, ernie: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from flows.cli import main

    text = tmp_path / "s.txt"
    text.write_text("\n".join(SENTENCES) + "\n")
    out = tmp_path / "kbert"
    argv = ["analyze", str(bert), "attention", "--sentences", str(text)]
    assert main([*argv, "--kg", str(KG), "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Read as K-BERT" in printed and "knowledge (mean / max)" in printed
    record = json.loads((out / "attention.json").read_text())
    tables = record["tables"]
    assert {"knowledge", "rest", "knowledge_seen"} <= set(tables)
    for layer in range(2):
        for head in range(2):
            total = sum(tables[n][layer][head] for n in ("cls", "sep", "knowledge", "rest"))
            assert total == pytest.approx(1.0, abs=1e-5)
    assert 0 < record["knowledge"]["queries_seeing_knowledge"] < record["queries"]
    assert (out / "attention.png").read_bytes()[:4] == b"\x89PNG"
    # no KG recorded in a plain folder: --kg alone names the fix
    assert main([*argv, "--kg", "--output", str(tmp_path / "x")]) == 1
    assert "give --kg KG" in capsys.readouterr().err
    assert main([*argv, "--kg", "--output", str(tmp_path / "thu")]) == 1
    ernie_argv = ["analyze", str(ernie), "attention", "--sentences", str(text), "--kg"]
    assert main([*ernie_argv, "--output", str(tmp_path / "thu")]) == 0
    assert "Read as ERNIE-THU" in capsys.readouterr().out


def test_knowledge_masses_by_hand() -> None:
    """One head, [CLS] a k b [SEP], k a knowledge token that only b sees (a visible matrix)."""
    probs = torch.tensor(
        [
            [0.4, 0.3, 0.0, 0.2, 0.1],  # [CLS]
            [0.1, 0.5, 0.0, 0.2, 0.2],  # a
            [0.0, 0.0, 0.5, 0.5, 0.0],  # k: its own branch and its subject b
            [0.2, 0.1, 0.3, 0.2, 0.2],  # b sees k
            [0.25, 0.25, 0.0, 0.25, 0.25],  # [SEP]
        ]
    )[None, None]
    ids = torch.tensor([[2, 10, 11, 12, 3]])
    real = torch.ones(1, 5, dtype=torch.long)
    knowledge = torch.tensor([[False, False, True, False, False]])
    visibility = torch.ones(1, 5, 5, dtype=torch.bool)
    visibility[0, :, 2] = False
    visibility[0, 2, :] = False
    visibility[0, 2, 2] = visibility[0, 2, 3] = visibility[0, 3, 2] = True
    totals = AttentionAccumulator(cls_id=2, sep_id=3)
    totals.add((probs,), ids, real, knowledge=knowledge, visibility=visibility)
    stats = totals.result()
    table = {name: float(value[0, 0]) for name, value in stats.tables.items()}
    assert table["knowledge"] == pytest.approx((0.5 + 0.3) / 5)
    assert table["cls"] == pytest.approx((0.4 + 0.1 + 0.0 + 0.2 + 0.25) / 5)
    assert table["sep"] == pytest.approx((0.1 + 0.2 + 0.0 + 0.2 + 0.25) / 5)
    assert table["rest"] == pytest.approx((0.5 + 0.7 + 0.5 + 0.3 + 0.5) / 5)
    assert table["knowledge_seen"] == pytest.approx(0.3)  # b, the sentence token that sees k
    assert stats.seeing_knowledge == 1
    assert stats.uniform_knowledge_seen == pytest.approx(1 / 5)  # b sees all 5 tokens
    # uniform entropy counts the visible keys: 4, 4, 2, 5, 4
    expected = (
        3 * torch.log(torch.tensor(4.0))
        + torch.log(torch.tensor(2.0))
        + torch.log(torch.tensor(5.0))
    ) / 5
    assert stats.uniform_entropy == pytest.approx(float(expected))
