"""The tokenizer the task featurizers take, for any Hugging Face ``tokenizer.json``.

The featurizers (:mod:`~ptm_core.finetune.data.features`, :mod:`~ptm_core.finetune.data.qa`)
need a few things of a tokenizer: encode single texts and pairs with the model's special
tokens (truncated longest-first to ``max_length``), encode without specials (with character
offsets, for QA windows and word-level tags), add the specials around ids it already has,
and the pad/unk/cls/sep/mask ids. :class:`TaskTokenizer` is that protocol.
:class:`~ptm_core.tokenization.WordPieceTokenizer` (BERT) implements it, and so does
:class:`HFTokenizer`, which wraps any ``tokenizers.Tokenizer`` read from a
``tokenizer.json``: byte-level BPE (RoBERTa, BART, GPT-2), Unigram/SentencePiece (ALBERT,
XLNet, T5) or WordPiece. The special-token layout is the file's own ``post_processor``
(RoBERTa's ``<s> A </s></s> B </s>``, T5's ``A </s> B </s>``, XLNet's ``A <sep> B <sep>
<cls>``), read once by encoding a probe pair; nothing is hard-coded per family.

Offsets are characters of the original text (``tokenizers`` maps through the normalizer).
Byte-level BPE puts the space before a word into the word's token (``Ġworld``);
``trim_offsets`` of the RoBERTa/ByteLevel post-processor (applied with or without special
tokens) leaves it out of the offsets. QA trims white space from offsets again
(:func:`~ptm_core.finetune.data.qa.trim_offset`), so an answer never starts with a space
whatever the file says.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from tokenizers import Encoding, Tokenizer

from ptm_core.atomic import atomic_write_text
from ptm_core.finetune.data.hf_pipelines import byte_level_bpe, has_bpe_files, like_transformers
from ptm_core.tokenization import (
    CONFIG_FILE,
    TOKENIZER_FILE,
    BackendTokenizer,
    TokenizedText,
    VocabInfo,
    WordPieceTokenizer,
)

SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"

# Role -> names tried when the folder's configs do not name the token (HF conventions).
_ROLE_NAMES: dict[str, tuple[str, ...]] = {
    "pad": ("<pad>", "[PAD]"),
    "unk": ("<unk>", "[UNK]"),
    "cls": ("<s>", "[CLS]", "<cls>"),
    "sep": ("</s>", "[SEP]", "<sep>"),
    "mask": ("<mask>", "[MASK]"),
}
# Config fields that name a role, first match wins (T5 has no cls: its eos stands in).
_ROLE_FIELDS: dict[str, tuple[str, ...]] = {
    "pad": ("pad_token",),
    "unk": ("unk_token",),
    "cls": ("cls_token", "bos_token"),
    "sep": ("sep_token", "eos_token"),
    "mask": ("mask_token",),
}


@runtime_checkable
class TaskTokenizer(Protocol):
    """What the task featurizers use of a tokenizer.

    Implemented by :class:`~ptm_core.tokenization.WordPieceTokenizer` and
    :class:`HFTokenizer`.
    """

    @property
    def vocab_info(self) -> VocabInfo:
        """Vocabulary size and the pad/unk/cls/sep/mask ids."""
        ...

    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included."""
        ...

    @property
    def backend(self) -> Tokenizer:
        """The ``tokenizers.Tokenizer`` (read-only): encodings without specials, with
        offsets and word ids, come from it."""
        ...

    def encode_batch(
        self,
        texts: Sequence[str],
        pairs: Sequence[str] | None = None,
        *,
        max_length: int | None = None,
        truncation: bool = True,
    ) -> list[TokenizedText]:
        """Texts (or pairs) with the model's specials, cut longest-first to ``max_length``."""
        ...

    def tokenize_ids(self, text: str) -> list[int]:
        """Ids of ``text`` without specials."""
        ...

    def build_inputs(
        self, a_ids: Sequence[int], b_ids: Sequence[int] | None = None
    ) -> tuple[list[int], list[int], list[int]]:
        """``(input_ids, token_type_ids, special_tokens_mask)`` around ids without specials."""
        ...

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Text of ``ids``."""
        ...

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write the tokenizer into ``directory`` (read back by :func:`load_task_tokenizer`)."""
        ...


