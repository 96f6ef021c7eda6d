"""The tokenizer of a RoBERTa, XLM-R or mBERT folder gives the ids of the folder's own
``AutoTokenizer``, on text with accents, emoji and CJK, single texts and pairs.

The vocabularies are trained here with `tokenizers` on generated lines (no downloads):
a byte-level BPE (RoBERTa; as ``vocab.json`` + ``merges.txt`` alone and as the
``tokenizer.json`` transformers writes from them), a Unigram ``tokenizer.json`` loaded by
``XLMRobertaTokenizerFast(tokenizer_file=...)`` (XLM-R), and a cased multilingual
WordPiece ``vocab.txt`` (mBERT).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import transformers
from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import Unigram
from tokenizers.trainers import UnigramTrainer

from ptm_core.finetune.data.task_tokenizer import HFTokenizer, load_task_tokenizer
from ptm_core.tokenization import WordPieceTokenizer

TEXTS = [
    "Héllo wörld, déjà vu à Zürich!",
    "Emoji 🤖 and 🎉🎉 party",
    "東京は日本の首都です。北京也是首都。",
    "  leading spaces and MiXeD CaSe  ",
    "naïve café — ½ price",
]
PAIRS = [("Où est la gare?", "駅はどこですか 🚉"), ("Short", "Another sentence, with ünïcode.")]


def corpus() -> list[str]:
    """Generated lines: the test texts' words in varied orders, so merges form."""
    words = " ".join(TEXTS + [a + " " + b for a, b in PAIRS]).split()
    return [" ".join(words[i:] + words[:i]) for i in range(len(words))] * 3


def assert_same_ids(ours: object, theirs: object) -> None:
    for text in TEXTS:
        assert ours.encode_batch([text])[0].input_ids == theirs(text)["input_ids"], text  # type: ignore[attr-defined,operator]
    for a, b in PAIRS:
        assert ours.encode_batch([a], [b])[0].input_ids == theirs(a, b)["input_ids"], (a, b)  # type: ignore[attr-defined,operator]


def _roberta_config(folder: Path, model_type: str = "roberta") -> None:
    (folder / "config.json").write_text(json.dumps({"model_type": model_type}))


def test_roberta_byte_level_bpe_from_vocab_and_merges_or_tokenizer_json(tmp_path: Path) -> None:
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    bpe.train_from_iterator(corpus(), vocab_size=400, min_frequency=2, special_tokens=specials)
    slow = tmp_path / "slow"
    slow.mkdir()
    bpe.save_model(str(slow))
    _roberta_config(slow)
    assert sorted(p.name for p in slow.iterdir()) == ["config.json", "merges.txt", "vocab.json"]
    theirs = transformers.AutoTokenizer.from_pretrained(slow)
    assert type(theirs).__name__.startswith("RobertaTokenizer")
    ours = load_task_tokenizer(slow)
    assert isinstance(ours, HFTokenizer)
    assert ours.vocab_info.pad_id == theirs.pad_token_id == 1
    assert (ours.vocab_info.cls_id, ours.vocab_info.sep_id) == (0, 2)
    assert_same_ids(ours, theirs)
    # A long multi-byte emoji run is split into bytes, not <unk>.
    assert ours.vocab_info.unk_id not in ours.tokenize_ids("🦜🦜 ")

    fast = tmp_path / "fast"
    theirs.save_pretrained(fast)
    _roberta_config(fast)
    assert (fast / "tokenizer.json").is_file()
    assert_same_ids(load_task_tokenizer(fast), transformers.AutoTokenizer.from_pretrained(fast))


def test_a_bpe_vocabulary_without_its_special_tokens_names_the_file(tmp_path: Path) -> None:
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(corpus(), vocab_size=300, special_tokens=["<s>", "</s>", "<unk>"])
    bpe.save_model(str(tmp_path))
    with pytest.raises(ValueError, match=r"vocab\.json: has no pad_token '<pad>'"):
        load_task_tokenizer(tmp_path)


def xlmr_unigram(path: Path) -> None:
    """A SentencePiece-style Unigram ``tokenizer.json`` laid out as XLM-R's."""
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    tokenizer = Tokenizer(Unigram())
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = UnigramTrainer(vocab_size=250, special_tokens=specials, unk_token="<unk>")
    tokenizer.train_from_iterator(corpus(), trainer=trainer)
    tokenizer.add_special_tokens(["<mask>"])
    tokenizer.post_processor = processors.RobertaProcessing(
        ("</s>", tokenizer.token_to_id("</s>")), ("<s>", tokenizer.token_to_id("<s>"))
    )
    tokenizer.save(str(path))


def test_xlm_roberta_unigram_tokenizer_json(tmp_path: Path) -> None:
    xlmr_unigram(tmp_path / "unigram.json")
    built = transformers.XLMRobertaTokenizerFast(tokenizer_file=str(tmp_path / "unigram.json"))
    folder = tmp_path / "xlmr"
    built.save_pretrained(folder)
    _roberta_config(folder, "xlm-roberta")
    theirs = transformers.AutoTokenizer.from_pretrained(folder)
    assert type(theirs).__name__.startswith("XLMRobertaTokenizer")
    ours = load_task_tokenizer(folder)
    assert isinstance(ours, HFTokenizer)
    assert ours.vocab_info.pad_id == theirs.pad_token_id
    assert ours.vocab_info.mask_id == theirs.mask_token_id
    assert_same_ids(ours, theirs)


def test_mbert_multilingual_wordpiece_matches_bert_tokenizer_fast(tmp_path: Path) -> None:
    """Cased, accents kept, every CJK character its own word (BERT's basic tokenizer)."""
    trained = WordPieceTokenizer.train(corpus(), vocab_size=300, lowercase=False)
    trained.save(tmp_path / "trained")
    vocab = (tmp_path / "trained" / "vocab.txt").read_text(encoding="utf-8").split("\n")
    vocab = [v for v in vocab if v]
    assert "東" in vocab and "é" in "".join(vocab)
    folder = tmp_path / "mbert"
    folder.mkdir()
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": False})
    )
    theirs = transformers.AutoTokenizer.from_pretrained(folder)
    assert type(theirs).__name__.startswith("BertTokenizer") and len(theirs) == len(vocab)
    ours = load_task_tokenizer(folder)
    assert isinstance(ours, WordPieceTokenizer) and not ours.lowercase
    assert_same_ids(ours, theirs)
    cjk = ours.encode_batch([TEXTS[2]])[0].tokens
    # Han characters are words of their own; kana runs are not (BERT splits ideographs only).
    assert cjk[1:-1] == [*"東京は日本の首都", "です", *"。北京也是首都。"], cjk
