"""Tiny models and a tiny fine-tuned final/ for the compression tests."""

from __future__ import annotations

from pathlib import Path

import torch

from ptm_core.encoders.presets import bert_encoder
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.model import TaskModel, build_task_model, save_task_model
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.tokenization import WordPieceTokenizer

REPO = Path(__file__).resolve().parents[3]
VOCAB = REPO / "data_specs/text_corpus/sample-vocab.txt"


def tiny_encoder(seed: int = 0, **overrides: int) -> TransformerEncoder:
    """2 layers, 4 heads of width 8 (hidden 32), no dropout."""
    torch.manual_seed(seed)
    settings = dict(vocab_size=60, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64)
    settings.update(overrides)
    return bert_encoder(**settings, dropout=0.0, attention_dropout=0.0).eval()


def tiny_classifier(seed: int = 0, vocab_size: int = 60) -> TaskModel:
    """A 2-class classifier on :func:`tiny_encoder`, eval mode."""
    encoder = tiny_encoder(seed, vocab_size=vocab_size)
    return build_task_model(encoder, "classification", 2, 0.0, label_names=["0", "1"]).eval()


def batch_of(vocab_size: int = 60, batch: int = 3, length: int = 7, seed: int = 1) -> dict:
    """Random ids with the last row padded from the middle on, and labels."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab_size, (batch, length), generator=generator)
    mask = torch.ones(batch, length, dtype=torch.long)
    mask[-1, length // 2 :] = 0
    labels = torch.randint(0, 2, (batch,), generator=generator)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def write_task_final(directory: Path, seed: int = 0) -> Path:
    """A fine-tuned-style final/ (random weights) on the sentiment sample, with tokenizer."""
    tokenizer = WordPieceTokenizer.from_vocab(VOCAB)
    model = tiny_classifier(seed, vocab_size=tokenizer.vocab_size)
    task = TaskSpec(
        name="sentiment",
        kind="classification",
        train=str(REPO / "data_specs/glue_classification/single_train.tsv"),
        dev=str(REPO / "data_specs/glue_classification/single_dev.tsv"),
        max_length=32,
    )
    save_task_model(
        model, directory, task_config={"task": task.to_dict()}, extra_writers=[tokenizer.save]
    )
    return directory
