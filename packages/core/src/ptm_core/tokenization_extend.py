"""Add whole words to a tokenizer so that every old token keeps its id.

How a word is added depends on the tokenizer's model, so that the tokenizer still splits
text the way it did:

- **WordPiece** (BERT): the word is appended to the model's vocabulary (``tokenizer.json``'s
  ``model.vocab`` and a new last line of ``vocab.txt``). WordPiece looks each pre-tokenized
  word up longest-match-first, so the new word becomes one piece wherever it stands alone.
  A longer word that starts with it and was not in the vocabulary whole
  (``acetylmorphines`` after adding ``acetylmorphine``) now starts with the new piece too:
  that is how BioBERT/SciBERT-style vocabularies behave, and the one way old text can get
  other ids.
- **Byte-level BPE** (RoBERTa) and **Unigram** (XLM-R): a BPE vocabulary entry is reached
  only through merges, and adding merges would change how other words merge, so the word
  is added as an *added token* with ``single_word=True`` (it matches only as a whole word,
  never inside a longer one: old text keeps its ids unless it holds the word itself) and
  ``lstrip=True`` (it takes the space before it, as the word's pieces did: ``Ġacet``...).
  Added tokens are matched before pre-tokenization, on the normalised text
  (``normalized=True``). Decoding joins an added token to the text before it without the
  space (``transformers`` does the same for its own added tokens).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from tokenizers import AddedToken, Tokenizer
from tokenizers.models import WordPiece

from ptm_core.atomic import atomic_write_text
from ptm_core.tokenization import CONFIG_FILE, TOKENIZER_FILE, VOCAB_FILE


def extends_model_vocab(backend: Tokenizer) -> bool:
    """Whether new words go into the model's vocabulary (WordPiece) or are added tokens."""
    return isinstance(backend.model, WordPiece)


def extend_backend(backend: Tokenizer, words: Sequence[str]) -> Tokenizer:
    """A copy of ``backend`` that maps each of ``words`` to one new id, after all old ids.

    Args:
        backend: the tokenizer to extend (not changed).
        words: new words, normalised as the tokenizer's normalizer leaves text; their ids
            are ``size, size + 1, ...`` in this order, ``size`` being the old number of
            ids (added tokens included).

    Returns:
        The extended tokenizer.

    Raises:
        ValueError: a word is already a token.
    """
    size = backend.get_vocab_size(with_added_tokens=True)
    known = backend.get_vocab(with_added_tokens=True)
    taken = [word for word in words if word in known]
    if taken:
        raise ValueError(f"{taken[0]!r} is already a token (id {known[taken[0]]}); drop it")
    if extends_model_vocab(backend):
        data = json.loads(backend.to_str())
        vocab = data["model"]["vocab"]
        for offset, word in enumerate(words):
            vocab[word] = size + offset
        return Tokenizer.from_str(json.dumps(data))
    extended = Tokenizer.from_str(backend.to_str())
    extended.add_tokens(
        [AddedToken(word, single_word=True, lstrip=True, normalized=True) for word in words]
    )
    return extended


def write_extended_tokenizer(directory: Path, backend: Tokenizer, words: Sequence[str]) -> None:
    """Rewrite the tokenizer files in ``directory`` (a copy of the old ones) for ``backend``.

    ``tokenizer.json`` is written from ``backend``; a ``vocab.txt`` gets the new words as its
    last lines (WordPiece); a ``tokenizer_config.json`` that lists ``added_tokens_decoder``
    (``transformers`` 4.34+) lists the new added tokens too (BPE, Unigram).

    Args:
        directory: the folder holding the copied tokenizer files.
        backend: the extended tokenizer (:func:`extend_backend`).
        words: the words added, in id order.
    """
    atomic_write_text(directory / TOKENIZER_FILE, backend.to_str(pretty=True))
    vocab_file = directory / VOCAB_FILE
    if extends_model_vocab(backend) and vocab_file.is_file():
        text = vocab_file.read_text(encoding="utf-8")
        lines = text.splitlines()
        first = backend.token_to_id(words[0]) if words else len(lines)
        if first != len(lines):
            raise ValueError(
                f"{vocab_file}: has {len(lines)} lines but the first new id is {first}; the "
                f"file and {TOKENIZER_FILE} disagree, re-save the tokenizer first"
            )
        atomic_write_text(vocab_file, "".join(f"{token}\n" for token in [*lines, *words]))
    config_file = directory / CONFIG_FILE
    if extends_model_vocab(backend) or not config_file.is_file():
        return
    config = json.loads(config_file.read_text(encoding="utf-8"))
    decoder = config.get("added_tokens_decoder") if isinstance(config, dict) else None
    if not isinstance(decoder, dict):
        return
    for word in words:
        decoder[str(backend.token_to_id(word))] = {
            "content": word,
            "lstrip": True,
            "normalized": True,
            "rstrip": False,
            "single_word": True,
            "special": False,
        }
    atomic_write_text(config_file, json.dumps(config, indent=2, ensure_ascii=False) + "\n")