def num_special_tokens(tokenizer: TaskTokenizer, pair: bool) -> int:
    """How many specials the tokenizer adds to a single text (``pair=False``) or a pair."""
    return len(tokenizer.build_inputs([], [] if pair else None)[0])


class HFTokenizer(BackendTokenizer):
    """Any Hugging Face ``tokenizer.json`` as a :class:`TaskTokenizer`.

    Encodings equal those of ``transformers.PreTrainedTokenizerFast`` built on the same
    file (``ids``, ``token_type_ids``, ``attention_mask``, offsets; truncation
    ``longest_first``), since both run the same ``tokenizers`` pipeline.

    Args:
        backend: the tokenizer (its ``post_processor`` places the specials).
        special_tokens: role (``pad``, ``unk``, ``cls``, ``sep``, ``mask``) -> token
            string; roles not given are looked up by HF's usual names (``<pad>``/``[PAD]``,
            ...). Without a cls token the sep token stands in (T5), without a mask
            token the unk token (neither is used by fine-tuning).
        source: where the tokenizer came from, for error messages.

    Raises:
        ValueError: no pad, unk or sep token can be found, or the post-processor does not
            place the two texts of a pair in order.
    """

    def __init__(
        self,
        backend: Tokenizer,
        special_tokens: Mapping[str, str] | None = None,
        *,
        source: str = "tokenizer",
    ) -> None:
        super().__init__(backend)
        self._source = source
        self.special_tokens = _resolve_specials(backend, dict(special_tokens or {}), source)
        ids = {
            f"{role}_id": int(backend.token_to_id(token) or 0)  # found by _resolve_specials
            for role, token in self.special_tokens.items()
        }
        self._vocab_info = VocabInfo(vocab_size=self.vocab_size, **ids)
        self._single = _template(backend, pair=False, source=source)
        self._pair = _template(backend, pair=True, source=source)

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], special_tokens: Mapping[str, str] | None = None
    ) -> HFTokenizer:
        """Read a ``tokenizer.json``."""
        return cls(_read_backend(Path(path)), special_tokens, source=str(path))

    @classmethod
    def from_directory(cls, path: str | os.PathLike[str]) -> HFTokenizer:
        """Read a Hugging Face tokenizer folder: ``tokenizer.json`` plus the special tokens
        named in ``tokenizer_config.json`` / ``special_tokens_map.json`` when present.

        Raises:
            FileNotFoundError: no ``tokenizer.json`` (a slow-only folder: convert it with
                ``AutoTokenizer.from_pretrained(folder).save_pretrained(folder)``).
        """
        directory = Path(path)
        file = directory / TOKENIZER_FILE
        if not file.is_file() and not has_bpe_files(directory):
            raise FileNotFoundError(
                f"{directory}: no {TOKENIZER_FILE} (nor vocab.json + merges.txt); save the "
                "tokenizer with transformers' AutoTokenizer.from_pretrained(folder)"
                ".save_pretrained(folder), which writes it"
            )
        named: dict[str, str] = {}
        for config_name in (SPECIAL_TOKENS_MAP_FILE, CONFIG_FILE):
            config = _read_json(directory / config_name)
            for role, fields in _ROLE_FIELDS.items():
                for field in fields:
                    token = _token_content(config.get(field))
                    if role not in named and token is not None:
                        named[role] = token
        if not file.is_file():  # a RoBERTa/GPT-2 folder with the slow tokenizer's files
            return cls(byte_level_bpe(directory), named, source=str(directory / "vocab.json"))
        backend = like_transformers(_read_backend(file), _read_json(directory / CONFIG_FILE))
        return cls(backend, named, source=str(file))

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write ``tokenizer.json`` and ``tokenizer_config.json`` (loadable by
        :meth:`from_directory` and by ``transformers.AutoTokenizer``), each atomically."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        config = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            **{f"{role}_token": token for role, token in self.special_tokens.items()},
        }
        atomic_write_text(out / TOKENIZER_FILE, self._backend.to_str(pretty=True))
        atomic_write_text(out / CONFIG_FILE, json.dumps(config, indent=2) + "\n")

    # ------------------------------------------------------------------ encoding

    def encode_batch(
        self,
        texts: Sequence[str],
        pairs: Sequence[str] | None = None,
        *,
        max_length: int | None = None,
        truncation: bool = True,
    ) -> list[TokenizedText]:
        """Encode texts or pairs with the file's specials.

        Args:
            texts: first segments.
            pairs: second segments, one per text, or ``None``.
            max_length: longest row, specials included; ``None`` for no limit.
            truncation: cut the longer segment first to fit; when False a longer row
                raises ``ValueError``.

        Returns:
            One :class:`~ptm_core.tokenization.TokenizedText` per input; offsets index
            into the segment each token came from, ``(0, 0)`` at specials.
        """
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(
                f"encode_batch: {len(texts)} texts but {len(pairs)} pairs; pass one pair per "
                "text or pairs=None"
            )
        inputs: list[Any] = list(texts) if pairs is None else list(zip(texts, pairs, strict=True))
        backend = self._backend_for(max_length, truncation, pairs is not None)
        encodings = self._encode_rows(backend, inputs)
        out = []
        for encoding in encodings:
            if max_length is not None and not truncation and len(encoding.ids) > max_length:
                raise ValueError(
                    f"encoding has {len(encoding.ids)} tokens, more than max_length="
                    f"{max_length} (field 'max_length'); pass truncation=True or raise it"
                )
            out.append(_to_tokenized(encoding))
        return out

    def tokenize_ids(self, text: str) -> list[int]:
        """Ids of ``text`` without specials or truncation."""
        return list(self._backend.encode(text, add_special_tokens=False).ids)

    def build_inputs(
        self, a_ids: Sequence[int], b_ids: Sequence[int] | None = None
    ) -> tuple[list[int], list[int], list[int]]:
        """Put the post-processor's specials around ids that have none.

        Returns:
            ``(input_ids, token_type_ids, special_tokens_mask)``, exactly what the file's
            post-processor makes of the same pieces.
        """
        template = self._single if b_ids is None else self._pair
        input_ids: list[int] = []
        types: list[int] = []
        special: list[int] = []
        for part, type_id in template:
            if isinstance(part, int):
                input_ids.append(part)
                types.append(type_id)
                special.append(1)
                continue
            piece = a_ids if part == "A" else (b_ids or [])
            input_ids.extend(piece)
            types.extend([type_id] * len(piece))
            special.extend([0] * len(piece))
        return input_ids, types, special

    def _backend_for(self, max_length: int | None, truncation: bool, is_pair: bool) -> Tokenizer:
        if max_length is None or not truncation:
            return self._backend
        specials = sum(isinstance(p, int) for p, _ in (self._pair if is_pair else self._single))
        needed = specials + (2 if is_pair else 1)
        if max_length < needed:
            raise ValueError(
                f"max_length={max_length} leaves no room for text after the {specials} "
                f"special tokens (field 'max_length'); use at least {needed}"
            )
        return self._truncating_copy(max_length)


