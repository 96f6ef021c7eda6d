"""``extend_vocabulary`` on a ptm final/: old ids and rows unchanged, new rows = the exact
mean of the old pieces' rows, the new words one id each, tied and untied MLM decoders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from ptm_core.atomic import OutputExistsError
from ptm_core.checkpoints import CheckpointError
from ptm_core.checkpoints.extend_vocab import extend_vocabulary
from ptm_core.encoders.builders import TransformerSize, bert
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer
from ptm_core.tokenization import WordPieceTokenizer

GENERAL = ["the cat sat on the mat .", "a dog ran in the park .", "we like a good book ."] * 20
DOMAIN_WORDS = ["acetylmorphine", "oxazolidine", "benzpyrene"]
DECODER_BIAS = "objectives.mlm.head.decoder.bias"
DECODER_WEIGHT = "objectives.mlm.head.decoder.weight"


def _domain_corpus(path: Path, rare: str = "oxamorphine") -> Path:
    lines = []
    for i in range(40):
        word = DOMAIN_WORDS[i % 3] if i % 8 else rare
        lines.append(f"the cat sat on the {word} .")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _final(folder: Path, *, untied: bool = False) -> Path:
    """A ptm final/: a tiny BERT, its WordPiece tokenizer and MLM head tensors."""
    tokenizer = WordPieceTokenizer.train(GENERAL + DOMAIN_WORDS, vocab_size=200, min_frequency=2)
    torch.manual_seed(0)
    size = TransformerSize(tokenizer.vocab_size, 16, 1, 2, 32, 64)
    encoder = bert(size)
    heads = {DECODER_BIAS: torch.randn(tokenizer.vocab_size)}
    if untied:
        heads[DECODER_WEIGHT] = torch.randn(tokenizer.vocab_size, 16)
    encoder.save_pretrained(folder, tokenizer=tokenizer, heads=heads)
    return folder


def test_old_rows_and_ids_are_unchanged_and_new_rows_are_the_piece_means(tmp_path: Path) -> None:
    source = _final(tmp_path / "final", untied=True)
    corpus = _domain_corpus(tmp_path / "domain.txt")
    # The domain words occur 11-12 times, "oxamorphine" 5 times.
    result = extend_vocabulary(source, corpus, tmp_path / "out", max_new=10, min_count=6)

    assert sorted(w.word for w in result.words) == sorted(DOMAIN_WORDS)
    old_tok, new_tok = load_task_tokenizer(source), load_task_tokenizer(tmp_path / "out")
    old_vocab, new_vocab = old_tok.backend.get_vocab(), new_tok.backend.get_vocab()
    assert {t: new_vocab[t] for t in old_vocab} == old_vocab
    assert new_tok.vocab_size == old_tok.vocab_size + len(result.words) == result.new_size
    for offset, word in enumerate(result.words):
        assert new_tok.tokenize_ids(word.word) == [result.old_size + offset]
        assert list(word.pieces) == old_tok.tokenize_ids(word.word)
        assert len(word.pieces) > 1
    text = "the dog sat on a good mat in the park ."
    assert new_tok.tokenize_ids(text) == old_tok.tokenize_ids(text)

    old_model = load_file(source / "model.safetensors")
    new_model = load_file(tmp_path / "out" / "model.safetensors")
    old_heads = load_file(source / "heads.safetensors")
    new_heads = load_file(tmp_path / "out" / "heads.safetensors")
    for old, new in (
        (old_model["embeddings.word.weight"], new_model["embeddings.word.weight"]),
        (old_heads[DECODER_WEIGHT], new_heads[DECODER_WEIGHT]),
        (old_heads[DECODER_BIAS], new_heads[DECODER_BIAS]),
    ):
        assert torch.equal(new[: len(old)], old)
        assert len(new) == result.new_size
        for offset, word in enumerate(result.words):
            mean = old[torch.tensor(word.pieces)].mean(dim=0)
            assert torch.equal(new[result.old_size + offset], mean)
    for name, tensor in old_model.items():  # every other tensor as it was
        if name != "embeddings.word.weight":
            assert torch.equal(new_model[name], tensor)
    assert json.loads((tmp_path / "out" / "config.json").read_text())["vocab_size"] == (
        result.new_size
    )
    encoder = TransformerEncoder.from_pretrained(tmp_path / "out")
    assert encoder.config.vocab_size == result.new_size


def test_a_tied_decoder_is_the_word_table_and_grows_with_it(tmp_path: Path) -> None:
    source = _final(tmp_path / "final")
    result = extend_vocabulary(
        source, _domain_corpus(tmp_path / "d.txt"), tmp_path / "out", max_new=2, min_count=5
    )
    assert len(result.words) == 2
    assert DECODER_WEIGHT not in load_file(tmp_path / "out" / "heads.safetensors")
    assert sorted(result.grown) == [
        f"heads.safetensors:{DECODER_BIAS}",
        "model.safetensors:embeddings.word.weight",
    ]
    record = json.loads((tmp_path / "out" / "vocab_extension.json").read_text())
    assert [w["id"] for w in record["words"]] == [result.old_size, result.old_size + 1]


def test_min_count_and_max_new_pick_the_most_frequent_words(tmp_path: Path) -> None:
    source = _final(tmp_path / "final")
    corpus = _domain_corpus(tmp_path / "d.txt")
    result = extend_vocabulary(source, corpus, tmp_path / "a", max_new=10, min_count=2)
    words = [w.word for w in result.words]
    assert words[-1] == "oxamorphine" and set(words[:3]) == set(DOMAIN_WORDS)
    assert all(w.count >= 2 for w in result.words)
    result = extend_vocabulary(source, corpus, tmp_path / "b", max_new=2, min_count=2)
    assert len(result.words) == 2 and {w.word for w in result.words} < set(DOMAIN_WORDS)


def test_a_word_with_an_unknown_character_is_not_added(tmp_path: Path) -> None:
    # No "q" in the tokenizer's alphabet: the word's pieces hold [UNK], a row of no use.
    source = _final(tmp_path / "final")
    corpus = _domain_corpus(tmp_path / "d.txt", rare="quinolone")
    result = extend_vocabulary(source, corpus, tmp_path / "a", max_new=10, min_count=2)
    assert "quinolone" not in [w.word for w in result.words]


def test_refusals_name_the_cause(tmp_path: Path) -> None:
    source = _final(tmp_path / "final")
    corpus = _domain_corpus(tmp_path / "d.txt")
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "mine.txt").write_text("keep me")
    with pytest.raises(OutputExistsError, match="not empty and ptm did not write it"):
        extend_vocabulary(source, corpus, taken)
    assert (taken / "mine.txt").read_text() == "keep me"

    plain = tmp_path / "plain.txt"
    plain.write_text("the cat sat on the mat .\n" * 20)
    with pytest.raises(ValueError, match="no word occurs 5\\+ times"):
        extend_vocabulary(source, plain, tmp_path / "out")
    assert not (tmp_path / "out").exists()

    no_table = tmp_path / "no_table"
    no_table.mkdir()
    for name in ("config.json", "tokenizer.json", "vocab.txt", "tokenizer_config.json"):
        (no_table / name).write_bytes((source / name).read_bytes())
    state = load_file(source / "model.safetensors")
    from safetensors.torch import save_file

    save_file({k: v for k, v in state.items() if "word" not in k}, no_table / "model.safetensors")
    with pytest.raises(CheckpointError, match="no word-embedding table"):
        extend_vocabulary(no_table, corpus, tmp_path / "out")

    with pytest.raises(ValueError, match="inside the model folder"):
        extend_vocabulary(source, corpus, source / "sub")


def test_an_earlier_output_is_replaced_only_with_overwrite(tmp_path: Path) -> None:
    source = _final(tmp_path / "final")
    corpus = _domain_corpus(tmp_path / "d.txt")
    extend_vocabulary(source, corpus, tmp_path / "out", max_new=1)
    with pytest.raises(OutputExistsError, match="--overwrite"):
        extend_vocabulary(source, corpus, tmp_path / "out", max_new=2)
    result = extend_vocabulary(source, corpus, tmp_path / "out", max_new=2, overwrite=True)
    assert len(result.words) == 2
