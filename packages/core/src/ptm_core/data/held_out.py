"""A deterministic held-out split of a user's own text corpus.

A model is judged on documents it did not train on, drawn from the user's data, not on a
bundled sample. A document is held out when a hash of its text falls in one bucket of
:data:`HELD_OUT_EVERY`, so the choice depends on the document alone: when a corpus grows,
the documents held out before stay held out (a champion trained on the older corpus never
saw them either), and the order of files does not matter. The held-out part stops growing
at ``max_held_out`` documents; later documents of that bucket are left out of both parts
(trained on, they would make the training set depend on the order of the files).

Both parts are written as text corpora (one sentence per line, a blank line between
documents) that the pre-training and evaluation read as any corpus.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path

from ptm_core.atomic import atomic_write_text
from ptm_core.data.corpus import CorpusPath, Document, iter_text_corpus

#: One document in this many is held out.
HELD_OUT_EVERY = 20
#: The held-out part stops at this many documents (an evaluation pass stays minutes long).
MAX_HELD_OUT_DOCUMENTS = 5_000
#: Written beside the two parts: what was split, how, and the counts.
SPLIT_RECORD = "held_out.json"
#: The folder of a run (beside its final/) that holds the split the run trained on.
RUN_SPLIT_DIR = "data_split"
TRAIN_FILE = "train.txt"
HELD_OUT_FILE = "held_out.txt"


@dataclass(frozen=True)
class HeldOutSplit:
    """The two parts of a split corpus.

    Args:
        source: the corpus that was split, as given.
        train: the text corpus of the training documents.
        held_out: the text corpus of the held-out documents.
        train_documents: documents in ``train``.
        held_out_documents: documents in ``held_out``.
        every: one document in ``every`` was held out (by its text's hash).
        left_out: documents of the held-out bucket past ``max_held_out``, in neither part.
    """

    source: str
    train: str
    held_out: str
    train_documents: int
    held_out_documents: int
    every: int
    left_out: int = 0

    def describe(self) -> str:
        """One line for logs and reports."""
        return (
            f"{self.held_out_documents:,} documents of {self.source} held out (1 in "
            f"{self.every} by text hash: {self.held_out}); {self.train_documents:,} trained on"
            + (f"; {self.left_out:,} more of the held-out bucket left out" if self.left_out else "")
        )


def is_held_out(document: Document, every: int = HELD_OUT_EVERY) -> bool:
    """Whether ``document`` falls in the held-out bucket (its text alone decides)."""
    text = "\n".join(document.sentences).encode("utf-8")
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big") % every == 0


def split_held_out(
    corpus: CorpusPath | Sequence[CorpusPath],
    output_dir: str | Path,
    *,
    every: int = HELD_OUT_EVERY,
    max_held_out: int = MAX_HELD_OUT_DOCUMENTS,
) -> HeldOutSplit:
    """Split ``corpus`` into ``output_dir/train.txt`` and ``output_dir/held_out.txt``.

    The corpus is streamed (nothing is held per document); both files and
    ``held_out.json`` are written atomically.

    Raises:
        ValueError: ``every`` below 2, or a corpus too small to hold out a document and
            keep one to train on (the message gives the counts and the fix).
        CorpusError: a bad line of the corpus (``file:line``).
    """
    if every < 2:
        raise ValueError(f"every={every}: hold out one document in at least 2")
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    counts = {TRAIN_FILE: 0, HELD_OUT_FILE: 0}
    skipped = 0
    temporary = {name: out / f".{name}.{os.getpid()}.tmp" for name in counts}
    try:
        with ExitStack() as stack:
            files = {
                name: stack.enter_context(path.open("w", encoding="utf-8"))
                for name, path in temporary.items()
            }
            for document in iter_text_corpus(corpus):
                held = is_held_out(document, every)
                if held and counts[HELD_OUT_FILE] >= max_held_out:
                    skipped += 1
                    continue
                name = HELD_OUT_FILE if held else TRAIN_FILE
                files[name].write(("\n" if counts[name] else "") + "\n".join(document.sentences))
                files[name].write("\n")
                counts[name] += 1
        held_count, train_count = counts[HELD_OUT_FILE], counts[TRAIN_FILE]
        if not held_count or not train_count:
            raise ValueError(
                f"{corpus}: {train_count + held_count} documents, {held_count} of them in the "
                f"held-out bucket (1 in {every}); too few to hold any out and train on the "
                "rest. Give more documents (a blank line between documents), or give "
                "held-out data yourself (--eval-corpus)"
            )
        for name, path in temporary.items():
            os.replace(path, out / name)
    finally:
        for path in temporary.values():
            path.unlink(missing_ok=True)
    split = HeldOutSplit(
        source=str(corpus),
        train=str(out / TRAIN_FILE),
        held_out=str(out / HELD_OUT_FILE),
        train_documents=train_count,
        held_out_documents=held_count,
        every=every,
        left_out=skipped,
    )
    atomic_write_text(out / SPLIT_RECORD, json.dumps(asdict(split), indent=2) + "\n")
    return split


def recorded_split(run_dir: str | Path) -> HeldOutSplit | None:
    """The split a run recorded in ``run_dir/data_split/held_out.json`` (``None``: none)."""
    path = Path(run_dir) / RUN_SPLIT_DIR / SPLIT_RECORD
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        split = HeldOutSplit(**record)
    except (ValueError, TypeError) as exc:
        raise ValueError(
            f"{path}: not a held-out record ptm wrote ({exc}); remove it, or pass --corpus"
        ) from None
    if not Path(split.held_out).is_file():
        raise FileNotFoundError(
            f"{split.held_out}: the held-out split recorded in {path} is gone; pass --corpus"
        )
    return split


__all__ = [
    "HELD_OUT_EVERY",
    "HELD_OUT_FILE",
    "MAX_HELD_OUT_DOCUMENTS",
    "RUN_SPLIT_DIR",
    "SPLIT_RECORD",
    "TRAIN_FILE",
    "HeldOutSplit",
    "is_held_out",
    "recorded_split",
    "split_held_out",
]
