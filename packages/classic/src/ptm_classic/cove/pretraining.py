"""CoVe pre-training: parallel pairs + a GloVe table -> the translation model -> ``final/``.

:func:`plan_cove` is the cove family's ``plan_pretraining`` (``ptm pretrain
experiment=cove_tiny data.glove=<a GloVe final/>``); the one runner trains the plan.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ptm_classic.cove.pairs import (
    TranslationBatches,
    target_vocabulary,
    translation_examples,
)
from ptm_classic.cove.translation import CoVeConfig, CoVeTranslation, save_cove
from ptm_classic.finetune.word_features import StaticWordEmbedding
from ptm_classic.recurrent.lm_objective import NetworkLoss
from ptm_classic.settings import CoVeData
from ptm_core.atomic import atomic_write_text
from ptm_core.data.parallel_corpus import read_parallel_corpora
from ptm_core.families.runner import PretrainingPlan, PretrainRun
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.seeding import derive_seed
from ptm_core.training.distributed import is_main_process
from ptm_core.training.run import TrainingRun

logger = logging.getLogger(__name__)

#: The held-out translation perplexity of the final model, beside metrics.jsonl.
EVAL_FILE = "eval.json"


@dataclass
class CoVePretrainResult:
    """Where a CoVe run put its outputs (the fields every run reports).

    Attributes:
        output_dir: the run directory.
        encoder_dir: ``final/`` (:func:`~ptm_classic.cove.translation.load_cove` reads it).
        metrics_path: JSON lines of training metrics (``translation/nll``, ...).
        last_checkpoint: newest training checkpoint (for resume).
        final_metrics: the last training record, plus the held-out perplexity when
            ``data.heldout`` is given (also in ``<output_dir>/eval.json``).
        num_examples: training pairs.
    """

    output_dir: Path
    encoder_dir: Path
    metrics_path: Path
    last_checkpoint: Path | None
    final_metrics: dict[str, Any] = field(default_factory=dict)
    num_examples: int = 0


@torch.no_grad()
def translation_perplexity(model: CoVeTranslation, batches: TranslationBatches) -> dict[str, float]:
    """Teacher-forced per-word NLL (``</s>`` included) of ``batches`` and its perplexity."""
    was_training = model.training
    model.eval()
    device = next(model.decoder.parameters()).device
    total, count, correct = 0.0, 0, 0.0
    for batch in batches.iter_batches(0):
        batch = {k: v.to(device) for k, v in batch.items()}
        out = model(**batch)
        words = int((batch["target_labels"] != -100).sum())
        total += float(out.loss) * words
        correct += float(out.metrics["accuracy"]) * words
        count += words
    model.train(was_training)
    return {
        "nll": total / count,
        "perplexity": math.exp(total / count),
        "accuracy": correct / count,
    }


def plan_cove(run: PretrainRun) -> PretrainingPlan:
    """The cove family's ``plan_pretraining``: parallel pairs -> CoVe's translation model.

    Args:
        run: ``settings`` a :class:`~ptm_classic.settings.CoVeSettings`; ``model`` a
            :class:`CoVeConfig` factory called with ``input_size=`` (the GloVe width) and
            ``target_vocab_size=`` (the data's).

    Returns:
        The plan; its result is a :class:`CoVePretrainResult`.

    Raises:
        ValueError: ``data.parallel`` or ``data.glove`` missing, or no pair that translates
            ``data.source_lang`` into ``data.target_langs``.
    """
    data: CoVeData = run.settings.data
    if data.parallel is None:
        raise ValueError(
            "data.parallel: give the parallel corpus (a folder of <src>-<tgt>.tsv or aligned "
            "files, see data_specs/parallel_corpus)"
        )
    if data.glove is None:
        raise ValueError(
            "data.glove: give the GloVe vector table the MT-LSTM reads (the final/ of "
            "`ptm pretrain experiment=glove_tiny`)"
        )
    if run.model is None:
        raise ValueError("model: give a CoVe config (model=cove_tiny)")
    glove = StaticWordEmbedding.from_table(data.glove, freeze=True)
    targets = list(data.target_langs) or None
    corpora = read_parallel_corpora(data.parallel)
    examples = translation_examples(
        corpora, source_lang=data.source_lang, target_langs=targets, max_words=data.max_words
    )
    vocabulary = target_vocabulary(
        examples, top_k=data.target_vocab_top_k, min_count=data.min_count
    )
    config = run.model(input_size=glove.dim, target_vocab_size=len(vocabulary))
    if not isinstance(config, CoVeConfig):
        raise TypeError(f"model config builds {type(config).__name__}, not a CoVeConfig")
    torch.manual_seed(derive_seed(run.seed, "init"))
    model = CoVeTranslation(config, glove)
    languages = {
        "source_lang": data.source_lang,
        "target_langs": sorted({e.target_lang for e in examples}),
    }
    batches = TranslationBatches(
        examples, glove.ids, vocabulary, batch_size=data.batch_size, seed=run.seed
    )
    source_words = {w for e in examples for w in e.source}
    covered = sum(glove.row(w) > 1 for w in source_words)
    logger.info(
        "%d pairs %s -> %s; target vocabulary %d; GloVe %d-d covers %d of %d source types",
        len(examples),
        data.source_lang,
        ",".join(languages["target_langs"]),
        len(vocabulary),
        glove.dim,
        covered,
        len(source_words),
    )
    output_dir = run.output_dir

    def finish(trained: TrainingRun) -> CoVePretrainResult:
        final_metrics = dict(trained.final_metrics)
        final_metrics["glove_coverage"] = covered / max(len(source_words), 1)
        if data.heldout is not None and is_main_process():
            held = translation_examples(
                read_parallel_corpora(data.heldout),
                source_lang=data.source_lang,
                target_langs=languages["target_langs"],
                max_words=data.max_words,
            )
            scored = translation_perplexity(
                model,
                TranslationBatches(held, glove.ids, vocabulary, batch_size=64, shuffle=False),
            )
            evaluated = {f"heldout_{k}": v for k, v in scored.items()} | {
                "heldout_pairs": len(held)
            }
            final_metrics.update(evaluated)
            atomic_write_text(output_dir / EVAL_FILE, json.dumps(evaluated, indent=2) + "\n")
            logger.info("held-out translation perplexity %.2f", scored["perplexity"])
        return CoVePretrainResult(
            output_dir=output_dir,
            encoder_dir=trained.final_dir,
            metrics_path=trained.result.metrics_path,
            last_checkpoint=trained.result.last_checkpoint,
            final_metrics=final_metrics,
            num_examples=len(examples),
        )

    return PretrainingPlan(
        network=model,
        objectives=ObjectiveMix({"translation": NetworkLoss()}),
        data=batches,
        save_final=lambda final: save_cove(model, final, vocabulary, languages=languages),
        finish=finish,
    )


def evaluate_translation(
    model_dir: str | Path, corpus: str | Path, *, random_init_seed: int | None = None
) -> dict[str, Any]:
    """Teacher-forced translation perplexity of a CoVe ``final/`` on parallel pairs (the
    ``cove`` evaluation of ``ptm evaluate``), in the languages the model was trained on.

    Args:
        model_dir: a CoVe ``final/``.
        corpus: parallel corpus file(s) or folder (``data_specs/parallel_corpus/heldout``).
        random_init_seed: score the same architecture from random init (the baseline).
    """
    from ptm_classic.cove.translation import load_cove

    model = load_cove(model_dir)
    # load_cove's plain attributes (nn.Module's typing knows tensors and modules only)
    record: dict[str, Any] = model.__dict__["record"]
    vocabulary: list[str] = model.__dict__["vocabulary"]
    if random_init_seed is not None:
        torch.manual_seed(random_init_seed)
        model = CoVeTranslation(model.config, model.glove)
    examples = translation_examples(
        read_parallel_corpora(corpus),
        source_lang=record.get("source_lang", "en"),
        target_langs=record.get("target_langs") or None,
    )
    batches = TranslationBatches(
        examples, model.glove.ids, vocabulary, batch_size=64, shuffle=False
    )
    return {**translation_perplexity(model, batches), "pairs": len(examples)}


__all__ = ["CoVePretrainResult", "evaluate_translation", "plan_cove", "translation_perplexity"]
