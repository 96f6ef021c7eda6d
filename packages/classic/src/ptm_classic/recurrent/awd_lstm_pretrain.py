"""AWD-LSTM language-model pre-training (ULMFiT stage 1): the awd_lstm family's plan
(``ptm pretrain experiment=awd_lstm_tiny``), trained by the runner on the core Trainer.

The corpus comes through the project's data pipeline: raw text files are prepared once
(``ptm prepare``, memory-mapped shards, the project's WordPiece tokenizer) and read as one
contiguous stream (:class:`~ptm_classic.recurrent.bptt.LMTokenStream`); the last
``valid_fraction`` of the stream is held out to report perplexity.
"""

from __future__ import annotations

import logging

import torch

from ptm_classic.recurrent.awd_lstm import (
    AWDLSTMConfig,
    AWDLSTMLanguageModel,
    BPTTLanguageModel,
    count_parameters,
    evaluate_perplexity,
)
from ptm_classic.recurrent.bptt import BPTTBatches, LMTokenStream
from ptm_classic.recurrent.lm_objective import NAME, network_loss
from ptm_classic.settings import AWDLSTMData
from ptm_core.families.runner import PretrainingPlan, PretrainRun
from ptm_core.pretraining import PretrainResult, open_training_corpus
from ptm_core.seeding import derive_seed
from ptm_core.training.run import TrainingRun

logger = logging.getLogger(__name__)

#: The logged cross-entropy alone (perplexity = its exp), without AR and TAR.
LM_LOSS = f"{NAME}/lm_loss"


def plan_awd_lstm(run: PretrainRun) -> PretrainingPlan:
    """The awd_lstm family's ``plan_pretraining``: an AWD-LSTM language model trained with
    truncated BPTT.

    Args:
        run: ``settings`` an :class:`~ptm_classic.settings.AWDLSTMSettings` (``data``: the
            corpus, or a ``prepared`` folder, and the BPTT keys); ``model`` an
            :class:`AWDLSTMConfig` factory called with ``vocab_size=`` of the tokenizer;
            ``trainer.devices`` must be 1 (the carried state needs each row's windows in
            order on one process).

    Returns:
        The plan; its result is a :class:`~ptm_core.pretraining.PretrainResult` whose
        ``final_metrics`` add ``perplexity`` (training, ``exp`` of the last logged
        ``lm/lm_loss``), ``valid_perplexity``, ``valid_loss`` and ``parameters``.
    """
    data: AWDLSTMData = run.settings.data
    trainer = run.trainer
    if trainer.devices != 1:
        raise ValueError(
            f"trainer.devices={trainer.devices}: AWD-LSTM pre-training carries each row's "
            "hidden state from one window to the next, which DDP's batch sharding breaks; "
            "set trainer.devices=1"
        )
    if not 0.0 <= data.valid_fraction < 1.0:
        raise ValueError(f"data.valid_fraction must be in [0, 1), got {data.valid_fraction}")
    if run.model is None:
        raise ValueError("model: give an AWD-LSTM config (model=awd_lstm_tiny or awd_lstm_paper)")
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
    batch_size, bptt = data.batch_size, data.bptt
    stream = LMTokenStream(store, tok.vocab_info.sep_id)
    split = len(stream) - int(len(stream) * data.valid_fraction)
    train = BPTTBatches(
        stream, batch_size, bptt, stop=split, variable_length=data.variable_length, seed=run.seed
    )
    valid = (
        BPTTBatches(stream, min(batch_size, max(1, (len(stream) - split) // 2)), bptt, start=split)
        if split < len(stream)
        else None
    )
    torch.manual_seed(derive_seed(run.seed, "init"))
    config = run.model(vocab_size=tok.vocab_size)
    if not isinstance(config, AWDLSTMConfig):
        raise TypeError(f"model config builds {type(config).__name__}, not an AWDLSTMConfig")
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

    def finish(trained: TrainingRun) -> PretrainResult:
        metrics = dict(trained.final_metrics)
        if LM_LOSS in metrics:
            metrics["perplexity"] = float(torch.tensor(metrics[LM_LOSS]).exp())
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
        return PretrainResult.of_run(
            trained, output_dir, train.batches_per_epoch * batch_size, final_metrics=metrics
        )

    return PretrainingPlan(
        network=BPTTLanguageModel(lm, batch_size),
        objectives=network_loss(),
        data=train,
        save_final=lambda final: lm.save_pretrained(final, extra_writers=[tok.save]),
        finish=finish,
    )