Template = list[tuple[int | str, int]]  # special id, or "A"/"B"; with its token type id


def _template(backend: Tokenizer, *, pair: bool, source: str) -> Template:
    """The post-processor's layout, read off a probe encoding (sequence ids tell the text
    tokens from the specials)."""
    for probe in ("a", "b", "1", "."):
        encoding = backend.encode(probe, probe) if pair else backend.encode(probe)
        sequences = encoding.sequence_ids
        if sum(s == 0 for s in sequences) and (not pair or sum(s == 1 for s in sequences)):
            break
    else:
        raise ValueError(f"{source}: probe texts encode to no tokens; cannot read the template")
    template: Template = []
    for token_id, type_id, sequence in zip(encoding.ids, encoding.type_ids, sequences, strict=True):
        if sequence is None:
            template.append((int(token_id), int(type_id)))
            continue
        name = "A" if sequence == 0 else "B"
        if not (template and template[-1][0] == name):
            template.append((name, int(type_id)))
    texts = [p for p, _ in template if isinstance(p, str)]
    if texts != (["A", "B"] if pair else ["A"]):
        raise ValueError(
            f"{source}: post_processor lays out the texts as {texts} (field "
            "'post_processor'); the featurizers need each text once, first before second"
        )
    return template


def _resolve_specials(backend: Tokenizer, named: dict[str, str], source: str) -> dict[str, str]:
    tokens: dict[str, str] = {}
    for role, names in _ROLE_NAMES.items():
        candidates = [named[role]] if role in named else []
        candidates += [n for n in names if n not in candidates]
        found = next((t for t in candidates if backend.token_to_id(t) is not None), None)
        if found is not None:
            tokens[role] = found
    if "cls" not in tokens and "sep" in tokens:
        tokens["cls"] = tokens["sep"]  # T5: no classification token; the end token stands in
    if "mask" not in tokens and "unk" in tokens:
        tokens["mask"] = tokens["unk"]
    for role in ("pad", "unk", "sep", "cls", "mask"):
        if role not in tokens:
            raise ValueError(
                f"{source}: no {role} token (tried {list(_ROLE_NAMES[role])} and the folder's "
                f"'{_ROLE_FIELDS[role][0]}'); add it to the vocabulary, or name it in "
                f"{CONFIG_FILE} (field '{_ROLE_FIELDS[role][0]}')"
            )
    return {role: tokens[role] for role in ("pad", "unk", "cls", "sep", "mask")}


