"""Encoder-decoder parity with transformers' BART on random-init weights, load and export."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ptm_core.checkpoints import CheckpointError
from ptm_core.checkpoints.hf.bart import hf_bart_to_ptm, hf_config_to_seq2seq
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel

transformers = pytest.importorskip("transformers")


def _hf_config() -> object:
    return transformers.BartConfig(
        vocab_size=97,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=40,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
    )


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 97, (2, 11), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    ids[1, 8:] = 1  # BART pad id
    decoder_ids = torch.randint(3, 97, (2, 7), generator=g)
    decoder_ids[:, 0] = 2
    return ids, mask, decoder_ids


def _randomise(model: torch.nn.Module) -> None:
    # LayerNorms and biases start at 1/0: perturb everything so the map is really checked.
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.add_(0.05 * torch.randn(tensor.shape, generator=g))


def _ptm_from_hf(hf_model: torch.nn.Module) -> EncoderDecoderModel:
    config = hf_config_to_seq2seq(hf_model.config.to_dict(), source="test")
    ours = EncoderDecoderModel(config).eval()
    state = hf_bart_to_ptm(dict(hf_model.state_dict()), config)
    from ptm_core.checkpoints import fill_shared_tensors

    ours.load_state_dict(fill_shared_tensors(ours, state))
    return ours


def test_bart_model_parity() -> None:
    torch.manual_seed(0)
    hf = transformers.BartModel(_hf_config()).eval()
    _randomise(hf)
    ours = _ptm_from_hf(hf)
    ids, mask, decoder_ids = _inputs()
    with torch.no_grad():
        expected = hf(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids)
        got = ours(ids, decoder_ids, attention_mask=mask)
    real = mask.bool()
    torch.testing.assert_close(
        got.encoder_hidden_state[real],
        expected.encoder_last_hidden_state[real],
        atol=1e-5,
        rtol=0,
    )
    torch.testing.assert_close(
        got.decoder_hidden_state, expected.last_hidden_state, atol=1e-5, rtol=0
    )


def test_bart_for_conditional_generation_parity_and_export(tmp_path: Path) -> None:
    torch.manual_seed(0)
    hf = transformers.BartForConditionalGeneration(_hf_config()).eval()
    _randomise(hf)
    ours = _ptm_from_hf(hf)
    ids, mask, decoder_ids = _inputs()
    with torch.no_grad():
        expected = hf(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids).logits
        got = ours(ids, decoder_ids, attention_mask=mask).logits
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)

    # HF directory -> ptm loader.
    hf.save_pretrained(tmp_path / "hf")
    loaded = EncoderDecoderModel.from_pretrained(tmp_path / "hf").eval()
    with torch.no_grad():
        torch.testing.assert_close(
            loaded(ids, decoder_ids, attention_mask=mask).logits, expected, atol=1e-5, rtol=0
        )
    # ptm -> HF export -> transformers loads it and agrees.
    ours.save_pretrained(tmp_path / "export", format="hf")
    back = transformers.BartForConditionalGeneration.from_pretrained(tmp_path / "export").eval()
    with torch.no_grad():
        again = back(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids).logits
    torch.testing.assert_close(again, expected, atol=1e-5, rtol=0)
    # ptm format round trip.
    ours.save_pretrained(tmp_path / "ptm")
    mine = EncoderDecoderModel.from_pretrained(tmp_path / "ptm").eval()
    with torch.no_grad():
        torch.testing.assert_close(
            mine(ids, decoder_ids, attention_mask=mask).logits, got, atol=0, rtol=0
        )


def test_missing_tensor_is_named(tmp_path: Path) -> None:
    hf = transformers.BartModel(_hf_config())
    state = dict(hf.state_dict())
    del state["decoder.layers.1.fc2.weight"]
    config = hf_config_to_seq2seq(hf.config.to_dict(), source="test")
    with pytest.raises(CheckpointError, match=r"decoder\.layers\.1\.fc2\.weight"):
        hf_bart_to_ptm(state, config)
