"""HF tokenizer files: a cased WordPiece tokenizer stays cased in AutoTokenizer whatever the
model type; a non-WordPiece tokenizer.json of a fine-tuned folder is copied as it is."""

from __future__ import annotations

import json
from pathlib import Path

import transformers
from tokenizers import Tokenizer
from tokenizers.models import BPE

from ptm_core.checkpoints.hf.export import _tokenizer_writer
from ptm_core.checkpoints.hf.tokenizer_files import write_hf_tokenizer_files
from ptm_core.tokenization import WordPieceTokenizer

TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Paris", "paris", "is", "big", "."]


def test_a_cased_tokenizer_stays_cased_under_any_model_type(tmp_path: Path) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(TOKENS) + "\n")
    ours = WordPieceTokenizer.from_vocab(vocab, lowercase=False)
    out = tmp_path / "hf"
    write_hf_tokenizer_files(ours, out, model_max_length=64)
    # An XLNet config would make AutoTokenizer look for a SentencePiece model file.
    (out / "config.json").write_text(json.dumps({"model_type": "xlnet"}))
    theirs = transformers.AutoTokenizer.from_pretrained(out)
    assert theirs.model_max_length == 64
    assert json.loads((out / "special_tokens_map.json").read_text())["mask_token"] == "[MASK]"
    for text in ("Paris is big.", "paris is big ."):
        assert theirs(text)["input_ids"] == ours.encode(text).input_ids
    assert theirs("Paris")["input_ids"] != theirs("paris")["input_ids"]


def test_a_bpe_tokenizer_json_is_copied_unchanged(tmp_path: Path) -> None:
    source = tmp_path / "final"
    source.mkdir()
    bpe = Tokenizer(BPE(vocab={"a": 0, "b": 1, "ab": 2}, merges=[("a", "b")]))
    bpe.save(str(source / "tokenizer.json"))
    (source / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')
    out = tmp_path / "out"
    out.mkdir()
    _tokenizer_writer(source, 64)(out)
    assert (out / "tokenizer.json").read_bytes() == (source / "tokenizer.json").read_bytes()
    assert (out / "tokenizer_config.json").read_bytes() == (
        source / "tokenizer_config.json"
    ).read_bytes()
