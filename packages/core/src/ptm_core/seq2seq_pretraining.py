"""Sequence-to-sequence pre-training (BART, T5, MASS) on a text corpus.

The text recipe (:mod:`ptm_core.pretraining`) builds single-encoder models; this one reads
the same corpus and tokenizer, cuts documents into chunks of whole sentences, and trains an
:class:`~ptm_core.encoders.encoder_decoder.EncoderDecoderModel` on the examples a
:class:`~ptm_core.objectives.seq2seq_lm.Seq2SeqObjective` draws from them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from ptm_core.data.corpus import read_text_corpus
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.models.seq2seq import Seq2SeqPretrainingModel
from ptm_core.objectives.seq2seq_lm import Seq2SeqObjective, Source
from ptm_core.pretraining import PretrainResult, prepare_tokenizer, tokenize_documents
from ptm_core.seeding import derive_seed, generator_for
from ptm_core.tokenization import VocabInfo
from ptm_core.training import TrainerConfig
from ptm_core.training.run import train_and_save

logger = logging.getLogger(__name__)


def chunk_documents(
    documents: Sequence[Sequence[Sequence[int]]], max_tokens: int
) -> list[list[list[int]]]:
    """Cut each document into runs of consecutive whole sentences of <= ``max_tokens``.

    A sentence longer than ``max_tokens`` is truncated and forms its own chunk.
    """
    chunks: list[list[list[int]]] = []
    for document in documents:
        current: list[list[int]] = []
        size = 0
        for sentence in document:
            sentence = list(sentence)[:max_tokens]
            if not sentence:
                continue
            if current and size + len(sentence) > max_tokens:
                chunks.append(current)
                current, size = [], 0
            current.append(sentence)
            size += len(sentence)
        if current:
            chunks.append(current)
    return chunks


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
        self.sources = list(sources)
        self.objective = objective
        self.batch_size = batch_size
        self.seed = seed

    @property
    def batches_per_epoch(self) -> int:
        return -(-len(self.sources) // self.batch_size)

    def batch(self, epoch: int, index: int) -> dict[str, torch.Tensor]:
        order = torch.randperm(len(self.sources), generator=generator_for(self.seed, epoch))
        chosen = order[index * self.batch_size : (index + 1) * self.batch_size].tolist()
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
    corpus: str | Path | Sequence[str | Path],
    *,
    model: ModelFactory,
    objective: ObjectiveFactory,
    trainer: TrainerConfig,
    tokenizer: str | Path | None = None,
    vocab_size: int = 8000,
    lowercase: bool = True,
    max_length: int = 128,
    batch_size: int = 16,
    seed: int = 0,
    callbacks: Sequence[object] = (),
) -> PretrainResult:
    """Pre-train an encoder-decoder with one sequence-to-sequence objective.

    Args:
        corpus: text-corpus file(s) or directory.
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

    Returns:
        :class:`~ptm_core.pretraining.PretrainResult`; ``encoder_dir`` is ``final/`` holding
        the whole encoder-decoder (``EncoderDecoderModel.from_pretrained``) and the tokenizer.
    """
    output_dir = Path(trainer.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    documents = read_text_corpus(corpus)
    tok = prepare_tokenizer(
        documents, output_dir, tokenizer=tokenizer, vocab_size=vocab_size, lowercase=lowercase
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
    sources = chunk_documents(tokenize_documents(documents, tok), max_length - 2)
    batches = Seq2SeqBatches(sources, noise, batch_size, seed)
    logger.info("%d documents -> %d sources", len(documents), len(sources))

    def save_final(final: Path) -> None:
        network.save_pretrained(final)
        tok.save(final / "tokenizer")

    run = train_and_save(
        Seq2SeqPretrainingModel(network, noise.name),
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
