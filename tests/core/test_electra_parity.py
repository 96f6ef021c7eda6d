"""Parity with Hugging Face ELECTRA: ElectraModel and ElectraForPreTraining logits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import ElectraConfig, ElectraForPreTraining, ElectraModel

from ptm_core import TransformerEncoder
from ptm_core.checkpoints.hf import electra as hf_electra
from ptm_core.encoders import electra_encoder
from ptm_core.heads import TokenDiscriminatorHead

ATOL = 1e-5
VOCAB = 97


def _config(embedding_size: int = 16) -> ElectraConfig:
    return ElectraConfig(
        vocab_size=VOCAB,
        embedding_size=embedding_size,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=40,
    )


def _randomise_norms(model: torch.nn.Module) -> None:
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "LayerNorm" in name:
                param.normal_(1.0 if name.endswith("weight") else 0.0, 0.2)


def _batch() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    input_ids = torch.randint(5, VOCAB, (3, 12), generator=gen)
    attention_mask = torch.ones(3, 12, dtype=torch.long)
    attention_mask[1, 8:] = 0
    input_ids[attention_mask == 0] = 0
    token_type_ids = torch.zeros(3, 12, dtype=torch.long)
    token_type_ids[:, 6:] = 1
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "token_type_ids": token_type_ids,
    }


def _max_diff(a: torch.Tensor, b: torch.Tensor, real: torch.Tensor) -> float:
    return (a - b)[real].abs().max().item()


@pytest.mark.parametrize("embedding_size", [16, 64])  # factorised, and E == D (no projection)
def test_electra_model_loads_and_matches(tmp_path: Path, embedding_size: int) -> None:
    torch.manual_seed(1)
    hf = ElectraModel(_config(embedding_size)).eval()
    _randomise_norms(hf)
    hf.save_pretrained(tmp_path / "hf")
    ours = TransformerEncoder.from_pretrained(tmp_path / "hf").eval()
    assert (ours.embedding_projection is not None) == (embedding_size != 64)
    batch = _batch()
    with torch.no_grad():
        out = ours(**batch, output_hidden_states=True)
        ref = hf(**batch, output_hidden_states=True)
    real = batch["attention_mask"].bool()
    assert out.hidden_states is not None
    for layer, (a, b) in enumerate(zip(out.hidden_states, ref.hidden_states, strict=True)):
        assert _max_diff(a, b, real) <= ATOL, f"hidden state {layer}"


def test_electra_for_pretraining_discriminator_logits_match(tmp_path: Path) -> None:
    torch.manual_seed(2)
    hf = ElectraForPreTraining(_config()).eval()
    _randomise_norms(hf)
    hf.save_pretrained(tmp_path / "hf")
    ours = TransformerEncoder.from_pretrained(tmp_path / "hf").eval()
    head = TokenDiscriminatorHead(ours.config.hidden_size, activation=ours.config.activation)
    hf_electra.load_discriminator_head(tmp_path / "hf", head)
    batch = _batch()
    with torch.no_grad():
        logits = head(ours(**batch).last_hidden_state)
        ref = hf(**batch).logits
    assert _max_diff(logits, ref, batch["attention_mask"].bool()) <= ATOL


def test_export_loads_in_transformers_with_head(tmp_path: Path) -> None:
    torch.manual_seed(3)
    ours = electra_encoder(
        vocab_size=VOCAB,
        embedding_size=16,
        hidden_size=64,
        num_layers=2,
        num_heads=4,
        max_positions=40,
    ).eval()
    _randomise_norms(ours)
    head = TokenDiscriminatorHead(64)
    ours.save_pretrained(tmp_path / "hf", format="hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["model_type"] == "electra" and config["embedding_size"] == 16
    base = ElectraModel.from_pretrained(tmp_path / "hf").eval()
    full = ElectraForPreTraining(base.config).eval()
    missing, unexpected = full.load_state_dict(
        {
            **{f"electra.{k}": v for k, v in base.state_dict().items()},
            **hf_electra.discriminator_head_to_hf(head),
        },
        strict=False,
    )
    assert not missing and not unexpected
    batch = _batch()
    with torch.no_grad():
        hidden = ours(**batch).last_hidden_state
        real = batch["attention_mask"].bool()
        assert _max_diff(hidden, base(**batch).last_hidden_state, real) <= ATOL
        assert _max_diff(head(hidden), full(**batch).logits, real) <= ATOL
