"""Sequence-to-sequence pre-training (BART, T5, MASS) on a text corpus.

The text recipe (:mod:`ptm_core.pretraining`) builds single-encoder models; this one reads
the same corpus and tokenizer, cuts documents into chunks of whole sentences, and trains an
:class:`~ptm_core.encoders.encoder_decoder.EncoderDecoderModel` on the examples a
:class:`~ptm_core.objectives.seq2seq_lm.Seq2SeqObjective` draws from them.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ptm_core.data.layouts import LazyRows, PlanBuffer, cached_plan, concat_plan
from ptm_core.data.shuffle import EpochOrder
from ptm_core.data.token_store import InMemoryTokenStore, TokenStore
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.models.seq2seq import Seq2SeqPretrainingModel
from ptm_core.objectives.seq2seq_lm import Seq2SeqObjective, Source
from ptm_core.pretraining import PretrainResult, open_training_corpus
from ptm_core.seeding import derive_seed, generator_for
from ptm_core.tokenization import VocabInfo
from ptm_core.training import TrainerConfig
from ptm_core.training.run import train_and_save

logger = logging.getLogger(__name__)


def plan_sentence_chunks(store: TokenStore, max_tokens: int) -> np.ndarray:
    """Runs of consecutive whole sentences of each document, of at most ``max_tokens``.

    A sentence longer than ``max_tokens`` is truncated (when built) and forms its own chunk.

    Returns:
        ``int64 (N, 3)``: ``(document, first sentence, sentences)`` per chunk.
    """
    return concat_plan(iter_sentence_chunks(store, max_tokens), 3)


def iter_sentence_chunks(store: TokenStore, max_tokens: int) -> Iterator[np.ndarray]:
    """:func:`plan_sentence_chunks` in blocks of rows (for :func:`cached_plan`)."""
    rows = PlanBuffer(3)
    for document in range(store.num_documents):
        lengths = np.minimum(np.diff(store.sentence_offsets(document)), max_tokens).tolist()
        first, size = 0, 0
        for index, length in enumerate(lengths):
            if index > first and size + length > max_tokens:
                if (full := rows.add(document, first, index - first)) is not None:
                    yield full
                first, size = index, 0
            size += length
        if (full := rows.add(document, first, len(lengths) - first)) is not None:
            yield full
    yield rows.flush()


class SentenceChunks(LazyRows):
    """The chunks of :func:`plan_sentence_chunks`, built (sentences of ids) when indexed."""

    def __init__(self, store: TokenStore, plan: np.ndarray, max_tokens: int) -> None:
        self.store = store
        self.plan = plan
        self.max_tokens = max_tokens

    def __len__(self) -> int:
        return len(self.plan)

    def _build(self, index: int) -> Source:
        document, first, count = (int(v) for v in self.plan[index])
        bounds = self.store.sentence_offsets(document)[first : first + count + 1].tolist()
        return [
            self.store.tokens(start, min(stop, start + self.max_tokens)).tolist()
            for start, stop in itertools.pairwise(bounds)
        ]


def chunk_documents(
    documents: Sequence[Sequence[Sequence[int]]], max_tokens: int
) -> list[list[list[int]]]:
    """Every chunk of in-memory documents (see :func:`plan_sentence_chunks`)."""
    store = InMemoryTokenStore(documents)
    return list(SentenceChunks(store, plan_sentence_chunks(store, max_tokens), max_tokens))


class Seq2SeqBatches:
    """Deterministic, resumable batches of noised sources (a trainer ``BatchSource``).

    Batch ``i`` of epoch ``e`` holds the sources the ``(seed, e)`` order puts there, noised
    with a generator seeded by ``(seed, e, i)``: it depends only on its position.

    Args:
        sources: the document chunks.
        objective: draws the examples.
        batch_size: sources per batch.
        seed: base seed.
    """

    def __init__(
        self, sources: Sequence[Source], objective: Seq2SeqObjective, batch_size: int, seed: int = 0
    ) -> None:
        if not sources:
            raise ValueError("no training sources: the corpus produced no sentences")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.sources = sources  # indexed lazily, never copied
        self.objective = objective
        self.batch_size = batch_size
        self.seed = seed

    @property
    def batches_per_epoch(self) -> int:
        return -(-len(self.sources) // self.batch_size)

    def batch(self, epoch: int, index: int) -> dict[str, torch.Tensor]:
        order = EpochOrder(len(self.sources), self.seed, epoch)
        start = index * self.batch_size
        chosen = order.positions(np.arange(start, min(start + self.batch_size, len(order))))
        chosen = chosen.tolist()
        generator = generator_for(self.seed, epoch, index, "noise")
        return self.objective.collate([self.sources[i] for i in chosen], generator)

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[dict[str, torch.Tensor]]:
        for index in range(start, self.batches_per_epoch):
            yield self.batch(epoch, index)

    def __len__(self) -> int:
        return self.batches_per_epoch


ModelFactory = Callable[..., EncoderDecoderModel]
ObjectiveFactory = Callable[..., Seq2SeqObjective]


def build_model(factory: ModelFactory, vocab: VocabInfo, objective: Seq2SeqObjective) -> Any:
    """Call a model factory with the tokenizer's size (+ the objective's extra ids) and the
    special ids: ``[PAD]`` pads, ``[CLS]`` starts, ``[SEP]`` ends."""
    return factory(
        vocab_size=vocab.vocab_size + objective.extra_tokens,
        pad_token_id=vocab.pad_id,
        bos_token_id=vocab.cls_id,
        eos_token_id=vocab.sep_id,
        decoder_start_token_id=vocab.cls_id,
    )


def pretrain_seq2seq(
    corpus: str | Path | Sequence[str | Path] | None = None,
    *,
    model: ModelFactory,
    objective: ObjectiveFactory,
    trainer: TrainerConfig,
    prepared: str | Path | None = None,
    tokenizer: str | Path | None = None,
    vocab_size: int = 8000,
    lowercase: bool = True,
    max_length: int = 128,
    batch_size: int = 16,
    seed: int = 0,
    callbacks: Sequence[object] = (),
    cache_dir: str | Path | None = None,
) -> PretrainResult:
    """Pre-train an encoder-decoder with one sequence-to-sequence objective.

    The corpus is read from a prepared, memory-mapped dataset, as :func:`~ptm_core.
    pretraining.pretrain` reads it; sources (chunks of whole sentences) are planned once
    and built per batch.

    Args:
        corpus: text-corpus file(s) or directory (prepared into a cache first); or
        prepared: a directory written by ``ptm prepare``.
        model: factory of :class:`EncoderDecoderModel` (see :func:`build_model`).
        objective: factory called with ``vocab=`` and ``max_length=``.
        trainer: trainer settings (``output_dir`` is the run directory).
        tokenizer: a ``vocab.txt`` or tokenizer directory; ``None`` trains one.
        vocab_size: size of a trained vocabulary.
        lowercase: lower-case text.
        max_length: longest encoder input / target (special tokens included).
        batch_size: sources per batch.
        seed: seed of initialisation, noise and order.
        callbacks: trainer callbacks.
        cache_dir: where raw corpora are prepared.

    Returns:
        :class:`~ptm_core.pretraining.PretrainResult`; ``encoder_dir`` is ``final/`` holding
        the whole encoder-decoder (``EncoderDecoderModel.from_pretrained``) and the tokenizer.
    """
    output_dir = Path(trainer.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    store, tok = open_training_corpus(
        corpus,
        prepared,
        tokenizer=tokenizer,
        vocab_size=vocab_size,
        lowercase=lowercase,
        cache_dir=cache_dir,
        run_dir=output_dir,
    )
    vocab = tok.vocab_info
    torch.manual_seed(derive_seed(seed, "init"))
    noise = objective(vocab=vocab, max_length=max_length)
    network = build_model(model, vocab, noise)
    if max_length > network.config.max_positions:
        raise ValueError(
            f"data max_length={max_length} exceeds the model's max_positions="
            f"{network.config.max_positions}; lower max_length or raise max_positions"
        )
    max_tokens = max_length - 2
    plan = cached_plan(
        store,
        "seq2seq-chunks",
        {"max_tokens": max_tokens},
        lambda: iter_sentence_chunks(store, max_tokens),
    )
    sources = SentenceChunks(store, plan, max_tokens)
    batches = Seq2SeqBatches(sources, noise, batch_size, seed)
    logger.info("%d documents -> %d sources", store.num_documents, len(sources))

    def save_final(final: Path) -> None:
        network.save_pretrained(final)
        tok.save(final / "tokenizer")

    run = train_and_save(
        Seq2SeqPretrainingModel(network, noise),
        batches,
        trainer,
        callbacks=callbacks,
        save_final=save_final,
    )
    return PretrainResult(
        output_dir=output_dir,
        encoder_dir=run.final_dir,
        tokenizer_dir=output_dir / "tokenizer",
        metrics_path=run.result.metrics_path,
        last_checkpoint=run.result.last_checkpoint,
        final_metrics=run.final_metrics,
        num_examples=len(sources),
    )
