"""Masked-LM accuracy and perplexity of an encoder + MLM head on a corpus."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ptm_core.data.batches import pad_examples
from ptm_core.data.corpus import read_text_corpus
from ptm_core.data.segments import build_single_segment_examples
from ptm_core.encoders.factory import encoder_from_config
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.objectives.base import IGNORE_INDEX
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mlm import MaskedLMObjective, mask_tokens
from ptm_core.progress import batch_starts
from ptm_core.seeding import derive_seed, generator_for
from ptm_core.tokenization import WordPieceTokenizer


@dataclass
class MaskedLMEvaluation:
    """Language-model scores over a corpus: token-level averages over the predicted
    positions (the masked ones for MLM, the order's last ``1/K`` for permutation LM).

    Attributes:
        loss: mean cross-entropy (nats) at predicted positions.
        perplexity: ``exp(loss)``.
        accuracy: fraction of predicted positions whose arg-max is the original token.
        predictions: number of positions scored.
        examples: number of rows evaluated.
    """

    loss: float
    perplexity: float
    accuracy: float
    predictions: int
    examples: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_run_encoder(
    model_dir: str | Path, *, random_init_seed: int | None = None
) -> tuple[TransformerEncoder, WordPieceTokenizer]:
    """Encoder and tokenizer of a run's ``final/`` directory, or the same architecture
    re-initialised from ``random_init_seed`` (the "same model from random init" baseline)."""
    directory = Path(model_dir)
    tokenizer = WordPieceTokenizer.from_directory(directory)
    encoder = TransformerEncoder.from_pretrained(directory)
    if random_init_seed is not None:
        torch.manual_seed(derive_seed(random_init_seed, "baseline"))
        encoder = encoder_from_config(encoder.config)
    return encoder, tokenizer


def load_masked_lm(
    model_dir: str | Path, *, random_init_seed: int | None = None
) -> tuple[TransformerEncoder, MaskedLMObjective, WordPieceTokenizer]:
    """Load encoder, MLM head and tokenizer from a pre-training run's ``final/`` directory.

    Args:
        model_dir: directory written by :func:`ptm_core.pretraining.pretrain`.
        random_init_seed: if given, keep the architecture and tokenizer but re-initialise
            every weight from this seed (the "same model from random init" baseline).
    """
    from ptm_core.objectives.mix import ObjectiveMix
    from ptm_core.pretraining import load_heads

    directory = Path(model_dir)
    encoder, tokenizer = load_run_encoder(directory, random_init_seed=random_init_seed)
    objective = build_objective(MaskedLMObjective, encoder, tokenizer.vocab_info)
    if random_init_seed is None:
        missing = load_heads(ObjectiveMix({"mlm": objective}), directory)
        if any(not name.endswith("decoder.weight") for name in missing):
            raise ValueError(
                f"{directory}: no trained MLM head (missing {missing}); evaluate a directory "
                "written by a run that had an 'mlm' objective"
            )
    return encoder, objective, tokenizer


@torch.no_grad()
def evaluate_masked_lm(
    encoder: TransformerEncoder,
    objective: MaskedLMObjective,
    tokenizer: WordPieceTokenizer,
    corpus: str | Path,
    *,
    max_length: int = 128,
    batch_size: int = 32,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> MaskedLMEvaluation:
    """Score masked-token prediction on ``corpus`` with seeded, reproducible masks.

    The same ``seed`` gives the same masked positions for every model, so two models
    (a trained one and its random-init baseline) are compared on identical inputs.

    Args:
        encoder: the encoder.
        objective: a :class:`MaskedLMObjective` whose head scores the tokens (its rates
            are used for masking).
        tokenizer: tokenizer matching the encoder.
        corpus: text corpus (see ``data_specs/text_corpus``).
        max_length: row length.
        batch_size: rows per forward pass.
        seed: seed of the masks.
        device: where to run.
    """
    from ptm_core.pretraining import tokenize_documents

    tokenized = tokenize_documents(read_text_corpus(corpus), tokenizer)
    max_length = min(max_length, encoder.config.max_positions)
    examples = build_single_segment_examples(tokenized, tokenizer.vocab_info, max_length)
    encoder = encoder.to(device).eval()
    objective = objective.to(device).eval()
    generator = generator_for(seed, "evaluate-mlm")
    total_loss, correct, count = 0.0, 0, 0
    for first in batch_starts(len(examples), batch_size, "evaluate", "example"):
        batch = pad_examples(examples[first : first + batch_size], tokenizer.vocab_info.pad_id)
        corrupted, labels = mask_tokens(
            batch["input_ids"],
            batch["special_tokens_mask"],
            tokenizer.vocab_info,
            generator,
            mask_prob=objective.mask_prob,
            mask_token_prob=objective.mask_token_prob,
            random_token_prob=objective.random_token_prob,
        )
        hidden = encoder(
            corrupted.to(device),
            attention_mask=batch["attention_mask"].to(device),
            token_type_ids=batch["token_type_ids"].to(device),
        ).last_hidden_state
        selected = (labels != IGNORE_INDEX).to(device)
        logits = objective.head(hidden[selected]).float()
        targets = labels.to(device)[selected]
        total_loss += F.cross_entropy(logits, targets, reduction="sum").item()
        correct += int((logits.argmax(-1) == targets).sum())
        count += int(targets.numel())
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
