"""``ptm extend-vocab``: a model folder with domain words added to its vocabulary.

The domain-adaptive recipe of BioBERT/SciBERT (a vocabulary that fits the domain) on top
of DAPT/TAPT (Gururangan et al., 2020, continued pre-training): the words a corpus uses
often that the tokenizer splits into pieces (:mod:`ptm_core.data.domain_words`) become
tokens of their own (:mod:`ptm_core.tokenization_extend`), and every tensor indexed by token
id grows by one row per word. A new row is the mean of the rows of the pieces the old
tokenizer gave the word (Hewitt's "average of sub-words" initialisation), so the model
starts from what it knew of the word; every old id and row is unchanged.

The folder is rewritten in its own format, so whatever loaded it before loads the new
one: a ptm ``final/`` stays a ptm folder (``ptm pretrain init_from=``, ``ptm finetune
model=``), a Hugging Face BERT or RoBERTa folder stays one (``AutoModelForMaskedLM`` and
``AutoTokenizer`` load it, and so do ptm's loaders). Tensors indexed by token id are found
by name in every ``*.safetensors`` file: the word table (``embeddings.word.weight``, HF's
``...word_embeddings.weight``), an untied MLM decoder (``...decoder.weight``) and the MLM
output bias (ptm's ``objectives.mlm.head.decoder.bias``, HF's ``cls.predictions.bias``,
``lm_head.bias``). A decoder tied to the word table is stored once, as the table.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file
from torch import Tensor

from ptm_core.atomic import OUTPUT_MARKER, atomic_directory, check_output_directory
from ptm_core.checkpoints.io import (
    CheckpointError,
    read_json_object,
    read_weights,
    write_json,
    write_weights,
)
from ptm_core.data.domain_words import DomainWord, count_words, find_domain_words
from ptm_core.tokenization_extend import extend_backend, write_extended_tokenizer

logger = logging.getLogger(__name__)

KIND = "extended-vocab"
RECORD_FILE = "vocab_extension.json"
_WORD_TABLE = re.compile(r"(^|\.)(word|word_embeddings)\.weight$")
# An MLM decoder (weight or bias) or an MLM head's output bias.
_OUTPUT_ROWS = re.compile(r"(^|\.)decoder\.(weight|bias)$|(^|\.)(predictions|lm_head)\.bias$")


@dataclass(frozen=True)
class VocabExtension:
    """What ``extend_vocabulary`` wrote.

    Args:
        output: the new model folder.
        words: the words added, in id order (their ids start at ``old_size``).
        old_size: ids before.
        new_size: ids after.
        grown: the tensors that got new rows, ``file:name``.
        corpus_characters: characters of text read.
    """

    output: Path
    words: tuple[DomainWord, ...]
    old_size: int
    new_size: int
    grown: tuple[str, ...]
    corpus_characters: int


def extend_vocabulary(
    model: str | os.PathLike[str],
    corpus: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    *,
    max_new: int = 1000,
    min_count: int = 5,
    text_field: str = "text",
    overwrite: bool = False,
) -> VocabExtension:
    """Write ``output``: ``model`` with the corpus's frequent split words as new tokens.

    Args:
        model: a ptm ``final/`` or a Hugging Face BERT/RoBERTa-style folder (config.json,
            weights, tokenizer files).
        corpus: files, folders or patterns in ``ptm prepare``'s formats.
        output: the folder to write: new or empty, or (``overwrite``) an earlier output of
            this command.
        max_new: most words added.
        min_count: fewest occurrences of a word added.
        text_field: the JSONL key or Arrow/Parquet column holding the text.
        overwrite: replace ``output`` when it is an earlier ``extend-vocab`` output.

    Returns:
        What was written.

    Raises:
        OutputExistsError: ``output`` may not be written.
        CheckpointError: ``model`` has no word table, or its table and tokenizer disagree.
        ValueError: the corpus holds no word to add, or a bad setting.
    """
    from ptm_core.checkpoints.hf.tokenizer_files import find_tokenizer_directory
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer

    source, out = Path(model), Path(output)
    if max_new < 1 or min_count < 1:
        raise ValueError(f"--max-new {max_new} / --min-count {min_count}: both must be >= 1")
    if not source.is_dir():
        raise CheckpointError(f"{source}: not a folder; pass a model folder (a final/)")
    if out.resolve() == source.resolve() or source.resolve() in out.resolve().parents:
        raise ValueError(f"{out}: inside the model folder {source}; write to another folder")
    check_output_directory(out, kind=KIND, overwrite=overwrite, option="--overwrite")
    config = read_json_object(source / "config.json")
    tokenizer_dir = find_tokenizer_directory(source)
    if tokenizer_dir is None:
        raise CheckpointError(
            f"{source}: no tokenizer.json or vocab.txt; extend-vocab needs the model's tokenizer"
        )
    old = load_task_tokenizer(tokenizer_dir)
    old_size = old.vocab_size
    tables = _vocab_tensors(source, old_size)
    if not any(_WORD_TABLE.search(name) for names in tables.values() for name in names):
        raise CheckpointError(
            f"{source}: no word-embedding table of {old_size} rows (a tensor named "
            "...word_embeddings.weight or embeddings.word.weight); extend-vocab needs a text "
            "encoder whose tokenizer indexes its table"
        )
    counts = count_words(corpus, old.backend, text_field=text_field)
    words = find_domain_words(
        counts, old.backend, max_new=max_new, min_count=min_count, unk_id=old.vocab_info.unk_id
    )
    if not words:
        raise ValueError(
            f"{', '.join(map(str, counts.files))}: no word occurs {min_count}+ times that the "
            f"tokenizer of {source} splits into pieces; lower --min-count or give a larger "
            "domain corpus"
        )
    backend = extend_backend(old.backend, [w.word for w in words])
    new_size = backend.get_vocab_size(with_added_tokens=True)
    grown: list[str] = []
    with atomic_directory(out, kind=KIND, overwrite=overwrite, option="--overwrite") as tmp:
        _copy_tree(source, tmp)
        for file, names in tables.items():
            grown += [f"{file}:{name}" for name in names]
            _grow_file(source, tmp, file, names, words)
        write_json(tmp / "config.json", {**config, "vocab_size": new_size})
        write_extended_tokenizer(
            tmp / tokenizer_dir.relative_to(source), backend, [w.word for w in words]
        )
        write_json(tmp / RECORD_FILE, _record(source, counts.files, words, old_size, new_size))
        _check_written(tmp / tokenizer_dir.relative_to(source), words, old_size)
    logger.info("%s: %d words added (ids %d..%d)", out, len(words), old_size, new_size - 1)
    return VocabExtension(out, tuple(words), old_size, new_size, tuple(grown), counts.characters)


def _vocab_tensors(source: Path, rows: int) -> dict[str, list[str]]:
    """Weights file -> names of its tensors indexed by token id (``rows`` rows)."""
    found: dict[str, list[str]] = {}
    main = next(
        (name for name in ("model.safetensors", "pytorch_model.bin") if (source / name).is_file()),
        None,
    )
    files = sorted({*([main] if main else []), *(p.name for p in source.glob("*.safetensors"))})
    if not files:
        read_weights(source)  # raises the loaders' own "no weights file" error
    for file in files:
        names = []
        for name, shape in _shapes(source / file).items():
            if not (_WORD_TABLE.search(name) or _OUTPUT_ROWS.search(name)):
                continue
            if not shape or shape[0] != rows:
                if _WORD_TABLE.search(name):
                    raise CheckpointError(
                        f"{source / file}: {name} has {shape[0] if shape else 0} rows but the "
                        f"tokenizer has {rows} ids; extend-vocab adds rows after the tokenizer's last id, "
                        "so both must agree (give the model's own tokenizer files)"
                    )
                continue
            names.append(name)
        if names:
            found[file] = names
    return found


def _shapes(path: Path) -> dict[str, list[int]]:
    """Tensor name -> shape, read from a safetensors header (no weights loaded)."""
    if path.suffix != ".safetensors":
        return {name: list(t.shape) for name, t in _load(path).items()}
    with safe_open(path, "pt") as handle:
        return {name: list(handle.get_slice(name).get_shape()) for name in handle.keys()}  # noqa: SIM118


def _load(path: Path) -> dict[str, Tensor]:
    if path.suffix == ".safetensors":
        return load_file(path)
    state, _ = read_weights(path.parent)
    return state


def _grow_file(
    source: Path, tmp: Path, file: str, names: Sequence[str], words: Sequence[DomainWord]
) -> None:
    """Write ``file`` with one new row per word in each named tensor (a .bin as safetensors)."""
    state = _load(source / file)
    for name in names:
        state[name] = grow_rows(state[name], [w.pieces for w in words])
    target = tmp / (file if file.endswith(".safetensors") else "model.safetensors")
    (tmp / file).unlink(missing_ok=True)
    metadata = {"format": "pt"} if target.name == "model.safetensors" else None
    write_weights({k: v.contiguous() for k, v in state.items()}, target, metadata=metadata)


def grow_rows(tensor: Tensor, pieces: Sequence[Sequence[int]]) -> Tensor:
    """``tensor`` with one row appended per entry of ``pieces``: the mean of those rows.

    Args:
        tensor: ``(V, ...)`` rows indexed by token id (a table, a decoder, a bias).
        pieces: for each new row, the old ids it averages.

    Returns:
        ``(V + len(pieces), ...)``; the first ``V`` rows are ``tensor``'s, unchanged.
    """
    new = [tensor[torch.tensor(list(ids))].mean(dim=0) for ids in pieces]
    return torch.cat([tensor, torch.stack(new)], dim=0)


def _copy_tree(source: Path, tmp: Path) -> None:
    for item in source.iterdir():
        if item.name == OUTPUT_MARKER:
            continue
        if item.is_dir():
            shutil.copytree(item, tmp / item.name, ignore=shutil.ignore_patterns(OUTPUT_MARKER))
        else:
            shutil.copy2(item, tmp / item.name)


def _record(
    source: Path,
    files: Sequence[Path],
    words: Sequence[DomainWord],
    old_size: int,
    new_size: int,
) -> dict[str, Any]:
    return {
        "source": str(source.resolve()),
        "corpus": [str(p) for p in files],
        "old_vocab_size": old_size,
        "new_vocab_size": new_size,
        "words": [
            {"word": w.word, "id": old_size + i, "count": w.count, "pieces": list(w.pieces)}
            for i, w in enumerate(words)
        ],
    }


def _check_written(directory: Path, words: Sequence[DomainWord], old_size: int) -> None:
    """Read the written tokenizer back: each word is one piece with its new id."""
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer

    written = load_task_tokenizer(directory)
    for offset, word in enumerate(words):
        ids = written.backend.encode(" " + word.word, add_special_tokens=False).ids
        if list(ids) != [old_size + offset]:
            raise CheckpointError(
                f"{directory}: the written tokenizer gives {word.word!r} ids {list(ids)}, not "
                f"[{old_size + offset}]; its pre-tokenizer splits the word (report this)"
            )
