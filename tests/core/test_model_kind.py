"""Every saved ptm-format config.json says its "ptm_model"; old ones without it still load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ptm_core.checkpoints import registry
from ptm_core.encoders import EncoderConfig, TransformerEncoder
from ptm_core.model_kinds import ENCODER, KIND_KEY, XLNET, read_model_kind


def _tiny(**fields: object) -> TransformerEncoder:
    torch.manual_seed(0)
    config = EncoderConfig(
        vocab_size=50,
        hidden_size=16,
        num_layers=2,
        num_heads=2,
        intermediate_size=32,
        max_positions=16,
        **fields,  # type: ignore[arg-type]
    )
    return TransformerEncoder(config).eval()


def _drop_kind(directory: Path) -> None:
    path = directory / "config.json"
    raw = json.loads(path.read_text())
    raw.pop(KIND_KEY)
    path.write_text(json.dumps(raw))


def _same(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for name in sa:
        torch.testing.assert_close(sa[name], sb[name], rtol=0, atol=0)


def test_encoder_save_writes_kind_and_old_config_loads(tmp_path: Path) -> None:
    encoder = _tiny()
    encoder.save_pretrained(tmp_path / "new")
    assert read_model_kind(tmp_path / "new") == ENCODER
    _same(encoder, TransformerEncoder.from_pretrained(tmp_path / "new"))
    encoder.save_pretrained(tmp_path / "old")
    _drop_kind(tmp_path / "old")
    assert read_model_kind(tmp_path / "old") is None
    _same(encoder, TransformerEncoder.from_pretrained(tmp_path / "old"))


def test_relative_encoder_is_saved_as_xlnet(tmp_path: Path) -> None:
    from ptm_core.encoders import xlnet_tiny

    torch.manual_seed(0)
    encoder = xlnet_tiny().eval()
    encoder.save_pretrained(tmp_path)
    assert read_model_kind(tmp_path) == XLNET
    _same(encoder, TransformerEncoder.from_pretrained(tmp_path))


def test_registry_names_functions_not_modules() -> None:
    with pytest.raises(ValueError, match="module:function"):
        registry.register(ENCODER, load="ptm_core.checkpoints.encoder.load_encoder")
    with pytest.raises(ValueError, match="unknown model kind"):
        registry.register("nope", load="a:b")
    assert registry.loader(ENCODER).__name__ == "load_encoder"
    assert set(registry.hf_encoder_families()) >= {"bert", "albert", "electra", "xlnet"}
