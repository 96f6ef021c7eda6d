"""An XLM save says "ptm_model": "xlm"; an XLM directory written before the key loads."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ptm_core.encoders import EncoderConfig, TransformerEncoder
from ptm_core.model_kinds import KIND_KEY, read_model_kind
from ptm_multilingual.kinds import XLM
from ptm_multilingual.model import XLMEncoder


def _tiny() -> TransformerEncoder:
    torch.manual_seed(0)
    config = EncoderConfig(
        vocab_size=50,
        hidden_size=16,
        num_layers=2,
        num_heads=2,
        intermediate_size=32,
        max_positions=16,
    )
    return TransformerEncoder(config)


def _same(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for name in sa:
        torch.testing.assert_close(sa[name], sb[name], rtol=0, atol=0)


def test_xlm_save_writes_kind_and_old_config_loads(tmp_path: Path) -> None:
    model = XLMEncoder(_tiny(), ["de", "en"]).eval()
    model.save_pretrained(tmp_path)
    assert read_model_kind(tmp_path) == XLM
    _same(model, XLMEncoder.from_pretrained(tmp_path))
    path = tmp_path / "config.json"
    raw = json.loads(path.read_text())
    raw.pop(KIND_KEY)
    path.write_text(json.dumps(raw))
    assert read_model_kind(tmp_path) is None
    loaded = XLMEncoder.from_pretrained(tmp_path)
    assert loaded.languages == ["de", "en"]
    _same(model, loaded)
