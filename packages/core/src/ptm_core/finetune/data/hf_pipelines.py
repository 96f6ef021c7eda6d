"""The `tokenizers` pipeline that ``transformers.AutoTokenizer`` builds for a folder.

Two cases where it is not the folder's ``tokenizer.json`` as written:

- A RoBERTa/GPT-2 folder with only ``vocab.json`` + ``merges.txt`` (saved before
  ``tokenizer.json`` existed, or by the slow tokenizers): :func:`byte_level_bpe` builds
  what ``transformers.RobertaTokenizer`` builds from them (BPE without prefix or suffix,
  a ByteLevel pre-tokenizer and decoder, ``<s> A </s></s> B </s>``).
- A folder whose ``tokenizer_config.json`` names ``XLMRobertaTokenizer``: transformers 5
  keeps only the file's Unigram vocabulary (and a SentencePiece precompiled charsmap) and
  rebuilds the rest in the class's ``__init__`` (white-space split, then Metaspace);
  :func:`like_transformers` does the same, so the ids are the folder's own
  ``AutoTokenizer``'s, not those of a pipeline transformers ignores.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE

VOCAB_JSON = "vocab.json"
MERGES_TXT = "merges.txt"
# RobertaTokenizer's defaults, overridden by the folder's tokenizer_config.json.
_DEFAULTS = {
    "bos_token": "<s>",
    "eos_token": "</s>",
    "sep_token": "</s>",
    "cls_token": "<s>",
    "unk_token": "<unk>",
    "pad_token": "<pad>",
    "mask_token": "<mask>",
}


def has_bpe_files(directory: str | Path) -> bool:
    """Whether ``directory`` holds ``vocab.json`` and ``merges.txt``."""
    path = Path(directory)
    return (path / VOCAB_JSON).is_file() and (path / MERGES_TXT).is_file()


def _token(value: object, default: str) -> str:
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return value if isinstance(value, str) else default


def byte_level_bpe(directory: str | Path) -> Tokenizer:
    """The RoBERTa tokenizer of ``vocab.json`` + ``merges.txt`` in ``directory``.

    ``add_prefix_space``, ``trim_offsets`` and the special tokens come from the folder's
    ``tokenizer_config.json`` when it names them (RoBERTa's defaults otherwise).

    Raises:
        ValueError: a file cannot be read, or a special token is not in ``vocab.json``
            (the message names the file and the token).
    """
    path = Path(directory)
    config_path = path / "tokenizer_config.json"
    config: dict[str, object] = {}
    if config_path.is_file():
        try:
            loaded = json.loads(config_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{config_path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
        config = loaded if isinstance(loaded, dict) else {}
    try:
        model = BPE.from_file(
            str(path / VOCAB_JSON),
            str(path / MERGES_TXT),
            continuing_subword_prefix="",
            end_of_word_suffix="",
            fuse_unk=False,
        )
    except Exception as exc:  # tokenizers raises a bare Exception on a malformed file
        raise ValueError(
            f"{path / VOCAB_JSON}, {path / MERGES_TXT}: cannot be read as byte-level BPE "
            f"({exc}); re-save the tokenizer with transformers' save_pretrained"
        ) from exc
    tokenizer = Tokenizer(model)
    add_prefix_space = bool(config.get("add_prefix_space", False))
    trim_offsets = bool(config.get("trim_offsets", True))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    tokenizer.decoder = decoders.ByteLevel()
    tokens = {field: _token(config.get(field), default) for field, default in _DEFAULTS.items()}
    for field, token in tokens.items():
        if tokenizer.token_to_id(token) is None:
            raise ValueError(
                f"{path / VOCAB_JSON}: has no {field} {token!r}; add it, or name the right "
                f"token in {config_path} (field '{field}')"
            )
    # RoBERTa's <mask> swallows the space before it ("a <mask>" = "a" + "<mask>").
    tokenizer.add_special_tokens(
        [
            AddedToken(token, special=True, lstrip=field == "mask_token", normalized=False)
            for field, token in tokens.items()
        ]
    )
    sep, cls = tokens["sep_token"], tokens["cls_token"]
    tokenizer.post_processor = processors.RobertaProcessing(
        (sep, int(tokenizer.token_to_id(sep) or 0)),
        (cls, int(tokenizer.token_to_id(cls) or 0)),
        trim_offsets=trim_offsets,
        add_prefix_space=add_prefix_space,
    )
    return tokenizer


_XLM_ROBERTA_CLASSES = ("XLMRobertaTokenizer", "XLMRobertaTokenizerFast")


def like_transformers(backend: Tokenizer, config: dict[str, Any]) -> Tokenizer:
    """``backend`` as ``AutoTokenizer`` rebuilds it for the ``tokenizer_class`` of
    ``config`` (the folder's ``tokenizer_config.json``); unchanged for other classes."""
    if config.get("tokenizer_class") not in _XLM_ROBERTA_CLASSES:
        return backend
    prepend = "always" if config.get("add_prefix_space", True) else "never"
    charsmap = _precompiled_charsmap(json.loads(backend.to_str()).get("normalizer"))
    backend.normalizer = normalizers.Precompiled(charsmap) if charsmap is not None else None
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.WhitespaceSplit(),
            pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme=prepend),
        ]
    )
    backend.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme=prepend)
    bos = _token(config.get("bos_token"), "<s>")
    eos = _token(config.get("eos_token"), "</s>")
    backend.post_processor = processors.TemplateProcessing(
        single=[bos, "$A", eos],
        pair=[bos, "$A", eos, eos, "$B", eos],
        special_tokens=[
            (bos, int(backend.token_to_id(bos) or 0)),
            (eos, int(backend.token_to_id(eos) or 0)),
        ],
    )
    return backend


def _precompiled_charsmap(normalizer: Any) -> bytes | None:
    import base64

    if not isinstance(normalizer, dict):
        return None
    parts = (
        normalizer.get("normalizers", [normalizer])
        if normalizer.get("type") == "Sequence"
        else [normalizer]
    )
    for part in parts:
        if part.get("type") == "Precompiled" and "precompiled_charsmap" in part:
            return base64.b64decode(part["precompiled_charsmap"])
    return None
