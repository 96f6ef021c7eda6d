"""BERT WordPiece tokenizer: a thin wrapper over Hugging Face `tokenizers`.

The wrapper fixes the BERT conventions every objective relies on (``[CLS] a [SEP] b [SEP]``,
segment ids 0/1, the five special tokens) and reads and writes directories that
``transformers.BertTokenizerFast`` loads too. The WordPiece algorithm itself, normalisation,
pre-tokenisation, truncation and decoding all come from `tokenizers`.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Encoding, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import WordPiece
from tokenizers.processors import TemplateProcessing
from tokenizers.trainers import WordPieceTrainer

from ptm_core.atomic import atomic_write_text

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
# Training puts them at ids 0..4 in this order; loaded vocabularies keep their own ids.
SPECIAL_TOKENS: tuple[str, ...] = (PAD, UNK, CLS, SEP, MASK)
_SPECIAL_FIELDS = ("pad_token", "unk_token", "cls_token", "sep_token", "mask_token")

VOCAB_FILE = "vocab.txt"
TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"


@contextmanager
def _read_twice(
    texts: Iterable[str],
) -> Iterator[tuple[set[str], Callable[[], Iterator[str]]]]:
    """Read ``texts`` once for their characters, then give a way to read them again.

    A list or tuple is read again from memory; any other iterable (a generator over a
    corpus) is copied to an unnamed temporary file on the way, one text per line.
    """
    characters: set[str] = set()
    if isinstance(texts, (list, tuple)):
        for index, text in enumerate(texts):
            _check_encodable(text, index)
            characters.update(text)
        yield characters, lambda: iter(texts)
        return
    with tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n") as spill:
        for index, text in enumerate(texts):
            _check_encodable(text, index)
            characters.update(text)
            # The normaliser turns a newline into a space before training, so this is exact.
            spill.write(text.replace("\n", " "))
            spill.write("\n")

        def replay() -> Iterator[str]:
            spill.seek(0)
            for line in spill:
                yield line[:-1]

        yield characters, replay


def _check_encodable(text: str, index: int) -> None:
    """Refuse a text the tokenizers library cannot take: one with a lone surrogate."""
    if not isinstance(text, str):
        raise TypeError(f"text {index} is {type(text).__name__}, not str; pass strings")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ValueError(
                f"text {index}: lone surrogate U+{ord(text[error.start]):04X} at character "
                f"{error.start + 1}, which is not valid Unicode; read the file with "
                "errors='strict' to find where it came from, or drop the character"
            ) from None


def _continuation_pieces(
    characters: Iterable[str],
    normalizer: normalizers.Normalizer,
    splitter: pre_tokenizers.PreTokenizer,
) -> list[str]:
    """The sorted ``##c`` pieces for every character that can continue a word.

    A character continues a word when, after ``normalizer``, it is neither set
    apart (CJK characters get spaces around them) nor split off by ``splitter``
    (whitespace and punctuation). This names ``##c`` for a letter seen only at word starts
    too; such a piece costs one slot and lets new words use the letter inside them.
    """
    pieces = set()
    for character in characters:
        normalized = normalizer.normalize_str(character)
        if normalized != normalized.strip():
            continue
        for c in normalized:
            if len(splitter.pre_tokenize_str(c + c)) == 1:
                pieces.add("##" + c)
    return sorted(pieces)


@dataclass(frozen=True)
class VocabInfo:
    """Vocabulary size and special-token ids, as the objectives need them.

    Args:
        vocab_size: Number of ids (random replacement draws from ``[0, vocab_size)``).
        pad_id: Id of ``[PAD]``.
        unk_id: Id of ``[UNK]``.
        cls_id: Id of ``[CLS]``.
        sep_id: Id of ``[SEP]``.
        mask_id: Id of ``[MASK]``.
    """

    vocab_size: int
    pad_id: int
    unk_id: int
    cls_id: int
    sep_id: int
    mask_id: int

    @property
    def special_ids(self) -> tuple[int, ...]:
        """Ids that masking objectives must never select (pad, unk, cls, sep, mask)."""
        return (self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id)


@dataclass
class TokenizedText:
    """One encoded sequence or sequence pair (all lists have the same length).

    Args:
        input_ids: Token ids including ``[CLS]``/``[SEP]``.
        token_type_ids: Segment ids: 0 for ``[CLS] a [SEP]``, 1 for ``b [SEP]``.
        special_tokens_mask: 1 at special tokens, 0 elsewhere.
        attention_mask: 1 at every real token (no padding is added here).
        offsets: ``(start, end)`` character offsets into the original text the token came
            from (``a`` or ``b``); ``(0, 0)`` for special tokens.
        tokens: The word pieces as strings.
    """

    input_ids: list[int]
    token_type_ids: list[int]
    special_tokens_mask: list[int]
    attention_mask: list[int]
    offsets: list[tuple[int, int]]
    tokens: list[str]

    def __len__(self) -> int:
        return len(self.input_ids)


class BackendTokenizer:
    """What every ptm tokenizer shares: a ``tokenizers.Tokenizer`` backend, run without
    padding or truncation (both are per call), and cached truncating copies of it.

    Subclasses set ``self._vocab_info`` once the backend is in place, and pick the backend
    per call with their ``_backend_for`` (through :meth:`_truncating_copy`).
    """

    _vocab_info: VocabInfo

    def __init__(self, backend: Tokenizer) -> None:
        # Padding/truncation live in the call, not in the tokenizer (HF files may set them).
        backend.no_padding()
        backend.no_truncation()
        self._backend = backend
        self._truncating: dict[int, Tokenizer] = {}
        # id(backend) -> (backend, its plain-ASCII twin or None); see _encode_rows.
        self._twins: dict[int, tuple[Tokenizer, Tokenizer | None]] = {}

    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included."""
        return self._backend.get_vocab_size(with_added_tokens=True)

    @property
    def vocab_info(self) -> VocabInfo:
        """Vocabulary size and the special ids (for the objectives)."""
        return self._vocab_info

    @property
    def backend(self) -> Tokenizer:
        """The underlying ``tokenizers.Tokenizer`` (read-only: truncating copies are cached)."""
        return self._backend

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Text of ``ids`` (through the backend's decoder)."""
        return self._backend.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        """Id of ``token``, or ``None`` if it is not in the vocabulary."""
        return self._backend.token_to_id(token)

    def _encode_rows(
        self, backend: Tokenizer, inputs: list[Any], *, fast: bool = False, **kwargs: Any
    ) -> list[Encoding]:
        """``backend.encode_batch(inputs)`` (``encode_batch_fast`` with ``fast``), the same
        encodings, sooner.

        A BERT normaliser cleans control characters, pads CJK characters, strips accents
        (Unicode decomposition) and lowercases. Printable ASCII has nothing for the first
        three to do, so rows that are all printable ASCII (pairs: both sides) go through a
        twin of ``backend`` whose normaliser only lowercases; their ids, tokens and offsets
        are the same, at about two thirds of the cost. Other rows take ``backend``.
        """
        method = "encode_batch_fast" if fast else "encode_batch"

        def encode(tokenizer: Tokenizer, rows: list[Any]) -> list[Encoding]:
            return list(getattr(tokenizer, method)(rows, **kwargs))

        twin = self._plain_ascii_twin(backend)
        if twin is None:
            return encode(backend, inputs)
        plain = [
            _plain_ascii(row) if isinstance(row, str) else all(map(_plain_ascii, row))
            for row in inputs
        ]
        if all(plain) or not any(plain):
            return encode(twin if all(plain) else backend, inputs)
        out: list[Any] = [None] * len(inputs)
        for tokenizer, wanted in ((twin, True), (backend, False)):
            rows = [i for i, p in enumerate(plain) if p is wanted]
            for i, encoding in zip(rows, encode(tokenizer, [inputs[i] for i in rows]), strict=True):
                out[i] = encoding
        return out

    def _plain_ascii_twin(self, backend: Tokenizer) -> Tokenizer | None:
        """A copy of ``backend`` whose BERT normaliser is only its lowercasing (cached);
        ``None`` when the backend has another normaliser."""
        cached = self._twins.get(id(backend))
        if cached is not None and cached[0] is backend:
            return cached[1]
        state = json.loads(backend.to_str())
        normalizer = state.get("normalizer") or {}
        twin = None
        if normalizer.get("type") == "BertNormalizer":
            state["normalizer"] = {"type": "Lowercase"} if normalizer.get("lowercase") else None
            twin = Tokenizer.from_str(json.dumps(state))
        self._twins[id(backend)] = (backend, twin)
        return twin

    def _truncating_copy(self, max_length: int) -> Tokenizer:
        """A cached copy of the backend that truncates to ``max_length``."""
        if max_length not in self._truncating:
            # A copy rather than toggling the shared backend keeps encode thread-safe.
            copy = Tokenizer.from_str(self._backend.to_str())
            copy.no_padding()
            copy.enable_truncation(max_length, strategy="longest_first", direction="right")
            self._truncating[max_length] = copy
        return self._truncating[max_length]


class WordPieceTokenizer(BackendTokenizer):
    """BERT WordPiece tokenizer (Devlin et al., 2019, "BERT"; Wu et al., 2016, "GNMT").

    Build one with :meth:`from_vocab`, :meth:`from_directory` or :meth:`train`. Treat
    :attr:`backend` as read-only: truncating copies of it are cached.

    Args:
        backend: A `tokenizers.Tokenizer` with a WordPiece model and a BERT post-processor.
        lowercase: Whether the normaliser lowercases (reported by :attr:`lowercase`).
    """

    def __init__(self, backend: Tokenizer, *, lowercase: bool) -> None:
        super().__init__(backend)
        self._lowercase = lowercase
        self._vocab_info = VocabInfo(
            vocab_size=self.vocab_size, **_special_ids(backend, "tokenizer")
        )
        prefix = getattr(backend.model, "continuing_subword_prefix", "##")
        # One flag per id so word_start_mask is a list lookup, not a string test per token.
        self._is_continuation = [False] * self.vocab_size
        for token, token_id in backend.get_vocab(with_added_tokens=True).items():
            if token.startswith(prefix) and len(token) > len(prefix):
                self._is_continuation[token_id] = True
        for token_id in self._vocab_info.special_ids:
            self._is_continuation[token_id] = False

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_vocab(
        cls,
        path: str | os.PathLike[str],
        *,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        handle_chinese_chars: bool = True,
    ) -> WordPieceTokenizer:
        """Load a BERT ``vocab.txt`` (one token per line, id = line number - 1).

        Args:
            path: The vocab file.
            lowercase: Lowercase before splitting (uncased models).
            strip_accents: Strip accents; ``None`` follows ``lowercase`` as in BERT.
            handle_chinese_chars: Put spaces around CJK characters.

        Returns:
            The tokenizer.

        Raises:
            FileNotFoundError: The file does not exist.
            ValueError: A blank or duplicate line, or a missing special token.
        """
        vocab = _read_vocab(Path(path))
        backend = Tokenizer(WordPiece(vocab, unk_token=UNK, max_input_chars_per_word=100))
        backend.normalizer = normalizers.BertNormalizer(
            clean_text=True,
            handle_chinese_chars=handle_chinese_chars,
            strip_accents=strip_accents,
            lowercase=lowercase,
        )
        return cls._finish(backend, lowercase=lowercase, source=str(path))

    @classmethod
    def from_directory(cls, path: str | os.PathLike[str]) -> WordPieceTokenizer:
        """Load a directory written by :meth:`save` or a Hugging Face BERT tokenizer.

        ``tokenizer.json`` is used when present; otherwise ``vocab.txt`` with the options
        ``do_lower_case``, ``strip_accents`` and ``tokenize_chinese_chars`` from
        ``tokenizer_config.json`` (BERT defaults when that file is absent).

        Args:
            path: The directory.

        Returns:
            The tokenizer.

        Raises:
            FileNotFoundError: Neither ``tokenizer.json`` nor ``vocab.txt`` exists.
            ValueError: A file is malformed or not a BERT WordPiece tokenizer.
        """
        directory = Path(path)
        config = _read_config(directory / CONFIG_FILE)
        tokenizer_file = directory / TOKENIZER_FILE
        if tokenizer_file.is_file():
            try:
                backend = Tokenizer.from_file(str(tokenizer_file))
            except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
                raise ValueError(
                    f"{tokenizer_file}: cannot be read by `tokenizers` ({exc}); "
                    f"re-save it, or delete it to fall back to {VOCAB_FILE}"
                ) from exc
            if not isinstance(backend.model, WordPiece):
                raise ValueError(
                    f"{tokenizer_file}: model is {type(backend.model).__name__}, not "
                    "WordPiece (field 'model.type'); use a BERT WordPiece tokenizer"
                )
            normalizer = backend.normalizer
            if isinstance(normalizer, normalizers.BertNormalizer):
                lowercase = bool(normalizer.lowercase)
            else:
                lowercase = bool(config.get("do_lower_case", True))
            return cls._finish(backend, lowercase=lowercase, source=str(tokenizer_file))
        if (directory / VOCAB_FILE).is_file():
            return cls.from_vocab(
                directory / VOCAB_FILE,
                lowercase=bool(config.get("do_lower_case", True)),
                strip_accents=config.get("strip_accents"),
                handle_chinese_chars=bool(config.get("tokenize_chinese_chars", True)),
            )
        raise FileNotFoundError(
            f"{directory}: no {TOKENIZER_FILE} or {VOCAB_FILE} found; pass a directory "
            "written by WordPieceTokenizer.save or a Hugging Face BERT tokenizer directory"
        )

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        *,
        vocab_size: int = 8000,
        min_frequency: int = 2,
        lowercase: bool = True,
        strip_accents: bool | None = None,
        show_progress: bool = False,
    ) -> WordPieceTokenizer:
        """Train a new WordPiece vocabulary with ``[PAD] [UNK] [CLS] [SEP] [MASK]`` at ids 0..4.

        Args:
            texts: Training text (any granularity: sentences, lines, documents).
            vocab_size: Largest vocabulary size, specials and alphabet included.
            min_frequency: Minimum pair count for a merge.
            lowercase: Lowercase before splitting.
            strip_accents: Strip accents; ``None`` follows ``lowercase`` as in BERT.
            show_progress: Show the `tokenizers` progress bar.

        Returns:
            The trained tokenizer. The same texts give the same vocabulary in every run:
            the texts are read twice (an iterator is copied to a temporary file), first for
            their characters, whose ``##`` pieces are named to the trainer sorted.
        """
        least = len(SPECIAL_TOKENS) + 1
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < least:
            raise ValueError(
                f"vocab_size is {vocab_size!r}; it must be an integer of at least {least} "
                f"({len(SPECIAL_TOKENS)} special tokens plus the characters of the text)"
            )
        backend = Tokenizer(WordPiece(unk_token=UNK, max_input_chars_per_word=100))
        normalizer = normalizers.BertNormalizer(
            clean_text=True,
            handle_chinese_chars=True,
            strip_accents=strip_accents,
            lowercase=lowercase,
        )
        splitter = pre_tokenizers.BertPreTokenizer()
        backend.normalizer, backend.pre_tokenizer = normalizer, splitter
        with _read_twice(texts) as (characters, replay):
            # The trainer creates the "##c" pieces as it meets them, in hash-map order, and
            # breaks ties between equally frequent pairs by piece id: two trainings on the
            # same text could learn different pieces (tokenizers issue #1794). Naming every
            # "##c" up front, sorted, fixes their ids, and so the whole training.
            continuations = _continuation_pieces(characters, normalizer, splitter)
            trainer = WordPieceTrainer(
                vocab_size=vocab_size,
                min_frequency=min_frequency,
                show_progress=show_progress,
                special_tokens=[*SPECIAL_TOKENS, *continuations],
                continuing_subword_prefix="##",
            )
            backend.train_from_iterator(replay(), trainer=trainer)
        # Ids still follow the trainer's order; WordPiece segmentation depends only on the
        # set of pieces, so renumber them canonically: specials, then sorted pieces.
        learned = backend.get_vocab(with_added_tokens=False)
        pieces = sorted(t for t in learned if t not in SPECIAL_TOKENS)
        if len(SPECIAL_TOKENS) + len(pieces) > vocab_size:
            # The trainer keeps the whole alphabet whatever the size asked for.
            raise ValueError(
                f"vocab_size is {vocab_size}, below the {len(SPECIAL_TOKENS)} special tokens "
                f"and the alphabet of the training text ({len(pieces)} characters and "
                f"continuation pieces, {len(SPECIAL_TOKENS) + len(pieces)} tokens); use at least "
                f"{len(SPECIAL_TOKENS) + len(pieces)} (a useful vocabulary is far larger: "
                "the default is 8000)"
            )
        canonical = {t: i for i, t in enumerate([*SPECIAL_TOKENS, *pieces])}
        backend = Tokenizer(WordPiece(canonical, unk_token=UNK, max_input_chars_per_word=100))
        backend.normalizer, backend.pre_tokenizer = normalizer, splitter
        return cls._finish(backend, lowercase=lowercase, source="trained vocabulary")

    @classmethod
    def _finish(cls, backend: Tokenizer, *, lowercase: bool, source: str) -> WordPieceTokenizer:
        """Add the BERT pre-tokenizer, specials, template and decoder, then wrap."""
        if backend.pre_tokenizer is None:
            backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        if backend.decoder is None:
            backend.decoder = decoders.WordPiece(prefix="##", cleanup=True)
        _special_ids(backend, source)  # before add_special_tokens, which would append them
        # normalized=False: "[MASK]" in text stays a special token even when lowercasing.
        backend.add_special_tokens(
            [AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS]
        )
        if backend.post_processor is None:
            cls_id, sep_id = backend.token_to_id(CLS), backend.token_to_id(SEP)
            backend.post_processor = TemplateProcessing(
                single=f"{CLS}:0 $A:0 {SEP}:0",
                pair=f"{CLS}:0 $A:0 {SEP}:0 $B:1 {SEP}:1",
                special_tokens=[(CLS, cls_id), (SEP, sep_id)],
            )
        tokenizer = cls(backend, lowercase=lowercase)
        tokenizer._check_template(source)
        return tokenizer

    def _check_template(self, source: str) -> None:
        """Fail early if a loaded post-processor does not build ``[CLS] a [SEP] b [SEP]``."""
        info = self._vocab_info
        probe = self._backend.encode("", "")
        if probe.ids != [info.cls_id, info.sep_id, info.sep_id] or probe.type_ids != [0, 0, 1]:
            raise ValueError(
                f"{source}: post_processor builds {probe.tokens} with segments "
                f"{probe.type_ids}, not [CLS] a [SEP] b [SEP] with 0/0/1 (field "
                "'post_processor'); use a BERT TemplateProcessing or BertProcessing"
            )

    # ------------------------------------------------------------------ saving

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write ``vocab.txt``, ``tokenizer.json`` and ``tokenizer_config.json``, each atomically.

        The directory loads with :meth:`from_directory` and with
        ``transformers.BertTokenizerFast.from_pretrained``.

        Args:
            directory: Target directory (created if missing).
        """
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        vocab = self._backend.get_vocab(with_added_tokens=True)
        by_id = sorted(vocab.items(), key=lambda item: item[1])
        if [i for _, i in by_id] != list(range(len(by_id))):
            raise ValueError(
                f"{out / VOCAB_FILE}: token ids are not 0..{len(by_id) - 1} without gaps, so "
                "they cannot be written as line numbers; rebuild the tokenizer from a vocab"
            )
        normalizer = self._backend.normalizer
        is_bert = isinstance(normalizer, normalizers.BertNormalizer)
        config: dict[str, Any] = {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": self._lowercase,
            "strip_accents": normalizer.strip_accents if is_bert else None,
            "tokenize_chinese_chars": normalizer.handle_chinese_chars if is_bert else True,
            "do_basic_tokenize": True,
            "never_split": None,
            **dict(zip(_SPECIAL_FIELDS, SPECIAL_TOKENS, strict=True)),
        }
        atomic_write_text(out / VOCAB_FILE, "".join(f"{token}\n" for token, _ in by_id))
        atomic_write_text(out / TOKENIZER_FILE, self._backend.to_str(pretty=True))
        atomic_write_text(out / CONFIG_FILE, json.dumps(config, indent=2) + "\n")

    # ------------------------------------------------------------------ encoding

    def encode(
        self,
        text: str,
        pair: str | None = None,
        *,
        max_length: int | None = None,
        truncation: bool = True,
    ) -> TokenizedText:
        """Encode ``[CLS] text [SEP]`` or ``[CLS] text [SEP] pair [SEP]``.

        Args:
            text: First segment.
            pair: Optional second segment (segment id 1).
            max_length: Longest result, specials included; ``None`` for no limit.
            truncation: Cut the longer segment first to fit ``max_length``; when False, a
                longer result raises ``ValueError``.

        Returns:
            The encoding; offsets index into ``text`` or ``pair``.
        """
        backend = self._backend_for(max_length, truncation, pair is not None)
        encoding = backend.encode(text, pair)
        self._check_length(encoding, max_length, truncation)
        return _to_tokenized(encoding)

    def encode_batch(
        self,
        texts: Sequence[str],
        pairs: Sequence[str] | None = None,
        *,
        max_length: int | None = None,
        truncation: bool = True,
    ) -> list[TokenizedText]:
        """Encode many texts (or text pairs) in parallel; see :meth:`encode`.

        Args:
            texts: First segments.
            pairs: Second segments, one per text, or ``None``.
            max_length: Longest result, specials included; ``None`` for no limit.
            truncation: As in :meth:`encode`.

        Returns:
            One :class:`TokenizedText` per input, in order.
        """
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(
                f"encode_batch: {len(texts)} texts but {len(pairs)} pairs; pass one pair per "
                "text or pairs=None"
            )
        inputs: list[Any] = list(texts) if pairs is None else list(zip(texts, pairs, strict=True))
        backend = self._backend_for(max_length, truncation, pairs is not None)
        encodings = self._encode_rows(backend, inputs)
        for encoding in encodings:
            self._check_length(encoding, max_length, truncation)
        return [_to_tokenized(encoding) for encoding in encodings]

    def tokenize_ids(self, text: str) -> list[int]:
        """Word-piece ids of ``text`` without special tokens or truncation."""
        return list(self._backend.encode(text, add_special_tokens=False).ids)

    def tokenize_ids_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Word-piece ids of many texts, without special tokens (fast path: no offsets)."""
        encodings = self._encode_rows(
            self._backend, list(texts), fast=True, add_special_tokens=False
        )
        return [encoding.ids for encoding in encodings]  # a new list on every read

    def build_inputs(
        self, a_ids: Sequence[int], b_ids: Sequence[int] | None = None
    ) -> tuple[list[int], list[int], list[int]]:
        """Add ``[CLS]``/``[SEP]`` around already tokenized ids.

        Args:
            a_ids: First segment ids (no specials).
            b_ids: Optional second segment ids (no specials).

        Returns:
            ``(input_ids, token_type_ids, special_tokens_mask)``.
        """
        cls_id, sep_id = self._vocab_info.cls_id, self._vocab_info.sep_id
        input_ids = [cls_id, *a_ids, sep_id]
        token_type_ids = [0] * len(input_ids)
        special = [1, *([0] * len(a_ids)), 1]
        if b_ids is not None:
            input_ids += [*b_ids, sep_id]
            token_type_ids += [1] * (len(b_ids) + 1)
            special += [*([0] * len(b_ids)), 1]
        return input_ids, token_type_ids, special

    # ------------------------------------------------------------------ ids and tokens

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        """Tokens for ``ids``; raises ``ValueError`` for an id outside the vocabulary."""
        tokens = []
        for token_id in ids:
            token = self._backend.id_to_token(token_id)
            if token is None:
                raise ValueError(
                    f"token id {token_id} is outside the vocabulary (size {self.vocab_size}); "
                    "ids must come from this tokenizer"
                )
            tokens.append(token)
        return tokens

    def word_start_mask(self, ids: Sequence[int]) -> list[bool]:
        """True where a piece starts a word (not a ``##`` continuation); specials count as starts.

        Args:
            ids: Token ids (with or without specials).

        Returns:
            One flag per id.
        """
        flags = self._is_continuation
        try:
            return [not flags[token_id] for token_id in ids]
        except IndexError:
            bad = next(i for i in ids if not 0 <= i < len(flags))
            raise ValueError(
                f"token id {bad} is outside the vocabulary (size {len(flags)}); ids must "
                "come from this tokenizer"
            ) from None

    @property
    def lowercase(self) -> bool:
        """Whether text is lowercased before splitting."""
        return self._lowercase

    # ------------------------------------------------------------------ helpers

    def _backend_for(self, max_length: int | None, truncation: bool, is_pair: bool) -> Tokenizer:
        """The backend to encode with: a cached copy with truncation on, or the plain one."""
        if max_length is None or not truncation:
            return self._backend
        needed = self._backend.num_special_tokens_to_add(is_pair) + (2 if is_pair else 1)
        if max_length < needed:
            raise ValueError(
                f"max_length={max_length} leaves no room for text (field 'max_length'); "
                f"use at least {needed}"
            )
        return self._truncating_copy(max_length)

    @staticmethod
    def _check_length(encoding: Encoding, max_length: int | None, truncation: bool) -> None:
        if max_length is not None and not truncation and len(encoding.ids) > max_length:
            raise ValueError(
                f"encoding has {len(encoding.ids)} tokens, more than max_length={max_length} "
                "(field 'max_length'); pass truncation=True or a larger max_length"
            )


