"""Denoising loss and token accuracy of an encoder-decoder (BART, T5, MASS) on held-out text.

The held-out corpus is cut into chunks of whole sentences as in pre-training
(:func:`~ptm_core.seq2seq_pretraining.chunk_documents`) and noised by the objective the
model was trained with (read from the run's ``metrics.jsonl``, else guessed from the
architecture), with a generator seeded by ``seed``: a trained model and its random-init
baseline are scored on identical inputs and targets.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from ptm_core.data.corpus import read_text_corpus
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.objectives.base import IGNORE_INDEX
from ptm_core.objectives.seq2seq_lm import Seq2SeqObjective
from ptm_core.progress import batch_starts
from ptm_core.seeding import derive_seed, generator_for
from ptm_core.tokenization import WordPieceTokenizer

#: Objective name (the metric prefix of a seq2seq run) -> ``ptm_core.objectives`` class.
SEQ2SEQ_OBJECTIVES = {
    "bart": "BartDenoisingObjective",
    "t5": "T5SpanCorruptionObjective",
    "mass": "MassObjective",
}


@dataclass
class Seq2SeqEvaluation:
    """Decoder scores over a corpus, averaged over the predicted (non-ignored) tokens.

    Attributes:
        loss: mean token cross-entropy (nats).
        perplexity: ``exp(loss)``.
        accuracy: fraction of predicted tokens whose arg-max is the target.
        predictions: number of tokens scored.
        examples: number of sources (sentence chunks) evaluated.
    """

    loss: float
    perplexity: float
    accuracy: float
    predictions: int
    examples: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _tokenizer_dir(model_dir: Path) -> Path:
    nested = model_dir / "tokenizer"
    return nested if nested.is_dir() else model_dir


def recorded_objective(model_dir: str | Path) -> str | None:
    """The objective a ``final/`` was trained with: the ``<name>/loss`` metric of its run's
    ``metrics.jsonl`` (``final/..``); ``None`` when there is no such record."""
    path = Path(model_dir).resolve().parent / "metrics.jsonl"
    if not path.is_file():
        return None
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict):
            continue
        for key in record:
            name, _, metric = str(key).partition("/")
            if metric == "loss" and name in SEQ2SEQ_OBJECTIVES:
                return name
    return None


def default_objective(model: EncoderDecoderModel, tokenizer_vocab_size: int) -> str:
    """The objective a model of this architecture is usually trained with: T5's span
    corruption for bucketed positions or sentinel ids past the vocabulary, MASS for learned
    positions without BART's offset, else BART's denoising."""
    config = model.config
    if config.bucketed or config.vocab_size > tokenizer_vocab_size:
        return "t5"
    if config.position_offset == 0:
        return "mass"
    return "bart"


def load_seq2seq(
    model_dir: str | Path, *, random_init_seed: int | None = None
) -> tuple[EncoderDecoderModel, WordPieceTokenizer]:
    """The encoder-decoder and tokenizer of a seq2seq run's ``final/``, or the same
    architecture re-initialised from ``random_init_seed`` (the random-init baseline)."""
    directory = Path(model_dir)
    tokenizer = WordPieceTokenizer.from_directory(_tokenizer_dir(directory))
    model = EncoderDecoderModel.from_pretrained(directory)
    if random_init_seed is not None:
        torch.manual_seed(derive_seed(random_init_seed, "baseline"))
        model = EncoderDecoderModel(model.config)
    return model, tokenizer


def build_objective(
    name: str, model: EncoderDecoderModel, tokenizer: WordPieceTokenizer, max_length: int
) -> Seq2SeqObjective:
    """The objective ``name`` with its default settings (T5: the model's sentinel count)."""
    import ptm_core.objectives as objectives

    cls = getattr(objectives, SEQ2SEQ_OBJECTIVES[name])
    kwargs: dict[str, Any] = {"vocab": tokenizer.vocab_info, "max_length": max_length}
    if name == "t5":
        kwargs["num_sentinels"] = model.config.vocab_size - tokenizer.vocab_size
    objective: Seq2SeqObjective = cls(**kwargs)
    return objective


@torch.no_grad()
def evaluate_seq2seq(
    model: EncoderDecoderModel,
    tokenizer: WordPieceTokenizer,
    corpus: str | Path,
    *,
    objective: str | None = None,
    max_length: int = 128,
    batch_size: int = 16,
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> Seq2SeqEvaluation:
    """Score the decoder's reconstruction of noised held-out text.

    Args:
        model: the encoder-decoder.
        tokenizer: its tokenizer.
        corpus: text corpus (see ``data_specs/text_corpus``).
        objective: ``"bart"``, ``"t5"`` or ``"mass"`` (default: :func:`default_objective`).
        max_length: longest encoder input / target (capped by the model's positions).
        batch_size: sources per forward pass.
        seed: seed of the noise (same seed, same inputs for every model).
        device: where to run.
    """
    from ptm_core.pretraining import tokenize_documents
    from ptm_core.seq2seq_pretraining import chunk_documents

    name = objective or default_objective(model, tokenizer.vocab_size)
    max_length = min(max_length, model.config.max_positions)
    noise = build_objective(name, model, tokenizer, max_length)
    documents = tokenize_documents(read_text_corpus(corpus), tokenizer)
    sources = chunk_documents(documents, max_length - 2)
    model = model.to(device).eval()
    generator = generator_for(seed, "evaluate-seq2seq")
    total_loss, correct, count = 0.0, 0, 0
    for first in batch_starts(len(sources), batch_size, "evaluate", "example"):
        batch = noise.collate(sources[first : first + batch_size], generator)
        batch = {key: value.to(device) for key, value in batch.items()}
        logits = model(
            batch["input_ids"],
            batch["decoder_input_ids"],
            attention_mask=batch["attention_mask"],
            decoder_attention_mask=batch["decoder_attention_mask"],
        ).logits.float()
        labels = batch["labels"]
        predicted = labels != IGNORE_INDEX
        total_loss += F.cross_entropy(logits[predicted], labels[predicted], reduction="sum").item()
        correct += int((logits.argmax(-1)[predicted] == labels[predicted]).sum())
        count += int(predicted.sum())
    if count == 0:
        raise ValueError(f"{corpus}: no tokens to evaluate; the corpus is too small")
    loss = total_loss / count
    return Seq2SeqEvaluation(
        loss=loss,
        perplexity=math.exp(min(loss, 50.0)),
        accuracy=correct / count,
        predictions=count,
        examples=len(sources),
    )


__all__ = [
    "SEQ2SEQ_OBJECTIVES",
    "Seq2SeqEvaluation",
    "build_objective",
    "default_objective",
    "evaluate_seq2seq",
    "load_seq2seq",
    "recorded_objective",
]
