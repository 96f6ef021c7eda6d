"""Sequence-to-sequence pre-training (BART, T5, MASS) on a text corpus.

The text families (:mod:`ptm_core.text_pretraining`) build single-encoder models; this one reads
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
from ptm_core.families.core_settings import Seq2SeqSettings
from ptm_core.families.runner import PretrainingPlan, PretrainRun
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.objectives.seq2seq_lm import Seq2SeqObjective, Source
from ptm_core.pretraining import PretrainResult, open_training_corpus
from ptm_core.seeding import derive_seed, generator_for
from ptm_core.tokenization import VocabInfo

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


def plan_seq2seq_pretraining(run: PretrainRun) -> PretrainingPlan:
    """The ``seq2seq`` family's plan: an encoder-decoder and one sequence-to-sequence
    objective (BART, T5 or MASS) on a text corpus.

    The corpus is read from a prepared, memory-mapped dataset, as the text families read
    it; sources (chunks of whole sentences) are planned once and built per batch.
    ``run.settings`` is a :class:`Seq2SeqSettings`; ``run.model`` a factory of
    :class:`EncoderDecoderModel` (see :func:`build_model`); ``run.objectives`` holds one
    factory, called with ``vocab=`` and ``max_length=``. ``final/`` holds the whole
    encoder-decoder (``EncoderDecoderModel.from_pretrained``) and ``tokenizer/``.
    """
    settings: Seq2SeqSettings = run.settings
    data = settings.data
    if run.model is None:
        raise ValueError("no model: give an encoder-decoder preset (model=bart_tiny)")
    if run.init_from is not None:
        raise ValueError(
            f"init_from={run.init_from}: sequence-to-sequence pre-training starts from the "
            "model preset; fine-tune a seq2seq final/ with `ptm finetune` instead"
        )
    name, make_objective = _one_objective(run)
    for key, value in (("pack", data.pack), ("num_workers", data.num_workers)):
        if value:
            logger.warning("data.%s=%s does not apply to seq2seq pre-training", key, value)
    output_dir = run.output_dir
    output_dir.mkdir(parents=True, exist_ok=True)
    store, tok = open_training_corpus(
        None if data.prepared else data.corpus,
        data.prepared,
        tokenizer=None if data.prepared else data.tokenizer,
        vocab_size=data.vocab_size,
        lowercase=data.lowercase,
        cache_dir=data.cache_dir,
        run_dir=output_dir,
    )
    vocab = tok.vocab_info
    torch.manual_seed(derive_seed(run.seed, "init"))
    noise = make_objective(vocab=vocab, max_length=data.max_length)
    network = build_model(run.model, vocab, noise)
    if data.max_length > network.config.max_positions:
        raise ValueError(
            f"data max_length={data.max_length} exceeds the model's max_positions="
            f"{network.config.max_positions}; lower max_length or raise max_positions"
        )
    max_tokens = data.max_length - 2
    plan = cached_plan(
        store,
        "seq2seq-chunks",
        {"max_tokens": max_tokens},
        lambda: iter_sentence_chunks(store, max_tokens),
    )
    sources = SentenceChunks(store, plan, max_tokens)
    batches = Seq2SeqBatches(sources, noise, data.batch_size, run.seed)
    logger.info("%d documents -> %d sources", store.num_documents, len(sources))

    def save_final(final: Path) -> None:
        network.save_pretrained(final)
        tok.save(final / "tokenizer")

    return PretrainingPlan(
        network=network,
        objectives=ObjectiveMix({name: noise}, dict(run.weights)),
        data=batches,
        save_final=save_final,
        finish=lambda trained: PretrainResult(
            output_dir=output_dir,
            encoder_dir=trained.final_dir,
            tokenizer_dir=output_dir / "tokenizer",
            metrics_path=trained.result.metrics_path,
            last_checkpoint=trained.result.last_checkpoint,
            final_metrics=trained.final_metrics,
            num_examples=len(sources),
        ),
        callbacks=run.callbacks,
    )


def _one_objective(run: PretrainRun) -> tuple[str, ObjectiveFactory]:
    if len(run.objectives) != 1:
        raise ValueError(
            f"seq2seq pre-training trains one objective; objective.objectives has "
            f"{list(run.objectives)}. Keep one (bart, t5 or mass)"
        )
    return next(iter(run.objectives.items()))
