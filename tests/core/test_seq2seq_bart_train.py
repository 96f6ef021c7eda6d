"""Tiny BART: denoising pre-training lowers the loss; greedy/beam decoding reproduce
memorised sentences."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import torch

from ptm_core.data import read_text_corpus
from ptm_core.encoders.encoder_decoder import build_encoder_decoder
from ptm_core.families import get
from ptm_core.models import PretrainingModel
from ptm_core.objectives.bart_noising import BartDenoisingObjective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.seq2seq_pretraining import build_model
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig
from tests.core.family_runs import pretrain_seq2seq

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "data_specs/text_corpus/sample/corpus.txt"
VOCAB_FILE = ROOT / "data_specs/text_corpus/sample-vocab.txt"


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


TINY = partial(
    build_encoder_decoder,
    hidden_size=32,
    encoder_layers=1,
    decoder_layers=1,
    num_heads=2,
    intermediate_size=64,
    max_positions=64,
    dropout=0.0,
)


def test_denoising_pretraining_lowers_reconstruction_loss(tmp_path: Path) -> None:
    trainer = TrainerConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=40,
        learning_rate=3e-3,
        warmup_steps=2,
        log_every=5,
        save_every=40,
        progress=False,
        seed=0,
    )
    result = pretrain_seq2seq(
        CORPUS,
        model=TINY,
        objective=BartDenoisingObjective,
        trainer=trainer,
        tokenizer=VOCAB_FILE,
        max_length=48,
        batch_size=8,
    )
    records = [json.loads(line) for line in result.metrics_path.read_text().splitlines()]
    losses = [r["bart/loss"] for r in records if "bart/loss" in r]
    assert losses[-1] < losses[0] - 0.5, losses
    from ptm_core.encoders.encoder_decoder import EncoderDecoderModel

    loaded = EncoderDecoderModel.from_pretrained(result.encoder_dir)
    assert loaded.config.vocab_size == WordPieceTokenizer.from_vocab(VOCAB_FILE).vocab_size


def test_overfit_tiny_set_then_generate_exact_sentences() -> None:
    tok = WordPieceTokenizer.from_vocab(VOCAB_FILE, lowercase=True)
    vocab = tok.vocab_info
    sentences = [s for doc in read_text_corpus(CORPUS) for s in doc.sentences][:4]
    ids = [tok.tokenize_ids(s)[:20] for s in sentences]
    objective = BartDenoisingObjective(vocab, infilling_ratio=0.2, max_length=32)
    torch.manual_seed(0)
    model = build_model(TINY, vocab, objective)
    wrapped = PretrainingModel(
        model, ObjectiveMix({"bart": objective}), input_keys=get("seq2seq").input_keys
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    first = None
    for _ in range(150):
        batch = objective.collate([[s] for s in ids], g)
        loss = wrapped(batch).loss
        first = first if first is not None else loss.item()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < first / 10
    sources = [[vocab.cls_id, *s, vocab.sep_id] for s in ids]
    width = max(map(len, sources))
    inputs = torch.tensor([s + [vocab.pad_id] * (width - len(s)) for s in sources])
    mask = (inputs != vocab.pad_id).long()
    expected = [[*s, vocab.sep_id] for s in ids]
    greedy = model.generate(inputs, mask, max_length=30)
    assert sum(g == e for g, e in zip(greedy, expected, strict=True)) >= 2, (greedy, expected)
    beams = model.generate(inputs, mask, max_length=30, num_beams=3)
    assert sum(b == e for b, e in zip(beams, expected, strict=True)) >= 2
