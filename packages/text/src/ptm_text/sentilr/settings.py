"""The ``sentilr`` family's typed settings (torch-free: the runner reads them to build the
config schema)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ptm_core.families.core_settings import TaskFinetuneSettings


@dataclass
class SentiLRData:
    """The ``data`` block: a labelled sentiment corpus and its batching
    (``configs/data/sentiment_reviews.yaml``).

    Attributes:
        corpus: ``.jsonl`` (one ``{text_field: ..., label_field: ...}`` per line) or
            ``.tsv``/``.csv`` with a header; a path or a list of paths.
        text_field: the text field (column).
        label_field: the label field (column).
        labels: the label names in id order (``null``: the corpus's sorted labels); the
            pre-training label table has one row per label plus "unknown".
        tokenizer: a ``vocab.txt`` or tokenizer folder; ``null`` trains a WordPiece
            vocabulary of ``vocab_size`` on the corpus (an ``init_from`` folder's own wins).
        vocab_size: size of a trained vocabulary.
        lowercase: lower-case text.
        max_length: pieces per row, specials included (longer texts are cut).
        batch_size: rows per micro-batch.
        num_workers: DataLoader worker processes that build batches.
    """

    corpus: Any = None
    text_field: str = "text"
    label_field: str = "label"
    labels: list[str] | None = None
    tokenizer: str | None = None
    vocab_size: int = 8000
    lowercase: bool = True
    max_length: int = 128
    batch_size: int = 32
    num_workers: int = 0


@dataclass
class SentiLROptions:
    """The ``sentilr`` block: where the word-level knowledge comes from
    (:mod:`ptm_text.sentilr.knowledge`).

    Attributes:
        pos_pipeline: an installed spaCy pipeline that tags POS (``en_core_web_sm``);
            ``null``: WordNet 3.0's index files in ``wordnet_dir``, else a rule set.
        wordnet_dir: WordNet's ``index.*`` folder (Debian ``wordnet-base``).
        polarity_threshold: VADER ratings above it are positive, below its negative
            neutral between (0: any rated word is polar).
    """

    pos_pipeline: str | None = None
    wordnet_dir: str | None = "/usr/share/wordnet"
    polarity_threshold: float = 0.0


@dataclass
class SentiLRSettings(TaskFinetuneSettings):
    """SentiLARE's config blocks: ``data`` and ``sentilr`` for pre-training; ``task`` and
    ``finetune`` for the fine-tune (which reads the knowledge settings saved with the
    model, so its POS and polarity match pre-training's)."""

    data: SentiLRData = field(default_factory=SentiLRData)
    sentilr: SentiLROptions = field(default_factory=SentiLROptions)
