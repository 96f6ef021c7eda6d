"""Evaluate an ERNIE-THU checkpoint (MLM, NSP, dEA) next to its random-init twin."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import torch

from ptm_core.data import PretrainingBatches
from ptm_core.evaluation import average_metrics
from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer
from ptm_core.models.pretraining import PretrainingModel
from ptm_core.modules import init_bert_weights
from ptm_core.objectives import MaskedLMObjective, NextSentenceObjective, ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.pretraining import load_heads
from ptm_core.seeding import derive_seed, generator_for
from ptm_knowledge.ernie.dea import DenoisingEntityAutoencoderObjective
from ptm_knowledge.ernie.examples import build_knowledge_examples, check_mention_coverage
from ptm_knowledge.ernie.thu_encoder import KNOWLEDGE_CONFIG, KnowledgeableEncoder
from ptm_knowledge.family_ernie import ERNIE_THU_INPUTS
from ptm_knowledge.linking import read_linked_corpus


def is_ernie_thu_checkpoint(directory: str | Path) -> bool:
    """Whether ``directory`` was written by :meth:`KnowledgeableEncoder.save_pretrained`."""
    return (Path(directory) / KNOWLEDGE_CONFIG).is_file()


def evaluate_ernie_thu(
    model_dir: str | Path,
    linked_corpus: str | Path,
    *,
    random_init_seed: int | None = None,
    seed: int = 0,
    max_length: int = 128,
    batch_size: int = 16,
) -> dict[str, Any]:
    """MLM, NSP and dEA metrics of an ERNIE-THU ``final/`` directory on a linked corpus.

    Rows, masks and entity corruption are drawn from ``seed`` alone, so the trained model
    and its baseline (``random_init_seed``: same architecture, text and aggregator weights
    re-initialised, the frozen TransE table kept) are scored on identical inputs.

    Returns:
        Averaged metrics (``loss``, ``mlm/accuracy``, ``dea/accuracy``, ...) plus
        ``dea/chance`` (mean 1 / number of candidate entities per batch row set).

    Raises:
        ValueError: no mention of the corpus has an entity of the model's table (see
            :func:`~ptm_knowledge.ernie.examples.check_mention_coverage`).
    """
    directory = Path(model_dir)
    tokenizer = load_task_tokenizer(directory)
    encoder = KnowledgeableEncoder.from_pretrained(directory)
    if random_init_seed is not None:
        torch.manual_seed(derive_seed(random_init_seed, "baseline"))
        # BERT's init on every parameter; the TransE table is a buffer and stays as trained.
        init_bert_weights(encoder)
    entity_ids = json.loads((directory / KNOWLEDGE_CONFIG).read_text())["entity_ids"]
    vocab = tokenizer.vocab_info
    mix = ObjectiveMix(
        {
            "mlm": build_objective(MaskedLMObjective, encoder, vocab),
            "nsp": build_objective(NextSentenceObjective, encoder, vocab),
            "dea": build_objective(DenoisingEntityAutoencoderObjective, encoder, vocab),
        }
    )
    if random_init_seed is None:
        load_heads(mix, directory)
    examples = build_knowledge_examples(
        read_linked_corpus(linked_corpus),
        tokenizer,
        max_length,
        entity_index={e: i for i, e in enumerate(entity_ids)},
        segment_pairs=True,
        rng=random.Random(derive_seed(seed, "evaluate-examples")),
    )
    # dEA scores on a corpus linked against another KG would be a meaningless 0.
    if examples.coverage is not None:
        check_mention_coverage(
            examples.coverage, entity_source=f"{directory} (entity_ids)", max_length=max_length
        )
    generator = generator_for(seed, "evaluate-static")
    prepared = [mix.prepare_example(e, generator) for e in examples]
    batches = PretrainingBatches(
        prepared, batch_size, pad_id=vocab.pad_id, transform=mix.collate, seed=seed, shuffle=False
    )
    return average_metrics(PretrainingModel(encoder, mix, input_keys=ERNIE_THU_INPUTS), batches)