def _read_backend(file: Path) -> Tokenizer:
    if not file.is_file():
        raise FileNotFoundError(f"{file}: no such file; pass a Hugging Face tokenizer.json")
    try:
        return Tokenizer.from_file(str(file))
    except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
        raise ValueError(
            f"{file}: cannot be read by `tokenizers` ({exc}); re-save it with transformers' "
            "tokenizer.save_pretrained"
        ) from exc


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}:{getattr(exc, 'lineno', 1)}: invalid JSON ({exc})") from exc
    return data if isinstance(data, dict) else {}


def _token_content(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _to_tokenized(encoding: Encoding) -> TokenizedText:
    return TokenizedText(
        input_ids=list(encoding.ids),
        token_type_ids=list(encoding.type_ids),
        special_tokens_mask=list(encoding.special_tokens_mask),
        attention_mask=list(encoding.attention_mask),
        offsets=[(int(start), int(end)) for start, end in encoding.offsets],
        tokens=list(encoding.tokens),
    )


def load_task_tokenizer(directory: str | os.PathLike[str]) -> TaskTokenizer:
    """The tokenizer of a model folder: BERT WordPiece (``vocab.txt``, or a
    ``tokenizer.json`` with BERT's ``[CLS] A [SEP] B [SEP]``) as a
    :class:`~ptm_core.tokenization.WordPieceTokenizer`, any other ``tokenizer.json``
    (BPE, Unigram, WordPiece with another layout) as an :class:`HFTokenizer`.

    Raises:
        FileNotFoundError: neither ``tokenizer.json`` nor ``vocab.txt`` is there.
        ValueError: the files are malformed (the message names the file and field).
    """
    path = Path(directory)
    try:
        return WordPieceTokenizer.from_directory(path)
    except (FileNotFoundError, ValueError) as exc:
        if not (path / TOKENIZER_FILE).is_file() and not has_bpe_files(path):
            raise
        wordpiece_error = exc
    try:
        return HFTokenizer.from_directory(path)
    except ValueError as exc:
        raise ValueError(f"{exc}\n(as BERT WordPiece: {wordpiece_error})") from exc


__all__ = ["HFTokenizer", "TaskTokenizer", "load_task_tokenizer", "num_special_tokens"]
