"""AWD-LSTM language-model pre-training (ULMFiT stage 1) on the core Trainer.

The corpus comes through the project's data pipeline: raw text files are prepared once
(``ptm prepare``, memory-mapped shards, the project's WordPiece tokenizer) and read as one
contiguous stream (:class:`~ptm_classic.recurrent.bptt.LMTokenStream`); the last
``valid_fraction`` of the stream is held out to report perplexity.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from ptm_classic.recurrent.awd_lstm import (
    AWDLSTMConfig,
    AWDLSTMLanguageModel,
    AWDLSTMPretrainingModel,
    count_parameters,
    evaluate_perplexity,
)
from ptm_classic.recurrent.bptt import BPTTBatches, LMTokenStream
from ptm_core.pretraining import RUN_TOKENIZER, PretrainResult, open_training_corpus
from ptm_core.seeding import derive_seed
from ptm_core.training import TrainerConfig
from ptm_core.training.run import train_and_save

logger = logging.getLogger(__name__)


def pretrain_awd_lstm(
    corpus: str | Path | Sequence[str | Path] | None = None,
    *,
    model: Callable[..., AWDLSTMConfig] | AWDLSTMConfig,
    trainer: TrainerConfig,
    prepared: str | Path | None = None,
    tokenizer: str | Path | None = None,
    vocab_size: int = 8000,
    lowercase: bool = True,
    batch_size: int = 16,
    bptt: int = 70,
    variable_length: bool = True,
    valid_fraction: float = 0.05,
    seed: int = 0,
    cache_dir: str | Path | None = None,
) -> PretrainResult:
    """Pre-train an AWD-LSTM language model with truncated BPTT.

    Args:
        corpus: text-corpus file(s) or directory (``data_specs/text_corpus``); or
        prepared: a directory written by ``ptm prepare`` (give one of the two).
        model: an :class:`AWDLSTMConfig`, or a factory of one called with ``vocab_size=``
            of the tokenizer (``configs/model/awd_lstm_tiny.yaml``: ``_partial_: true``).
        trainer: trainer settings; ``devices`` must be 1 (the carried state needs each
            row's windows in order on one process).
        tokenizer: a ``vocab.txt`` or tokenizer directory (``None``: WordPiece trained
            on the corpus).
        vocab_size: size of a trained vocabulary.
        lowercase: lower-case text.
        batch_size: BPTT rows.
        bptt: window length.
        variable_length: AWD-LSTM's random window lengths.
        valid_fraction: share of the stream's end held out for the perplexity report.
        seed: seed of initialisation and window lengths.
        cache_dir: where raw corpora are prepared.

    Returns:
        :class:`~ptm_core.pretraining.PretrainResult`; ``final_metrics`` adds
        ``perplexity`` (training, ``exp(lm_loss)`` of the last log line),
        ``valid_perplexity``, ``valid_loss`` and ``parameters``.
    """
    if trainer.devices != 1:
        raise ValueError(
            f"trainer.devices={trainer.devices}: AWD-LSTM pre-training carries each row's "
            "hidden state from one window to the next, which DDP's batch sharding breaks; "
            "set trainer.devices=1"
        )
    if not 0.0 <= valid_fraction < 1.0:
        raise ValueError(f"data.valid_fraction must be in [0, 1), got {valid_fraction}")
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
    stream = LMTokenStream(store, tok.vocab_info.sep_id)
    split = len(stream) - int(len(stream) * valid_fraction)
    train = BPTTBatches(
        stream, batch_size, bptt, stop=split, variable_length=variable_length, seed=seed
    )
    valid = (
        BPTTBatches(stream, min(batch_size, max(1, (len(stream) - split) // 2)), bptt, start=split)
        if split < len(stream)
        else None
    )
    torch.manual_seed(derive_seed(seed, "init"))
    config = model if isinstance(model, AWDLSTMConfig) else model(vocab_size=tok.vocab_size)
    if config.vocab_size != tok.vocab_size:
        raise ValueError(
            f"model.vocab_size={config.vocab_size} but the tokenizer has {tok.vocab_size} ids; "
            "leave vocab_size out of the model config (it is taken from the tokenizer)"
        )
    lm = AWDLSTMLanguageModel(config)
    logger.info(
        "AWD-LSTM: %d parameters; %d stream tokens, %d train windows of %d x %d per epoch",
        count_parameters(lm),
        len(stream),
        train.batches_per_epoch,
        batch_size,
        bptt,
    )
    run = train_and_save(
        AWDLSTMPretrainingModel(lm, batch_size),
        train,
        trainer,
        save_final=lambda final: lm.save_pretrained(final, extra_writers=[tok.save]),
    )
    metrics = dict(run.final_metrics)
    if "lm_loss" in metrics:
        metrics["perplexity"] = float(torch.tensor(metrics["lm_loss"]).exp())
    if valid is not None:
        device = next(lm.parameters()).device
        scores = evaluate_perplexity(lm, valid, device=device)
        metrics["valid_loss"] = scores["loss"]
        metrics["valid_perplexity"] = scores["perplexity"]
    metrics["parameters"] = count_parameters(lm)
    logger.info(
        "AWD-LSTM: train perplexity %.2f, valid perplexity %.2f",
        metrics.get("perplexity", float("nan")),
        metrics.get("valid_perplexity", float("nan")),
    )
    return PretrainResult(
        output_dir=output_dir,
        encoder_dir=run.final_dir,
        tokenizer_dir=output_dir / RUN_TOKENIZER,
        metrics_path=run.result.metrics_path,
        last_checkpoint=run.result.last_checkpoint,
        final_metrics=metrics,
        num_examples=train.batches_per_epoch * batch_size,
    )
