"""ELMo biLM pre-training: corpus -> word corpus -> biLM -> trainer -> ``final/``.

Flows call :func:`pretrain_elmo` with numbers and a :class:`~ptm_classic.recurrent.bilm.BiLMConfig`
factory; the run, the save and the result go through the one training tail
(:func:`ptm_core.training.run.train_and_save`).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ptm_classic.recurrent.bilm import BiLM, BiLMConfig, BiLMPretrainingModel, save_bilm
from ptm_classic.recurrent.word_corpus import (
    ElmoBatches,
    RowSubset,
    WordCorpus,
    default_word_corpus_dir,
    prepare_word_corpus,
)
from ptm_core.atomic import atomic_write_text
from ptm_core.seeding import derive_seed
from ptm_core.training import TrainerConfig
from ptm_core.training.distributed import is_main_process
from ptm_core.training.run import train_and_save

logger = logging.getLogger(__name__)

#: The held-out (or training-rows) perplexity of the final model, beside metrics.jsonl.
EVAL_FILE = "eval.json"


@dataclass
class ElmoPretrainResult:
    """Where an ELMo run put its outputs (the shape every recipe returns).

    Attributes:
        output_dir: the run directory.
        encoder_dir: ``final/`` (``config.json``, ``model.safetensors``, ``vocab.txt``),
            loadable with :func:`~ptm_classic.recurrent.bilm.load_bilm`.
        metrics_path: JSON lines of training metrics.
        last_checkpoint: newest training checkpoint (for resume).
        final_metrics: the last training record plus the held-out perplexity
            (``heldout_perplexity``, full softmax, both directions), also written to
            ``<output_dir>/eval.json``.
        num_examples: training rows.
    """

    output_dir: Path
    encoder_dir: Path
    metrics_path: Path
    last_checkpoint: Path | None
    final_metrics: dict[str, Any] = field(default_factory=dict)
    num_examples: int = 0


@torch.no_grad()
def evaluate_perplexity(bilm: BiLM, batches: ElmoBatches) -> dict[str, float]:
    """Exact (full-softmax) per-token NLL of both LMs on ``batches`` and its perplexity.

    Returns:
        ``{"forward_nll", "backward_nll", "perplexity"}`` with
        ``perplexity = exp((forward_nll + backward_nll) / 2)``, NLLs averaged over tokens.
    """
    was_training = bilm.training
    bilm.eval()
    device = next(bilm.parameters()).device
    totals = {"forward": 0.0, "backward": 0.0}
    count = 0
    for batch in batches.iter_batches(0):
        batch = {k: v.to(device) for k, v in batch.items()}
        out = bilm.lm_loss(batch["char_ids"], batch["attention_mask"], batch["word_targets"])
        totals["forward"] += float(out.forward_nll) * out.num_predictions
        totals["backward"] += float(out.backward_nll) * out.num_predictions
        count += out.num_predictions
    bilm.train(was_training)
    forward, backward = totals["forward"] / count, totals["backward"] / count
    return {
        "forward_nll": forward,
        "backward_nll": backward,
        "perplexity": math.exp((forward + backward) / 2),
    }


def pretrain_elmo(
    corpus: str | Path | Sequence[str | Path],
    *,
    model: Callable[..., BiLMConfig] | BiLMConfig,
    trainer: TrainerConfig,
    vocab_top_k: int = 50000,
    min_count: int = 1,
    max_length: int = 64,
    lowercase: bool = False,
    batch_size: int = 32,
    heldout_every: int = 20,
    seed: int = 0,
    num_workers: int = 0,
    word_corpus_dir: str | Path | None = None,
    callbacks: Sequence[object] = (),
) -> ElmoPretrainResult:
    """Pre-train ELMo's biLM on a text corpus.

    Args:
        corpus: text-corpus file(s) or folder (any input ``ptm prepare`` reads).
        model: a :class:`BiLMConfig`, or a factory called with ``vocab_size=``.
        trainer: trainer settings (``output_dir`` is the run directory).
        vocab_top_k: output words besides ``<unk>``, ``<s>``, ``</s>`` (most frequent first).
        min_count: types seen fewer times are ``<unk>`` in the output.
        max_length: words per row (longer sentences are split).
        lowercase: lower-case the words.
        batch_size: rows per micro-batch.
        heldout_every: every this-many-th row is held out for the final perplexity
            (0: none held out; the perplexity is then measured on the training rows).
        seed: seed of initialisation and shuffling.
        num_workers: DataLoader workers that build batches.
        word_corpus_dir: where the word corpus is prepared (default ``<output_dir>/word_corpus``).
        callbacks: trainer callbacks.

    Returns:
        :class:`ElmoPretrainResult`.
    """
    output_dir = Path(trainer.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    words: WordCorpus = prepare_word_corpus(
        corpus,
        word_corpus_dir or default_word_corpus_dir(output_dir),
        max_length=max_length,
        lowercase=lowercase,
    )
    vocabulary = words.vocabulary(vocab_top_k, min_count)
    config = model if isinstance(model, BiLMConfig) else model(vocab_size=len(vocabulary))
    config.vocab_size = len(vocabulary)
    torch.manual_seed(derive_seed(seed, "init"))
    bilm = BiLM(config)
    every = heldout_every if words.num_rows >= 2 * max(heldout_every, 1) else 0
    train_rows = RowSubset(words.num_rows, every, held_out=False)
    common: dict[str, Any] = {
        "vocab_size": config.vocab_size,
        "batch_size": batch_size,
        "max_characters": config.max_characters,
    }
    batches = ElmoBatches(words, rows=train_rows, seed=seed, num_workers=num_workers, **common)
    logger.info(
        "%d rows (%d words, %d types) -> %d training rows, output vocabulary %d, "
        "%d biLM parameters (+%d softmax)",
        words.num_rows,
        words.num_words,
        len(words.types),
        len(train_rows),
        config.vocab_size,
        bilm.num_parameters(),
        bilm.num_parameters(include_softmax=True) - bilm.num_parameters(),
    )
    run = train_and_save(
        BiLMPretrainingModel(bilm),
        batches,
        trainer,
        callbacks=callbacks,
        save_final=lambda final: save_bilm(bilm, final, vocabulary),
    )
    final_metrics = dict(run.final_metrics)
    if is_main_process():
        held = RowSubset(words.num_rows, every, held_out=True) if every else train_rows
        evaluation = ElmoBatches(words, rows=held, shuffle=False, **common)
        scores = evaluate_perplexity(bilm, evaluation)
        prefix = "heldout" if every else "train"
        evaluated = {f"{prefix}_{k}": v for k, v in scores.items()}
        evaluated[f"{prefix}_rows"] = len(held)
        final_metrics.update(evaluated)
        atomic_write_text(output_dir / EVAL_FILE, json.dumps(evaluated, indent=2) + "\n")
        logger.info("%s perplexity %.2f (full softmax)", prefix, scores["perplexity"])
    return ElmoPretrainResult(
        output_dir=output_dir,
        encoder_dir=run.final_dir,
        metrics_path=run.result.metrics_path,
        last_checkpoint=run.result.last_checkpoint,
        final_metrics=final_metrics,
        num_examples=len(train_rows),
    )


__all__ = ["ElmoPretrainResult", "evaluate_perplexity", "pretrain_elmo"]
