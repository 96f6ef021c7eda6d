"""The tokenizer of a prepared corpus: given, reused, or trained on a streamed sample.

``<dir>/tokenizer`` holds the tokenizer the ids come from. A given one (``vocab.txt`` or a
tokenizer folder) is saved there; otherwise a WordPiece vocabulary is trained on the first
``tokenizer_sample_bytes`` (default 256 MiB) of sentences in input order, read as a stream
(the trainer keeps word counts, never a list of sentences). The trained tokenizer is reused
while its sample is unchanged: when the sample stopped inside piece ``k`` (a shard's part
of an input), while pieces ``1..k`` are the same; when the corpus was smaller than the
sample, while every piece is.
The folder is rewritten only when its files would change.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ptm_core.atomic import atomic_directory
from ptm_core.data.prepared import TOKENIZER_DIR
from ptm_core.data.shard_writer import tokenizer_sha256
from ptm_core.data.sources import Piece, ScannedInput, file_sha256, iter_piece_documents
from ptm_core.tokenization import WordPieceTokenizer

logger = logging.getLogger(__name__)


def tokenizer_spec(
    tokenizer: str | os.PathLike[str] | None,
    vocab_size: int,
    lowercase: bool,
    sample: int,
    text_field: str,
) -> dict[str, Any]:
    """What the ids' tokenizer is made from, known before any training."""
    if tokenizer is None:
        train = {"vocab_size": vocab_size, "lowercase": lowercase, "sample": sample}
        return {"train": {**train, "text_field": text_field}}
    path = Path(tokenizer)
    if path.is_file():
        return {"vocab_file": file_sha256(path), "lowercase": lowercase}
    if not path.is_dir():
        raise FileNotFoundError(
            f"{path}: tokenizer not found; pass a vocab.txt or a tokenizer folder "
            "(WordPieceTokenizer.save or a Hugging Face folder's tokenizer.json)"
        )
    return {"folder": tokenizer_sha256(path)}


def ready_tokenizer(
    out: Path,
    given: str | os.PathLike[str] | None,
    spec: Mapping[str, Any],
    scanned: Sequence[ScannedInput],
    settings: Mapping[str, Any],
    previous: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """Make ``<out>/tokenizer`` hold the ids' tokenizer; return its manifest entry.

    Args:
        out: The prepared corpus folder.
        given: A ``vocab.txt`` or tokenizer folder, or ``None`` to train one.
        spec: :func:`tokenizer_spec` of this run.
        scanned: The inputs, in order.
        settings: The run's settings (``lowercase``, ``vocab_size``, ``text_field``,
            ``tokenizer_sample_bytes``).
        previous: Tokenizer entries of earlier runs (an interrupted run's first): a trained
            tokenizer whose sample is unchanged is reused as it is.

    Returns:
        ``{"source", "sha256", "vocab_size", "lowercase", "spec", ...}``; a trained one also
        has ``"sample"``: the bytes read and the identity of the pieces they came from.
    """
    target = out / TOKENIZER_DIR
    loaded: Any
    if given is not None:
        from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer

        path = Path(given)
        # A folder's own tokenizer: WordPiece (BERT), byte-level BPE (RoBERTa) or Unigram
        # (XLM-R); the ids are its pieces without special tokens either way.
        loaded = (
            WordPieceTokenizer.from_vocab(path, lowercase=bool(settings["lowercase"]))
            if path.is_file()
            else load_task_tokenizer(path)
        )
        entry: dict[str, Any] = {"source": "given", "given": str(path.resolve())}
    else:
        pieces = [_piece_identity(scan, piece) for scan in scanned for piece in scan.pieces]
        current = tokenizer_sha256(target) if target.is_dir() else None
        for old in previous:
            if (
                old.get("source") == "trained"
                and old.get("spec") == dict(spec)
                and old.get("sha256") == current
                and _same_sample(old.get("sample", {}), pieces)
            ):
                return dict(old)
        loaded, sample = _train_on_sample(scanned, settings)
        entry = {"source": "trained", "sample": sample}
    _save_if_changed(loaded, target)
    entry.update(
        sha256=tokenizer_sha256(target),
        vocab_size=loaded.vocab_size,
        lowercase=getattr(loaded, "lowercase", None),  # None: the file's own normalizer
        spec=dict(spec),
    )
    return entry


def _piece_identity(scan: ScannedInput, piece: Piece) -> str:
    if piece.sha256 is not None:
        return piece.sha256
    return f"{scan.sha256}:{piece.unit}:{piece.start}:{piece.stop}"


def _same_sample(sample: Mapping[str, Any], pieces: Sequence[str]) -> bool:
    """Whether the pieces hold the same first ``max_bytes`` of text as when it was read.

    When the sample stopped inside piece ``k``, pieces ``1..k`` must be unchanged; when the
    corpus was smaller than the sample, every piece must be.
    """
    read = sample.get("pieces")
    if not isinstance(read, list):
        return False
    if sample.get("complete"):
        return list(pieces[: len(read)]) == read
    return list(pieces) == read


def _train_on_sample(
    scanned: Sequence[ScannedInput], settings: Mapping[str, Any]
) -> tuple[WordPieceTokenizer, dict[str, Any]]:
    """Train WordPiece on the first ``tokenizer_sample_bytes`` of sentences, streamed.

    Training the same sample again gives the same vocabulary, but it takes time, so a
    trained tokenizer is kept and reused while its sample is unchanged.
    """
    limit = int(settings["tokenizer_sample_bytes"])
    identities = [_piece_identity(scan, piece) for scan in scanned for piece in scan.pieces]
    pieces = [piece for scan in scanned for piece in scan.pieces]
    state = {"piece": -1, "used": 0}

    def sentences() -> Iterator[str]:
        for index, piece in enumerate(pieces):
            state["piece"] = index
            for document in iter_piece_documents(piece, str(settings["text_field"])):
                for sentence in document:
                    yield sentence
                    state["used"] += len(sentence.encode("utf-8"))
                    if state["used"] >= limit:
                        return

    logger.info(
        "training a WordPiece vocabulary of %d on the first %.0f MiB of sentences",
        settings["vocab_size"],
        limit / 2**20,
    )
    trained = WordPieceTokenizer.train(
        sentences(), vocab_size=int(settings["vocab_size"]), lowercase=bool(settings["lowercase"])
    )
    complete = state["used"] >= limit
    sample = {
        "max_bytes": limit,
        "bytes": state["used"],
        "complete": complete,
        "pieces": identities[: state["piece"] + 1] if complete else identities,
    }
    return trained, sample


def _save_if_changed(tokenizer: Any, target: Path) -> None:
    """Write the tokenizer to ``target`` unless the same files are already there."""
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".tokenizer.", suffix=".tmp") as t:
        tokenizer.save(t)
        if target.is_dir() and tokenizer_sha256(t) == tokenizer_sha256(target):
            return
    with atomic_directory(target) as tmp:
        tokenizer.save(tmp)