def _plain_ascii(text: str) -> bool:
    """Whether ``text`` is printable ASCII only (space to ``~``; no tab, no newline)."""
    return text.isascii() and text.isprintable()


def _special_ids(backend: Tokenizer, source: str) -> dict[str, int]:
    """Ids of the five specials as VocabInfo fields; an error names the first missing one."""
    ids = {}
    for token, field in zip(SPECIAL_TOKENS, _SPECIAL_FIELDS, strict=True):
        token_id = backend.token_to_id(token)
        if token_id is None:
            raise ValueError(
                f"{source}: special token {token!r} is not in the vocabulary (field {field!r}); "
                f"add a line {token} to the vocab (BERT vocabularies have {list(SPECIAL_TOKENS)})"
            )
        ids[field.removesuffix("_token") + "_id"] = token_id
    return ids


def _to_tokenized(encoding: Encoding) -> TokenizedText:
    return TokenizedText(
        input_ids=list(encoding.ids),
        token_type_ids=list(encoding.type_ids),
        special_tokens_mask=list(encoding.special_tokens_mask),
        attention_mask=list(encoding.attention_mask),
        offsets=[(int(start), int(end)) for start, end in encoding.offsets],
        tokens=list(encoding.tokens),
    )


def _read_vocab(path: Path) -> dict[str, int]:
    """Read a BERT vocab.txt, rejecting blank and duplicate lines (they would shift ids)."""
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: vocabulary file not found; pass a BERT vocab.txt (one token per line)"
        )
    vocab: dict[str, int] = {}
    with path.open(encoding="utf-8") as handle:
        for index, line in enumerate(handle):
            token = line.rstrip("\r\n")
            if not token.strip():
                raise ValueError(
                    f"{path}:{index + 1}: blank token (field 'token'); every line must hold "
                    "one token, so remove the line (ids after it shift by one)"
                )
            if token in vocab:
                raise ValueError(
                    f"{path}:{index + 1}: token {token!r} already on line {vocab[token] + 1} "
                    "(field 'token'); remove the duplicate line"
                )
            vocab[token] = index
    return vocab


def _read_config(path: Path) -> dict[str, Any]:
    """Read tokenizer_config.json if present; an absent file means BERT defaults."""
    if not path.is_file():
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        line = getattr(exc, "lineno", 1)
        raise ValueError(
            f"{path}:{line}: invalid JSON ({exc}); fix the file or delete it to use BERT defaults"
        ) from exc
    if not isinstance(config, dict):
        raise ValueError(
            f"{path}:1: expected a JSON object, got {type(config).__name__}; "
            'write an object such as {"do_lower_case": true}'
        )
    return config
