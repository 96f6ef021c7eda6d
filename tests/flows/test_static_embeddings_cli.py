"""`ptm pretrain experiment=word2vec_tiny`: a vector table gensim loads, in seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.cli import main
from ptm_classic.static.vectors import VectorTable


def test_word2vec_tiny_writes_a_vector_table_and_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    code = main(
        ["pretrain", "experiment=word2vec_tiny", "model.epochs=3", f"trainer.output_dir={out}"]
    )
    assert code == 0
    assert str(out / "final") in capsys.readouterr().out
    table = VectorTable.load(out / "final")
    assert table.method == "word2vec-sg" and table.dim == 32 and "river" in table
    keyed = table.to_keyed_vectors()
    assert [w for w, _ in keyed.most_similar("river", topn=3)] == [
        w for w, _ in table.most_similar("river", 3)
    ]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3] and all(r["loss"] > 0 for r in records)
    report = json.loads((out / "final" / "metrics.json").read_text())
    assert set(report["neighbours"]) == {"she", "paris", "river", "physics"}
    assert report["analogies"][0]["query"] == "marie : she :: pierre : ?"


def test_init_embeddings_switch_starts_a_transformer_from_a_table(tmp_path: Path) -> None:
    from functools import partial

    import torch

    from flows.recipes.text import with_static_embeddings
    from ptm_core.encoders.presets import bert_encoder
    from ptm_core.tokenization import WordPieceTokenizer

    vocab = Path(__file__).parents[2] / "data_specs" / "text_corpus" / "sample-vocab.txt"
    tokenizer = WordPieceTokenizer.from_vocab(vocab, lowercase=True)
    tokenizer.save(tmp_path / "tokenizer")
    words = ["river", "sea", "Paris", "notaword"]
    VectorTable(words, torch.arange(64.0).reshape(4, 16), "planted").save(tmp_path / "table")
    factory = partial(bert_encoder, hidden_size=16, num_layers=1, num_heads=2)
    build = with_static_embeddings(factory, tmp_path / "table", tmp_path / "tokenizer")
    encoder = build(vocab_size=tokenizer.vocab_size)
    weight = encoder.word_embeddings.weight.detach()
    river, sea = tokenizer.token_to_id("river"), tokenizer.token_to_id("sea")
    assert river is not None and sea is not None
    assert torch.equal(weight[river], torch.arange(0.0, 16.0))
    assert torch.equal(weight[sea], torch.arange(16.0, 32.0))
