"""VectorTable: files, gensim KeyedVectors, neighbours, 3CosAdd analogies, embedding init."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from ptm_classic.static.vectors import VectorTable, VectorTableError, init_token_embeddings


def planted_analogy_table(seed: int = 0) -> VectorTable:
    """man -> woman and king -> queen differ by the same offset; distractors are random."""
    g = torch.Generator().manual_seed(seed)
    dim = 16
    man, king, paris, france = (torch.randn(dim, generator=g) for _ in range(4))
    gender = torch.randn(dim, generator=g)
    capital = torch.randn(dim, generator=g)
    rows = {
        "man": man,
        "woman": man + gender,
        "king": king,
        "queen": king + gender,
        "paris": paris,
        "france": paris + capital,
        "rome": france - capital + 0.1 * torch.randn(dim, generator=g),
        "italy": france + 0.1 * torch.randn(dim, generator=g),
    }
    for i in range(30):
        rows[f"noise{i}"] = torch.randn(dim, generator=g)
    return VectorTable(list(rows), torch.stack(list(rows.values())), "planted")


def test_round_trip_keeps_rows_vocab_and_metadata(tmp_path: Path) -> None:
    table = planted_analogy_table()
    table.metadata["epoch_losses"] = [3.0, 2.0]
    table.save(tmp_path / "t")
    header = json.loads((tmp_path / "t" / "table.json").read_text())
    assert header["format"] == "ptm-vectors" and header["version"] == 1
    assert header["dim"] == 16 and header["method"] == "planted" and header["size"] == len(table)
    assert (tmp_path / "t" / "vocab.txt").read_text().splitlines() == table.vocab
    loaded = VectorTable.load(tmp_path / "t")
    assert loaded.vocab == table.vocab
    assert torch.equal(loaded.vectors, table.vectors)
    assert loaded.metadata["epoch_losses"] == [3.0, 2.0]
    assert loaded.index("queen") == 3 and loaded.index("absent") is None
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left


def test_analogy_recovers_planted_offsets_and_matches_gensim() -> None:
    table = planted_analogy_table()
    assert table.analogy("man", "woman", "king", k=1)[0][0] == "queen"
    assert table.analogy("king", "queen", "man", k=1)[0][0] == "woman"
    keyed = table.to_keyed_vectors()
    theirs = keyed.most_similar(positive=["woman", "king"], negative=["man"], topn=5)
    ours = table.analogy("man", "woman", "king", k=5)
    assert [w for w, _ in ours] == [w for w, _ in theirs]
    assert [s for _, s in ours] == pytest.approx([s for _, s in theirs], abs=1e-5)


def test_gensim_loads_the_table_and_agrees_on_neighbours(tmp_path: Path) -> None:
    table = planted_analogy_table()
    table.save(tmp_path / "t")
    keyed = VectorTable.load(tmp_path / "t").to_keyed_vectors()
    assert list(keyed.index_to_key) == table.vocab
    for word in ("man", "paris", "noise3"):
        ours = table.most_similar(word, 6)
        theirs = keyed.most_similar(word, topn=6)
        assert [w for w, _ in ours] == [w for w, _ in theirs]
        assert [s for _, s in ours] == pytest.approx([s for _, s in theirs], abs=1e-5)
    assert word not in [w for w, _ in table.most_similar(word, 10)]


def test_load_errors_name_the_file_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(VectorTableError, match="no vector table directory"):
        VectorTable.load(tmp_path / "none")
    planted_analogy_table().save(tmp_path / "t")
    (tmp_path / "t" / "vocab.txt").write_text("a\nb\n")
    with pytest.raises(VectorTableError, match=r"vocab\.txt: 2 tokens.*shape \(38, 16\)"):
        VectorTable.load(tmp_path / "t")
    (tmp_path / "t" / "table.json").write_text('{"format": "other"}')
    with pytest.raises(VectorTableError, match=r"table\.json: field format .*write it again"):
        VectorTable.load(tmp_path / "t")
    (tmp_path / "t" / "vectors.safetensors").unlink()
    with pytest.raises(VectorTableError, match=r"vectors\.safetensors: file missing"):
        VectorTable.load(tmp_path / "t")


def test_table_rejects_duplicates_and_unknown_queries() -> None:
    with pytest.raises(VectorTableError, match="appears twice"):
        VectorTable(["a", "a"], torch.zeros(2, 3))
    with pytest.raises(VectorTableError, match="do not fit"):
        VectorTable(["a"], torch.zeros(2, 3))
    with pytest.raises(KeyError, match="not in the vector table"):
        planted_analogy_table().most_similar("zebra")


def test_init_token_embeddings_copies_rows_with_lowercase_fallback() -> None:
    table = planted_analogy_table()
    embedding = nn.Embedding(5, 16)
    before = embedding.weight.detach().clone()
    stats = init_token_embeddings(embedding, ["[PAD]", "king", "Queen", "##ing", "paris"], table)
    weight = embedding.weight.detach()
    assert torch.equal(weight[1], table.vector("king"))
    assert torch.equal(weight[2], table.vector("queen"))  # lower-case fallback
    assert torch.equal(weight[4], table.vector("paris"))
    assert torch.equal(weight[0], before[0]) and torch.equal(weight[3], before[3])
    assert (stats.exact, stats.lowercased, stats.missing) == (2, 1, 2)
    assert stats.coverage == pytest.approx(3 / 5)
    strict = init_token_embeddings(
        nn.Embedding(5, 16), {"Queen": 2}, table, lowercase_fallback=False
    )
    assert strict.missing == 1 and strict.coverage == 0.0


def test_init_token_embeddings_reaches_a_transformer_and_checks_dims() -> None:
    from ptm_core.encoders.presets import bert_encoder

    table = planted_analogy_table()
    encoder = bert_encoder(vocab_size=6, hidden_size=16, num_layers=1, num_heads=2)
    stats = init_token_embeddings(encoder.word_embeddings, ["[PAD]", "man", "queen"], table)
    assert stats.exact == 2
    assert torch.equal(encoder.word_embeddings.weight[2].detach(), table.vector("queen"))
    wide = bert_encoder(vocab_size=6, hidden_size=32, num_layers=1, num_heads=2)
    with pytest.raises(ValueError, match="the embedding 32: train the table with dim=32"):
        init_token_embeddings(wide.word_embeddings, ["man"], table)


def test_missing_gensim_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "gensim", None)  # import gensim -> ImportError
    monkeypatch.setitem(sys.modules, "gensim.models", None)
    with pytest.raises(ImportError, match=r"pip install 'ptm-classic\[static\]'"):
        planted_analogy_table().to_keyed_vectors()
    from ptm_classic.static.word2vec import train_word2vec

    with pytest.raises(ImportError, match=r"ptm-classic\[static\]"):
        train_word2vec([["a", "b"]], min_count=1)
