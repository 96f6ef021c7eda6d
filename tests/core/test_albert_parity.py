"""Parity with Hugging Face ALBERT: AlbertModel and AlbertForPreTraining (MLM + SOP logits)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AlbertConfig, AlbertForPreTraining, AlbertModel

from ptm_core import CheckpointError, TransformerEncoder
from ptm_core.checkpoints.hf import albert as hf_albert
from ptm_core.encoders import albert_encoder
from ptm_core.heads import MaskedLMHead, Pooler, SentencePairHead

ATOL = 1e-5
VOCAB = 97


def _config(**overrides: object) -> AlbertConfig:
    values: dict[str, object] = dict(
        vocab_size=VOCAB,
        embedding_size=16,
        hidden_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=40,
        hidden_act="gelu_new",
    )
    values.update(overrides)
    return AlbertConfig(**values)


def _randomise_norms(model: torch.nn.Module) -> None:
    # Random LayerNorm parameters, so a swapped or skipped norm cannot match by accident.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name:
                param.normal_(1.0 if name.endswith("weight") else 0.0, 0.2)


def _batch() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    input_ids = torch.randint(5, VOCAB, (3, 12), generator=gen)
    attention_mask = torch.ones(3, 12, dtype=torch.long)
    attention_mask[1, 8:] = 0
    attention_mask[2, 5:] = 0
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


def _ptm_heads(encoder: TransformerEncoder) -> tuple[MaskedLMHead, SentencePairHead]:
    config = encoder.config
    mlm = MaskedLMHead(
        config.hidden_size,
        config.vocab_size,
        activation=config.activation,
        layer_norm_eps=config.layer_norm_eps,
        tie_to=encoder.word_embeddings,
    )
    sop = SentencePairHead(config.hidden_size, pooler=Pooler(config.hidden_size))
    return mlm, sop


def test_albert_model_loads_and_matches_every_hidden_state(tmp_path: Path) -> None:
    torch.manual_seed(1)
    hf = AlbertModel(_config(), add_pooling_layer=True).eval()
    _randomise_norms(hf)
    hf.save_pretrained(tmp_path / "hf")
    ours = TransformerEncoder.from_pretrained(tmp_path / "hf").eval()
    assert ours.config.share_layers == "all" and ours.config.embedding_size == 16
    # One set of layer weights: 3 layer slots, one module.
    assert len({id(layer) for layer in ours.layers}) == 1
    batch = _batch()
    with torch.no_grad():
        out = ours(**batch, output_hidden_states=True)
        ref = hf(**batch, output_hidden_states=True)
    real = batch["attention_mask"].bool()
    assert out.hidden_states is not None and len(out.hidden_states) == 4
    for layer, (a, b) in enumerate(zip(out.hidden_states, ref.hidden_states, strict=True)):
        assert _max_diff(a, b, real) <= ATOL, f"hidden state {layer}"
    assert _max_diff(out.last_hidden_state, ref.last_hidden_state, real) <= ATOL


def test_albert_for_pretraining_mlm_and_sop_logits_match(tmp_path: Path) -> None:
    torch.manual_seed(2)
    hf = AlbertForPreTraining(_config()).eval()
    _randomise_norms(hf)
    hf.save_pretrained(tmp_path / "hf")
    ours = TransformerEncoder.from_pretrained(tmp_path / "hf").eval()
    mlm, sop = _ptm_heads(ours)
    hf_albert.load_pretraining_heads(tmp_path / "hf", mlm, sop)
    batch = _batch()
    with torch.no_grad():
        hidden = ours(**batch).last_hidden_state
        ref = hf(**batch)
    real = batch["attention_mask"].bool()
    assert _max_diff(mlm(hidden), ref.prediction_logits, real) <= ATOL
    assert (sop(hidden) - ref.sop_logits).abs().max().item() <= ATOL


def test_export_loads_in_transformers_and_matches(tmp_path: Path) -> None:
    torch.manual_seed(4)
    ours = albert_encoder(
        vocab_size=VOCAB,
        embedding_size=16,
        hidden_size=64,
        num_layers=3,
        num_heads=4,
        intermediate_size=128,
        max_positions=40,
    ).eval()
    _randomise_norms(ours)
    ours.save_pretrained(tmp_path / "hf", format="hf")
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["model_type"] == "albert"
    hf = AlbertModel.from_pretrained(tmp_path / "hf").eval()
    batch = _batch()
    with torch.no_grad():
        a = ours(**batch).last_hidden_state
        b = hf(**batch).last_hidden_state
    assert _max_diff(a, b, batch["attention_mask"].bool()) <= ATOL


def test_heads_export_round_trips_through_albert_for_pretraining(tmp_path: Path) -> None:
    torch.manual_seed(5)
    ours = albert_encoder(
        vocab_size=VOCAB,
        embedding_size=16,
        hidden_size=64,
        num_layers=2,
        num_heads=4,
        intermediate_size=128,
        max_positions=40,
    ).eval()
    mlm, sop = _ptm_heads(ours)
    _randomise_norms(mlm)
    ours.save_pretrained(tmp_path / "enc", format="hf")
    hf = AlbertForPreTraining(AlbertConfig.from_pretrained(tmp_path / "enc")).eval()
    from safetensors.torch import load_file

    state = {f"albert.{k}": v for k, v in load_file(tmp_path / "enc" / "model.safetensors").items()}
    heads = hf_albert.heads_to_hf(mlm, sop)
    state.update({("albert." + k if k.startswith("pooler.") else k): v for k, v in heads.items()})
    missing, unexpected = hf.load_state_dict(state, strict=False)
    assert not unexpected and set(missing) <= {"predictions.decoder.weight"}
    batch = _batch()
    with torch.no_grad():
        hidden = ours(**batch).last_hidden_state
        ref = hf(**batch)
    real = batch["attention_mask"].bool()
    assert _max_diff(mlm(hidden), ref.prediction_logits, real) <= ATOL
    assert (sop(hidden) - ref.sop_logits).abs().max().item() <= ATOL


def test_ptm_format_stores_a_shared_layer_once_and_reloads(tmp_path: Path) -> None:
    for sharing in ("all", "attention", "ffn"):
        torch.manual_seed(6)
        ours = albert_encoder(
            vocab_size=VOCAB,
            embedding_size=16,
            hidden_size=32,
            num_layers=3,
            num_heads=2,
            max_positions=40,
            share_layers=sharing,
        ).eval()
        ours.save_pretrained(tmp_path / sharing)
        from safetensors.torch import load_file

        stored = load_file(tmp_path / sharing / "model.safetensors")
        assert len(stored) < len(ours.state_dict())
        again = TransformerEncoder.from_pretrained(tmp_path / sharing).eval()
        batch = _batch()
        with torch.no_grad():
            same = ours(**batch).last_hidden_state - again(**batch).last_hidden_state
        assert same.abs().max().item() == 0.0


def test_unsupported_albert_layouts_raise(tmp_path: Path) -> None:
    hf = AlbertModel(_config(num_hidden_groups=3))
    hf.save_pretrained(tmp_path / "groups")
    with pytest.raises(CheckpointError, match="num_hidden_groups"):
        TransformerEncoder.from_pretrained(tmp_path / "groups")
    partial = albert_encoder(
        vocab_size=VOCAB,
        embedding_size=16,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        max_positions=40,
        share_layers="attention",
    )
    with pytest.raises(CheckpointError, match="format='ptm'"):
        partial.save_pretrained(tmp_path / "out", format="hf")
