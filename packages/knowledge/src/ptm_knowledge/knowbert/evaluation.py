"""Evaluate a KnowBERT checkpoint (MLM, NSP, entity linking) next to its random-init twin."""

from __future__ import annotations

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
from ptm_knowledge.ernie.examples import build_knowledge_examples
from ptm_knowledge.family_knowbert import KNOWBERT_INPUTS
from ptm_knowledge.knowbert.finetune import candidate_transform
from ptm_knowledge.knowbert.kar import FIRST_ENTITY_ROW
from ptm_knowledge.knowbert.linking_objective import EntityLinkingObjective
from ptm_knowledge.knowbert.model import KnowBertEncoder
from ptm_knowledge.linking import read_linked_corpus


def evaluate_knowbert(
    model_dir: str | Path,
    linked_corpus: str | Path,
    *,
    random_init_seed: int | None = None,
    seed: int = 0,
    max_length: int = 128,
    batch_size: int = 16,
) -> dict[str, Any]:
    """MLM, NSP and linking metrics of a KnowBERT ``final/`` on a linked corpus.

    The corpus's mentions are the gold entities of the model's KG that holds most of them.
    Rows and masks are drawn from ``seed`` alone, so the trained model and its baseline
    (``random_init_seed``: every weight re-initialised, the KG tables kept) see the same
    inputs.

    Raises:
        ValueError: no mention of the corpus is an entity of any of the model's KGs.
    """
    directory = Path(model_dir)
    tokenizer = load_task_tokenizer(directory)
    encoder = KnowBertEncoder.from_pretrained(directory)
    if random_init_seed is not None:
        torch.manual_seed(derive_seed(random_init_seed, "baseline"))
        init_bert_weights(encoder)
    documents = list(read_linked_corpus(linked_corpus))
    mentioned = [m.entity_id for d in documents for m in d.mentions]
    shares = [
        sum(e in set(encoder.specs[n].entity_ids) for e in mentioned) for n in encoder.kg_names
    ]
    gold = max(range(len(shares)), key=shares.__getitem__)
    if not shares[gold]:
        raise ValueError(
            f"{linked_corpus}: none of its {len(mentioned):,} mentions is an entity of "
            f"{directory}'s KGs ({', '.join(encoder.kg_names)}); link it against one of them"
        )
    rows = {
        e: FIRST_ENTITY_ROW + i
        for i, e in enumerate(encoder.specs[encoder.kg_names[gold]].entity_ids)
    }
    vocab = tokenizer.vocab_info
    mix = ObjectiveMix(
        {
            "mlm": build_objective(MaskedLMObjective, encoder, vocab),
            "nsp": build_objective(NextSentenceObjective, encoder, vocab),
            "linking": EntityLinkingObjective(encoder),
        }
    )
    if random_init_seed is None:
        load_heads(mix, directory)
    examples = build_knowledge_examples(
        documents,
        tokenizer,
        max_length,
        entity_index=rows,
        segment_pairs=True,
        rng=random.Random(derive_seed(seed, "evaluate-examples")),
    )
    generator = generator_for(seed, "evaluate-static")
    prepared = [mix.prepare_example(e, generator) for e in examples]
    transform = candidate_transform(encoder, tokenizer)
    transform.gold_kg, transform.then = gold, mix.collate
    batches = PretrainingBatches(
        prepared, batch_size, pad_id=vocab.pad_id, transform=transform, seed=seed, shuffle=False
    )
    return average_metrics(PretrainingModel(encoder, mix, input_keys=KNOWBERT_INPUTS), batches)


__all__ = ["evaluate_knowbert"]
