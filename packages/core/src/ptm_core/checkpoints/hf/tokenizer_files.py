"""Tokenizer files that ``transformers.AutoTokenizer`` loads as the same WordPiece tokenizer.

ptm's tokenizers are BERT WordPiece (:class:`~ptm_core.tokenization.WordPieceTokenizer`).
A Hugging Face model folder needs, beside ``config.json`` and the weights:

- ``tokenizer.json``: the `tokenizers` pipeline itself (normaliser, pre-tokenizer, WordPiece
  model, ``[CLS] a [SEP] b [SEP]`` template), so ids are identical by construction;
- ``vocab.txt``: the slow ``BertTokenizer``'s vocabulary;
- ``tokenizer_config.json``: ``tokenizer_class`` (``BertTokenizer``: ``AutoTokenizer``
  then builds ``BertTokenizerFast`` from ``tokenizer.json`` whatever the model type, so an
  ALBERT, XLNet, BART or T5 folder does not ask for a SentencePiece/BPE file it does not
  have), ``do_lower_case``, ``model_max_length`` and the special tokens;
- ``special_tokens_map.json``: the five BERT special tokens.

Without these files ``AutoTokenizer`` on a folder falls back to the model type's own
tokenizer class and fails, or builds one that knows only the special tokens.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ptm_core.atomic import atomic_write_text
from ptm_core.tokenization import CONFIG_FILE, WordPieceTokenizer

SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"
HF_TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE)
_SPECIAL_FIELDS = {
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "mask_token": "[MASK]",
}


def write_hf_tokenizer_files(
    tokenizer: WordPieceTokenizer,
    directory: str | Path,
    *,
    model_max_length: int | None = None,
) -> list[Path]:
    """Write the four tokenizer files of a Hugging Face folder into ``directory``.

    ``AutoTokenizer.from_pretrained(directory)`` then gives a ``BertTokenizerFast`` with the
    same ids, lower-casing and special tokens as ``tokenizer``, for any model type.

    Args:
        tokenizer: the WordPiece tokenizer the model was trained with.
        directory: the model folder (created if missing).
        model_max_length: the model's longest input (``max_positions``); ``None`` leaves
            ``transformers``' "no limit" default.

    Returns:
        The paths written.
    """
    out = Path(directory)
    tokenizer.save(out)  # tokenizer.json, vocab.txt, tokenizer_config.json
    config_path = out / CONFIG_FILE
    config: dict[str, Any] = json.loads(config_path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "BertTokenizer"
    config["clean_up_tokenization_spaces"] = True
    if model_max_length is not None:
        config["model_max_length"] = int(model_max_length)
    for field, token in _SPECIAL_FIELDS.items():
        config.setdefault(field, token)
    atomic_write_text(config_path, json.dumps(config, indent=2) + "\n")
    atomic_write_text(
        out / SPECIAL_TOKENS_MAP_FILE,
        json.dumps({f: config[f] for f in _SPECIAL_FIELDS}, indent=2) + "\n",
    )
    return [out / name for name in HF_TOKENIZER_FILES]


def find_tokenizer_directory(directory: str | Path) -> Path | None:
    """The folder holding a run's tokenizer: ``directory`` itself (an encoder ``final/``)
    or ``directory/tokenizer`` (an encoder-decoder ``final/``); ``None`` when neither has a
    ``tokenizer.json`` or ``vocab.txt``."""
    base = Path(directory)
    for candidate in (base, base / "tokenizer"):
        if (candidate / "tokenizer.json").is_file() or (candidate / "vocab.txt").is_file():
            return candidate
    return None
