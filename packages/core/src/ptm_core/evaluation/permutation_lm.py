"""Permutation-LM (XLNet) loss and accuracy of an encoder + output layer on a corpus."""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F

from ptm_core.data.batches import pad_examples
from ptm_core.data.corpus import read_text_corpus
from ptm_core.data.segments import build_single_segment_examples
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.evaluation.masked_lm import MaskedLMEvaluation, load_run_encoder
from ptm_core.models.pretraining import ENCODER_INPUTS
from ptm_core.objectives.base import IGNORE_INDEX
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.permutation_lm import PermutationLMObjective
from ptm_core.progress import batch_starts
from ptm_core.seeding import generator_for
from ptm_core.tokenization import WordPieceTokenizer


def load_permutation_lm(
    model_dir: str | Path, *, random_init_seed: int | None = None
) -> tuple[TransformerEncoder, PermutationLMObjective, WordPieceTokenizer]:
    """Load encoder, permutation-LM output layer and tokenizer from a ``final/`` directory.

    Args:
        model_dir: directory written by a run with a ``plm`` objective (``xlnet_tiny``).
        random_init_seed: if given, keep the architecture and tokenizer but re-initialise
            every weight from this seed (the "same model from random init" baseline).
    """
    from ptm_core.objectives.mix import ObjectiveMix
    from ptm_core.pretraining import load_heads

    directory = Path(model_dir)
    encoder, tokenizer = load_run_encoder(directory, random_init_seed=random_init_seed)
    objective = build_objective(PermutationLMObjective, encoder, tokenizer.vocab_info)
    if random_init_seed is None:
        missing = load_heads(ObjectiveMix({"plm": objective}), directory)
        if any(name.endswith("output_bias") for name in missing):
            raise ValueError(
                f"{directory}: no trained permutation-LM output layer (missing {missing}); "
                "evaluate a directory written by a run that had a 'plm' objective"
            )
    return encoder, objective, tokenizer


@torch.no_grad()
def evaluate_permutation_lm(
    encoder: TransformerEncoder,
    objective: PermutationLMObjective,
    tokenizer: WordPieceTokenizer,
    corpus: str | Path,
    *,
    max_length: int = 128,
    batch_size: int = 32,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> MaskedLMEvaluation:
    """Score the last ``1/K`` of seeded factorisation orders, as pre-training does.

    The same ``seed`` gives the same orders and targets for every model, so a trained
    model and its baseline are compared on identical inputs. Rows are scored on their
    own (no memory of an earlier segment).

    Args:
        encoder: a relative-position encoder.
        objective: the :class:`PermutationLMObjective` whose output layer scores the tokens
            (its ``partial_k``, span and context settings decide the orders).
        tokenizer: tokenizer matching the encoder.
        corpus: text corpus (see ``data_specs/text_corpus``).
        max_length: row length.
        batch_size: rows per forward pass.
        seed: seed of the orders.
        device: where to run.

    Returns:
        :class:`MaskedLMEvaluation` over the predicted positions.
    """
    from ptm_core.pretraining import tokenize_documents

    tokenized = tokenize_documents(read_text_corpus(corpus), tokenizer)
    examples = build_single_segment_examples(tokenized, tokenizer.vocab_info, max_length)
    encoder = encoder.to(device).eval()
    objective = objective.to(device).eval()
    memory_segment, objective.memory_segment = objective.memory_segment, 0
    generator = generator_for(seed, "evaluate-plm")
    total_loss, correct, count = 0.0, 0, 0
    try:
        for first in batch_starts(len(examples), batch_size, "evaluate", "example"):
            batch = pad_examples(examples[first : first + batch_size], tokenizer.vocab_info.pad_id)
            batch = objective.collate(batch, generator)
            inputs = {k: batch[k].to(device) for k in ENCODER_INPUTS if k in batch}
            query = encoder(**inputs).query_hidden_state
            assert query is not None
            labels = batch["plm_labels"].to(device)
            selected = labels != IGNORE_INDEX
            logits = objective.logits(query[selected]).float()
            targets = labels[selected]
            total_loss += F.cross_entropy(logits, targets, reduction="sum").item()
            correct += int((logits.argmax(-1) == targets).sum())
            count += int(targets.numel())
    finally:
        objective.memory_segment = memory_segment
    if count == 0:
        raise ValueError(f"{corpus}: no tokens to evaluate; the corpus is too small")
    loss = total_loss / count
    return MaskedLMEvaluation(
        loss=loss,
        perplexity=math.exp(min(loss, 50.0)),
        accuracy=correct / count,
        predictions=count,
        examples=len(examples),
    )
