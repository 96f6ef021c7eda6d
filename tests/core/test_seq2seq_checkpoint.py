"""ptm's encoder-decoder format: the ``"ptm_model"`` kind, configs written before it, and
the model's thin save/load entry points (no checkpoint code in the model modules)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import torch

import ptm_core.encoders.encoder_decoder as encoder_decoder_module
import ptm_core.encoders.encoder_decoder_config as config_module
import ptm_core.encoders.generation as generation_module
from ptm_core.checkpoints import CheckpointError
from ptm_core.checkpoints.seq2seq_ptm import is_ptm_seq2seq_config
from ptm_core.encoders import EncoderDecoderModel, Seq2SeqConfig, build_encoder_decoder
from ptm_core.model_kinds import ENCODER_DECODER, KIND_KEY, read_model_kind


def _model(**kwargs: object) -> EncoderDecoderModel:
    torch.manual_seed(0)
    options = {
        "hidden_size": 16,
        "encoder_layers": 1,
        "decoder_layers": 1,
        "num_heads": 2,
        "max_positions": 24,
        "dropout": 0.0,
        "pad_token_id": 0,
        "eos_token_id": 3,
        "decoder_start_token_id": 2,
        **kwargs,
    }
    return build_encoder_decoder(40, **options).eval()  # type: ignore[arg-type]


def _same_weights(a: EncoderDecoderModel, b: EncoderDecoderModel) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for name in sa:
        torch.testing.assert_close(sa[name], sb[name], rtol=0, atol=0, msg=name)


@pytest.mark.parametrize("layout", ["bart", "t5"])
def test_save_writes_kind_and_reloads(layout: str, tmp_path: Path) -> None:
    t5 = {"position_encoding": "t5_buckets", "norm_type": "rmsnorm", "bias": False}
    model = _model(**(t5 if layout == "t5" else {}))
    model.save_pretrained(tmp_path / "m")
    assert read_model_kind(tmp_path / "m") == ENCODER_DECODER
    raw = json.loads((tmp_path / "m" / "config.json").read_text())
    assert raw[KIND_KEY] == ENCODER_DECODER
    loaded = EncoderDecoderModel.from_pretrained(tmp_path / "m")
    assert loaded.config == model.config
    _same_weights(model, loaded)


def test_old_config_without_kind_loads(tmp_path: Path) -> None:
    model = _model()
    model.save_pretrained(tmp_path / "m")
    path = tmp_path / "m" / "config.json"
    raw = json.loads(path.read_text())
    del raw[KIND_KEY]
    path.write_text(json.dumps(raw, indent=2, sort_keys=True) + "\n")
    assert read_model_kind(tmp_path / "m") is None
    loaded = EncoderDecoderModel.from_pretrained(tmp_path / "m", dropout=0.0)
    assert loaded.config == model.config
    _same_weights(model, loaded)
    src = torch.tensor([[5, 6, 7, 8]])
    assert loaded.generate(src, max_length=5) == model.generate(src, max_length=5)


def test_config_accepts_kind_key() -> None:
    config = Seq2SeqConfig(vocab_size=40, hidden_size=16, num_heads=2)
    data = {KIND_KEY: ENCODER_DECODER, **config.to_dict()}
    assert Seq2SeqConfig.from_dict(data) == config
    assert is_ptm_seq2seq_config(data)
    assert is_ptm_seq2seq_config(config.to_dict())  # written before the key existed
    assert not is_ptm_seq2seq_config({**config.to_dict(), KIND_KEY: "encoder"})
    assert not is_ptm_seq2seq_config({"model_type": "bert", "vocab_size": 40})
    assert not is_ptm_seq2seq_config({"vocab_size": 40, "num_layers": 2})  # an encoder


def test_foreign_config_is_refused(tmp_path: Path) -> None:
    model = _model()
    model.save_pretrained(tmp_path / "m")
    path = tmp_path / "m" / "config.json"
    raw = json.loads(path.read_text())
    path.write_text(json.dumps({**raw, KIND_KEY: "encoder"}))
    with pytest.raises(CheckpointError, match="neither a ptm encoder-decoder"):
        EncoderDecoderModel.from_pretrained(tmp_path / "m")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"no config\.json"):
        EncoderDecoderModel.from_pretrained(tmp_path / "empty")


@pytest.mark.parametrize("module", [encoder_decoder_module, config_module, generation_module])
def test_model_modules_import_no_checkpoint_code(module: object) -> None:
    # Checkpoints sit above models: the model reaches its format through the registry only.
    tree = ast.parse(Path(module.__file__).read_text())  # type: ignore[attr-defined]
    names = [
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    ] + [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    ]
    checkpoint = [n for n in names if n.startswith(("ptm_core.checkpoints", "ptm_core.atomic"))]
    assert checkpoint in ([], ["ptm_core.checkpoints.registry"]), checkpoint
