"""Bengio et al.'s neural probabilistic language model, trained by the core Trainer.

Bengio, Ducharme, Vincent and Jauvin, 2003, "A Neural Probabilistic Language Model" (JMLR):
the ``n - 1`` previous words are looked up in a shared table ``C`` and concatenated into
``x``; then ``y = b + W x + U tanh(d + H x)`` and ``P(w_t | context) = softmax(y)``. ``W x``
are the optional direct connections from the embeddings to the output. After training
the rows of ``C`` are the word vectors.

Data: the corpus is written once as a memory-mapped array of vocabulary ids
(:func:`~ptm_classic.static.corpus.encode_corpus`); example ``i`` is word ``i`` of the corpus
with its ``n - 1`` predecessors in the same sentence (``<s>`` before the start), cut
lazily per batch, so nothing holds the corpus in memory.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ptm_classic.static.corpus import EncodedCorpus, Sentences, build_vocabulary, encode_corpus
from ptm_classic.static.vectors import VectorTable
from ptm_core.data.batches import EpochBatches
from ptm_core.data.shuffle import EpochOrder
from ptm_core.training.config import TrainerConfig
from ptm_core.training.run import TrainingRun, train_and_save

logger = logging.getLogger(__name__)

UNK, BOS = "<unk>", "<s>"
SPECIALS = (UNK, BOS)
UNK_ID, BOS_ID = 0, 1


@dataclass
class NNLMOutput:
    """What :class:`NNLM` returns for a batch.

    Attributes:
        logits: ``(B, V)`` unnormalised ``y``.
        loss: mean cross-entropy of the targets (0 when the batch has none).
        metrics: ``perplexity`` (``exp(loss)``).
    """

    logits: torch.Tensor
    loss: torch.Tensor
    metrics: dict[str, torch.Tensor] = field(default_factory=dict)


class NNLM(nn.Module):
    """The neural probabilistic language model (Bengio et al., 2003).

    ``y = b + W x + U tanh(d + H x)`` with ``x = [C(w_{t-n+1}); ...; C(w_{t-1})]``.

    Args:
        vocab_size: ``|V|``, the rows of ``C`` and the outputs.
        context_size: ``n - 1`` previous words.
        embedding_dim: ``m``, the word-vector size.
        hidden_size: ``h``, the tanh layer's size.
        direct_connections: add ``W x`` (the paper's optional embedding-to-output weights).
        dropout: dropout on ``x`` and on the hidden layer (0 in the paper).

    Shapes:
        ``logits(context)``: ``(B, n - 1)`` word ids -> ``(B, |V|)``.
        ``forward(batch)``: ``batch["input_ids"]`` ``(B, n - 1)``, ``batch["labels"]`` ``(B,)``
        -> :class:`NNLMOutput`.
    """

    def __init__(
        self,
        vocab_size: int,
        context_size: int = 4,
        embedding_dim: int = 60,
        hidden_size: int = 50,
        direct_connections: bool = True,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if context_size < 1:
            raise ValueError(f"model.context_size must be >= 1, got {context_size}")
        self.context_size = context_size
        self.embeddings = nn.Embedding(vocab_size, embedding_dim)  # C
        self.hidden = nn.Linear(context_size * embedding_dim, hidden_size)  # H, d
        self.output = nn.Linear(hidden_size, vocab_size)  # U, b
        self.direct = (
            nn.Linear(context_size * embedding_dim, vocab_size, bias=False)  # W
            if direct_connections
            else None
        )
        self.dropout = nn.Dropout(dropout)

    def config(self) -> dict[str, Any]:
        """The constructor's arguments (for ``table.json``)."""
        return {
            "vocab_size": self.embeddings.num_embeddings,
            "context_size": self.context_size,
            "embedding_dim": self.embeddings.embedding_dim,
            "hidden_size": self.hidden.out_features,
            "direct_connections": self.direct is not None,
            "dropout": self.dropout.p,
        }

    def logits(self, context: torch.Tensor) -> torch.Tensor:
        if context.shape[-1] != self.context_size:
            raise ValueError(
                f"context of {context.shape[-1]} words, the model reads {self.context_size}"
            )
        x = self.dropout(self.embeddings(context).flatten(1))  # (B, (n-1) m)
        y = self.output(self.dropout(torch.tanh(self.hidden(x))))  # (B, V)
        if self.direct is not None:
            y = y + self.direct(x)
        return y

    def forward(self, batch: Mapping[str, torch.Tensor]) -> NNLMOutput:
        logits = self.logits(batch["input_ids"])
        loss = F.cross_entropy(logits.float(), batch["labels"])
        return NNLMOutput(logits, loss, {"perplexity": loss.detach().exp()})


class NGramBatches(EpochBatches):
    """Deterministic, resumable n-gram batches cut from an :class:`EncodedCorpus`.

    Example ``i`` predicts word ``i`` of the corpus from its ``context_size`` predecessors
    within its sentence (``<s>`` fills the positions before the sentence start).

    Args:
        corpus: the encoded corpus (ids of the NNLM vocabulary).
        context_size: ``n - 1``.
        batch_size: examples per batch.
        seed: the epoch orders' seed.
    """

    empty_message = "the corpus holds no words to predict; give a larger corpus"

    def __init__(
        self, corpus: EncodedCorpus, context_size: int, batch_size: int, *, seed: int = 0
    ) -> None:
        super().__init__(range(corpus.num_words), batch_size, seed=seed)
        self.corpus = corpus
        self.context_size = context_size

    def batch(
        self, epoch: int, index: int, order: EpochOrder | None = None
    ) -> dict[str, torch.Tensor]:
        positions = np.asarray(self.indices(epoch, index, order), dtype=np.int64)  # (B,)
        offsets = self.corpus.offsets
        starts = np.asarray(offsets)[np.searchsorted(offsets, positions, side="right") - 1]
        back = np.arange(-self.context_size, 0, dtype=np.int64)
        where = positions[:, None] + back[None, :]  # (B, n-1)
        inside = where >= starts[:, None]
        words = np.asarray(self.corpus.words[np.clip(where, 0, None)], dtype=np.int64)
        context = np.where(inside, words, BOS_ID)
        targets = np.asarray(self.corpus.words[positions], dtype=np.int64)
        return {"input_ids": torch.from_numpy(context), "labels": torch.from_numpy(targets)}


@dataclass
class NNLMRun:
    """What :func:`train_nnlm` did.

    Attributes:
        table: the exported word vectors (rows of ``C`` for the vocabulary words).
        model: the trained model.
        training: the trainer's run (result, ``final/`` directory, last metrics).
    """

    table: VectorTable
    model: NNLM
    training: TrainingRun


def train_nnlm(
    sentences: Sentences,
    trainer: TrainerConfig,
    *,
    context_size: int = 4,
    embedding_dim: int = 60,
    hidden_size: int = 50,
    direct_connections: bool = True,
    dropout: float = 0.0,
    min_count: int = 1,
    max_vocab_size: int | None = None,
    batch_size: int = 64,
    seed: int = 0,
    corpus_dir: str | os.PathLike[str] | None = None,
    final_dir: str | os.PathLike[str] | None = None,
) -> NNLMRun:
    """Build the vocabulary, encode the corpus, train an NNLM and export its vectors.

    Words seen fewer than ``min_count`` times share ``<unk>`` (the paper merges words seen
    3 times or fewer). The vector table holds the vocabulary words, not ``<unk>``/``<s>``.

    Args:
        sentences: a restartable stream of word lists.
        trainer: trainer settings (AdamW, schedule, steps, output directory, resume).
        context_size: ``n - 1``.
        embedding_dim: ``m``.
        hidden_size: ``h``.
        direct_connections: include ``W x``.
        dropout: dropout on ``x`` and the hidden layer.
        min_count: words seen fewer times become ``<unk>``.
        max_vocab_size: keep at most this many words.
        batch_size: n-grams per batch.
        seed: the batch order's seed (the trainer seeds the weights).
        corpus_dir: where the encoded corpus goes (default ``<output_dir>/nnlm_corpus``).
        final_dir: where the table goes (default ``<output_dir>/final``).

    Returns:
        :class:`NNLMRun`; ``final/`` holds the :class:`VectorTable` (method ``nnlm``).
    """
    vocabulary = build_vocabulary(sentences, min_count=min_count, max_size=max_vocab_size)
    words = [w for w in vocabulary.words if w not in SPECIALS]
    ids = {word: index for index, word in enumerate(words, start=len(SPECIALS))}
    output_dir = Path(trainer.output_dir)
    corpus = encode_corpus(
        sentences,
        ids,
        UNK_ID,
        Path(corpus_dir) if corpus_dir is not None else output_dir / "nnlm_corpus",
    )
    logger.info(
        "NNLM data: %d sentences, %d words, vocabulary %d (+%d specials)",
        corpus.num_sentences,
        corpus.num_words,
        len(words),
        len(SPECIALS),
    )
    torch.manual_seed(trainer.seed)
    model = NNLM(
        len(words) + len(SPECIALS),
        context_size,
        embedding_dim,
        hidden_size,
        direct_connections=direct_connections,
        dropout=dropout,
    )
    data = NGramBatches(corpus, context_size, batch_size, seed=seed)
    holder: dict[str, VectorTable] = {}

    def save_final(target: Path) -> None:
        table = export_table(model, words, metadata={"model": model.config()})
        holder["table"] = table
        table.save(target)

    run = train_and_save(
        model,
        data,
        trainer,
        save_final=save_final,
        final_dir=Path(final_dir) if final_dir is not None else None,
    )
    table = holder.get("table") or export_table(model, words, metadata={"model": model.config()})
    return NNLMRun(table, model, run)


def export_table(
    model: NNLM, words: list[str], metadata: Mapping[str, Any] | None = None
) -> VectorTable:
    """The rows of ``C`` for ``words`` (ids ``len(SPECIALS)..``) as a vector table."""
    weight = model.embeddings.weight.detach().cpu()[len(SPECIALS) : len(SPECIALS) + len(words)]
    return VectorTable(list(words), weight, "nnlm", dict(metadata or {}))


__all__ = ["NNLM", "NGramBatches", "NNLMOutput", "NNLMRun", "export_table", "train_nnlm"]
