"""The tokenizer of an image-text folder's captions: ``vocab.txt`` or ``tokenizer.json``.

An image-text data folder carries the tokenizer its caption ids come from, beside
``pairs.jsonl``:

- ``vocab.txt``: a BERT WordPiece vocabulary (the bundled samples, a BERT folder's file);
- ``tokenizer.json``: any Hugging Face tokenizer (RoBERTa's byte-level BPE, XLM-R's
  Unigram), read as :class:`~ptm_core.finetune.data.task_tokenizer.HFTokenizer`. Copy the
  one of the folder the text stream starts from (``init_from=<RoBERTa folder>``).

A folder with both is refused: which ids the captions have would be a guess. Every reader
of a caption file goes through :func:`load_caption_tokenizer`, so a saved model, a prepared
folder and a folder read whole agree on the ids.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ptm_core.atomic import atomic_write_bytes
from ptm_multimodal.data import ImageTextError

if TYPE_CHECKING:
    from ptm_core.finetune.data.task_tokenizer import TaskTokenizer

VOCAB = "vocab.txt"
TOKENIZER_JSON = "tokenizer.json"
#: Files that travel with a ``tokenizer.json`` (named special tokens), when present.
_COMPANIONS = ("tokenizer_config.json", "special_tokens_map.json")


def caption_tokenizer_file(directory: str | Path) -> Path:
    """The data folder's ``vocab.txt`` or ``tokenizer.json``.

    Raises:
        ImageTextError: neither is there, or both are (one line naming the folder and the
            fix).
    """
    root = Path(directory)
    found = [root / name for name in (VOCAB, TOKENIZER_JSON) if (root / name).is_file()]
    if len(found) == 2:
        raise ImageTextError(
            f"{root}: both {VOCAB} and {TOKENIZER_JSON}; the captions' ids come from one "
            "tokenizer, so keep the one of the model the text stream starts from"
        )
    if not found:
        raise ImageTextError(
            f"{root / VOCAB}: missing; an image-text folder holds the captions' tokenizer "
            f"({VOCAB}, WordPiece, or a Hugging Face {TOKENIZER_JSON})"
        )
    return found[0]


def load_caption_tokenizer(path: str | Path) -> TaskTokenizer:
    """The tokenizer of a caption file (``vocab.txt``), or of a folder holding one.

    A folder is read as :func:`caption_tokenizer_file` finds it; a saved model's folder
    (its own ``tokenizer.json`` + ``vocab.txt``) goes through ``load_task_tokenizer``.
    """
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer
    from ptm_core.tokenization import WordPieceTokenizer

    given = Path(path)
    if given.is_dir():
        given = caption_tokenizer_file(given)
    if given.name == VOCAB:
        return WordPieceTokenizer.from_vocab(given)
    return load_task_tokenizer(given.parent)


def copy_caption_tokenizer(source: Path, target_dir: Path) -> Path:
    """Copy a caption tokenizer file (and a ``tokenizer.json``'s companions) into a folder."""
    for name in (source.name, *(_COMPANIONS if source.name == TOKENIZER_JSON else ())):
        if (source.parent / name).is_file():
            atomic_write_bytes(target_dir / name, (source.parent / name).read_bytes())
    return target_dir / source.name


__all__ = [
    "TOKENIZER_JSON",
    "VOCAB",
    "caption_tokenizer_file",
    "copy_caption_tokenizer",
    "load_caption_tokenizer",
]
