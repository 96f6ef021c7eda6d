"""ELMo biLM pre-training: corpus -> word corpus -> biLM -> trainer -> ``final/``.

:func:`plan_elmo` is the elmo family's ``plan_pretraining`` (``ptm pretrain
experiment=elmo_tiny``): the runner (:mod:`ptm_core.families.runner`) trains its plan with the
one Trainer and writes ``final/``.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ptm_classic.recurrent.bilm import BiLM, BiLMConfig, BiLMTraining, save_bilm
from ptm_classic.recurrent.lm_objective import network_loss
from ptm_classic.recurrent.word_corpus import (
    ElmoBatches,
    RowSubset,
    WordCorpus,
    default_word_corpus_dir,
    prepare_word_corpus,
)
from ptm_classic.settings import ElmoData
from ptm_core.atomic import atomic_write_text
from ptm_core.families.runner import PretrainingPlan, PretrainRun
from ptm_core.seeding import derive_seed
from ptm_core.training.distributed import is_main_process
from ptm_core.training.run import TrainingRun

logger = logging.getLogger(__name__)

#: The held-out (or training-rows) perplexity of the final model, beside metrics.jsonl.
EVAL_FILE = "eval.json"


@dataclass
class ElmoPretrainResult:
    """Where an ELMo run put its outputs (the shape every run returns).

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


def plan_elmo(run: PretrainRun) -> PretrainingPlan:
    """The elmo family's ``plan_pretraining``: corpus -> word corpus -> biLM.

    The runner trains the plan; its ``finish`` scores the final biLM's perplexity (full
    softmax, both directions) on the held-out rows (or, with too few rows or
    ``data.heldout_every=0``, on the training rows) and writes it to
    ``<output_dir>/eval.json``.

    Args:
        run: ``settings`` an :class:`~ptm_classic.settings.ElmoSettings`; ``model`` a
            :class:`BiLMConfig` factory called with ``vocab_size=`` of the corpus.

    Returns:
        The plan; its result is an :class:`ElmoPretrainResult`.
    """
    data: ElmoData = run.settings.data
    if data.corpus is None:
        raise ValueError("data.corpus: give the text corpus the biLM is trained on")
    if run.model is None:
        raise ValueError("model: give a biLM config (model=elmo_tiny or elmo_original)")
    output_dir = run.output_dir
    output_dir.mkdir(parents=True, exist_ok=True)
    words: WordCorpus = prepare_word_corpus(
        data.corpus,
        data.word_corpus_dir or default_word_corpus_dir(output_dir),
        max_length=data.max_words,
        lowercase=data.word_lowercase,
    )
    vocabulary = words.vocabulary(data.vocab_top_k, data.min_count)
    config = run.model(vocab_size=len(vocabulary))
    if not isinstance(config, BiLMConfig):
        raise TypeError(f"model config builds {type(config).__name__}, not a BiLMConfig")
    torch.manual_seed(derive_seed(run.seed, "init"))
    bilm = BiLM(config)
    every = data.heldout_every if words.num_rows >= 2 * max(data.heldout_every, 1) else 0
    train_rows = RowSubset(words.num_rows, every, held_out=False)
    common: dict[str, Any] = {
        "vocab_size": config.vocab_size,
        "batch_size": data.batch_size,
        "max_characters": config.max_characters,
    }
    batches = ElmoBatches(
        words, rows=train_rows, seed=run.seed, num_workers=data.num_workers, **common
    )
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

    def finish(trained: TrainingRun) -> ElmoPretrainResult:
        final_metrics = dict(trained.final_metrics)
        if is_main_process():
            held = RowSubset(words.num_rows, every, held_out=True) if every else train_rows
            evaluation = ElmoBatches(words, rows=held, shuffle=False, **common)
            scores = evaluate_perplexity(bilm, evaluation)
            prefix = "heldout" if every else "train"
            evaluated: dict[str, Any] = {f"{prefix}_{k}": v for k, v in scores.items()}
            evaluated[f"{prefix}_rows"] = len(held)
            final_metrics.update(evaluated)
            atomic_write_text(output_dir / EVAL_FILE, json.dumps(evaluated, indent=2) + "\n")
            logger.info("%s perplexity %.2f (full softmax)", prefix, scores["perplexity"])
        return ElmoPretrainResult(
            output_dir=output_dir,
            encoder_dir=trained.final_dir,
            metrics_path=trained.result.metrics_path,
            last_checkpoint=trained.result.last_checkpoint,
            final_metrics=final_metrics,
            num_examples=len(train_rows),
        )

    return PretrainingPlan(
        network=BiLMTraining(bilm),
        objectives=network_loss(),
        data=batches,
        save_final=lambda final: save_bilm(bilm, final, vocabulary),
        finish=finish,
    )


__all__ = ["ElmoPretrainResult", "evaluate_perplexity", "plan_elmo"]
