"""``save_encoder(format="hf", tokenizer=..., heads=...)``: the folder holds the trained MLM
head under ``cls.predictions.*`` and tokenizer files, so ``BertForMaskedLM`` reports nothing
missing and ``AutoTokenizer`` gives the full vocabulary (not a 5-token tokenizer)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
import transformers

from ptm_core.checkpoints import save_encoder
from ptm_core.encoders import bert_encoder
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.objectives.mlm import MaskedLMObjective
from ptm_core.tokenization import WordPieceTokenizer

ROOT = Path(__file__).resolve().parents[3]
SAMPLE_VOCAB = ROOT / "data_specs" / "text_corpus" / "sample-vocab.txt"


def _model() -> tuple[torch.nn.Module, ObjectiveMix, WordPieceTokenizer]:
    tokenizer = WordPieceTokenizer.from_vocab(SAMPLE_VOCAB)
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        intermediate_size=64,
        max_positions=64,
        dropout=0.0,
        attention_dropout=0.0,
    ).eval()
    mix = ObjectiveMix({"mlm": build_objective(MaskedLMObjective, encoder, tokenizer.vocab_info)})
    with torch.no_grad():
        for parameter in mix.parameters():
            parameter.add_(0.1 * torch.randn(parameter.shape))
    return encoder, mix, tokenizer


def test_save_encoder_hf_with_heads_and_tokenizer_loads_in_bert_for_masked_lm(
    tmp_path: Path,
) -> None:
    encoder, mix, tokenizer = _model()
    save_encoder(encoder, tmp_path, format="hf", tokenizer=tokenizer, heads=mix)
    model, info = transformers.AutoModelForMaskedLM.from_pretrained(
        tmp_path, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path)
    assert len(hf_tokenizer) == tokenizer.vocab_size == 2240
    text = "Marie Curie won the Nobel Prize in Physics."
    ids = hf_tokenizer(text, return_tensors="pt")["input_ids"]
    assert ids[0].tolist() == tokenizer.encode(text).input_ids
    with torch.no_grad():
        ours = dict(mix)["mlm"].head(encoder(ids).last_hidden_state)
        theirs = model.eval()(ids).logits
    assert (ours - theirs).abs().max().item() <= 1e-5


def test_a_bare_hf_export_warns_what_it_lacks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    encoder, _, _ = _model()
    with caplog.at_level(logging.WARNING):
        save_encoder(encoder, tmp_path, format="hf")
    assert "without pre-training heads or tokenizer files" in caplog.text
    assert "ptm export --format hf" in caplog.text


def test_encoder_save_pretrained_passes_heads_and_tokenizer_through(tmp_path: Path) -> None:
    encoder, mix, tokenizer = _model()
    encoder.save_pretrained(tmp_path, format="hf", tokenizer=tokenizer, heads=mix)
    model, info = transformers.AutoModelForMaskedLM.from_pretrained(
        tmp_path, output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert len(transformers.AutoTokenizer.from_pretrained(tmp_path)) == tokenizer.vocab_size
    ids = torch.tensor([tokenizer.encode("Marie Curie won the Nobel Prize.").input_ids])
    with torch.no_grad():
        ours = dict(mix)["mlm"].head(encoder(ids).last_hidden_state)
        theirs = model.eval()(ids).logits
    assert (ours - theirs).abs().max().item() <= 1e-5
