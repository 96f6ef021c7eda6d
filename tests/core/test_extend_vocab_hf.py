"""``extend_vocabulary`` on Hugging Face folders: a BERT (WordPiece) and a RoBERTa (byte-level
BPE) folder extend, and the written folder loads back in ``transformers``
(``AutoModelForMaskedLM``, ``AutoTokenizer``) and in ptm's encoder loader."""

from __future__ import annotations

from pathlib import Path

import torch
import transformers
from hf_folders import roberta_folder

from ptm_core.checkpoints.extend_vocab import extend_vocabulary
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.tokenization import WordPieceTokenizer

WORDS = ["acetylmorphine", "zürichstone"]
DOMAIN = ["paracetamol", "methanolide"]


def _corpus(path: Path, words: list[str], frame: str = "the river met {} in the garden .") -> Path:
    lines = [frame.format(words[i % len(words)]) for i in range(30)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _check_rows(old: torch.Tensor, new: torch.Tensor, pieces: list[list[int]]) -> None:
    assert torch.equal(new[: len(old)], old)
    for offset, ids in enumerate(pieces):
        assert torch.equal(new[len(old) + offset], old[torch.tensor(ids)].mean(dim=0))


def test_an_hf_bert_folder_extends_and_loads_back(tmp_path: Path) -> None:
    lines = [*(["the river met the stone in the garden ."] * 20), *DOMAIN]
    WordPieceTokenizer.train(lines, vocab_size=200, min_frequency=2).save(tmp_path / "bert")
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "bert")
    config = transformers.BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM(config)
    model.save_pretrained(tmp_path / "bert")

    corpus = _corpus(tmp_path / "d.txt", DOMAIN)
    result = extend_vocabulary(tmp_path / "bert", corpus, tmp_path / "out", min_count=5)
    assert {w.word for w in result.words} == set(DOMAIN)

    loaded = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "out")
    new_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "out")
    assert len(new_tok) == loaded.config.vocab_size == result.new_size
    pieces = [list(w.pieces) for w in result.words]
    old_table = model.bert.embeddings.word_embeddings.weight.detach()
    _check_rows(old_table, loaded.bert.embeddings.word_embeddings.weight.detach(), pieces)
    _check_rows(model.cls.predictions.bias.detach(), loaded.cls.predictions.bias.detach(), pieces)
    # The decoder stays tied to the grown table.
    assert torch.equal(
        loaded.cls.predictions.decoder.weight, loaded.bert.embeddings.word_embeddings.weight
    )
    for offset, word in enumerate(result.words):
        assert new_tok(word.word, add_special_tokens=False)["input_ids"] == [
            result.old_size + offset
        ]
    text = "the river met the stone in the garden ."
    assert new_tok(text)["input_ids"] == tokenizer(text)["input_ids"]
    assert TransformerEncoder.from_pretrained(tmp_path / "out").config.vocab_size == (
        result.new_size
    )


def test_a_roberta_bpe_folder_extends_with_whole_word_added_tokens(tmp_path: Path) -> None:
    folder = roberta_folder(tmp_path)
    old_tok = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForMaskedLM.from_pretrained(folder)
    corpus = _corpus(tmp_path / "d.txt", WORDS, "{} .")
    result = extend_vocabulary(folder, corpus, tmp_path / "out", min_count=5)
    assert [w.word for w in result.words] == sorted(WORDS)

    new_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "out")
    loaded = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "out")
    assert len(new_tok) == loaded.config.vocab_size == result.new_size
    for offset, word in enumerate(result.words):
        new_id = result.old_size + offset
        assert old_tok(" " + word.word, add_special_tokens=False)["input_ids"] == list(word.pieces)
        # Mid-sentence and at the start, the word is its one token; the words around keep
        # their ids (the space before the word goes with it, as with its old pieces).
        ids = new_tok(f"river {word.word} garden", add_special_tokens=False)["input_ids"]
        old = old_tok("river", add_special_tokens=False)["input_ids"]
        assert ids == [*old, new_id, *old_tok(" garden", add_special_tokens=False)["input_ids"]]
        assert new_tok(word.word, add_special_tokens=False)["input_ids"] == [new_id]
        # Inside a longer word it is not matched.
        longer = f" {word.word}s"
        assert new_id not in new_tok(longer, add_special_tokens=False)["input_ids"]
    text = "Zürich café 東京 naïve river 🤖 garden"
    assert new_tok(text)["input_ids"] == old_tok(text)["input_ids"]

    pieces = [list(w.pieces) for w in result.words]
    old_table = model.roberta.embeddings.word_embeddings.weight.detach()
    _check_rows(old_table, loaded.roberta.embeddings.word_embeddings.weight.detach(), pieces)
    _check_rows(model.lm_head.bias.detach(), loaded.lm_head.bias.detach(), pieces)
    encoder = TransformerEncoder.from_pretrained(tmp_path / "out")
    assert encoder.config.vocab_size == result.new_size


def test_an_xlm_r_unigram_folder_extends_with_whole_word_added_tokens(tmp_path: Path) -> None:
    folder = roberta_folder(tmp_path, "xlm-roberta")
    old_tok = transformers.AutoTokenizer.from_pretrained(folder)
    model = transformers.AutoModelForMaskedLM.from_pretrained(folder)
    # Its Unigram has 120 pieces: words of its training text's letters split without <unk>.
    words = ["gardenstone", "rivergarden"]
    result = extend_vocabulary(folder, _corpus(tmp_path / "d.txt", words, "{} ."), tmp_path / "o")
    assert [w.word for w in result.words] == words

    new_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "o")
    loaded = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "o")
    assert len(new_tok) == loaded.config.vocab_size == result.new_size
    for offset, word in enumerate(result.words):
        assert new_tok(f" {word.word}", add_special_tokens=False)["input_ids"] == [
            result.old_size + offset
        ]
    text = "Zürich café 東京 naïve river 🤖 garden"
    assert new_tok(text)["input_ids"] == old_tok(text)["input_ids"]
    old_table = model.roberta.embeddings.word_embeddings.weight.detach()
    new_table = loaded.roberta.embeddings.word_embeddings.weight.detach()
    _check_rows(old_table, new_table, [list(w.pieces) for w in result.words])
