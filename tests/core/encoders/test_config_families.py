"""EncoderConfig is the shape every family shares; old 27-key config.json files still load.

Before the cut every encoder's ``config.json`` held 27 keys: the shape plus T5's, XLNet's
and pruning's switches. Those files must load into the same model, bit for bit; a switch
that no longer has a place in the file's config class is refused by name.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from ptm_core.checkpoints import CheckpointError, unique_state, write_weights
from ptm_core.compress.prune import prune_heads
from ptm_core.compress.pruned import PrunedEncoderConfig
from ptm_core.encoders import (
    EncoderConfig,
    TransformerEncoder,
    XLNetConfig,
    XLNetEncoder,
    build_encoder_decoder,
    xlnet_encoder,
)
from ptm_core.encoders.config import LEGACY_SWITCHES, HFEncoderConfig
from ptm_core.encoders.presets import bert_encoder

SIZE = {"vocab_size": 60, "hidden_size": 32, "num_layers": 2, "num_heads": 4}
IDS = torch.tensor([[2, 10, 11, 12, 3, 0], [2, 20, 21, 3, 0, 0]])
MASK = IDS != 0

SHAPE = {
    "vocab_size",
    "hidden_size",
    "num_layers",
    "num_heads",
    "intermediate_size",
    "max_positions",
    "type_vocab_size",
    "dropout",
    "attention_dropout",
    "activation",
    "layer_norm_eps",
    "norm_position",
    "pad_token_id",
    "initializer_range",
    "embedding_size",
    "share_layers",
    "position_encoding",
    "embedding_layer_norm",
}


def _old_config_json(encoder: TransformerEncoder, **switches: Any) -> dict[str, Any]:
    """The 27 keys (plus bookkeeping) the code before the cut wrote for ``encoder``."""
    old = {name: default for name, (default, _) in LEGACY_SWITCHES.items()}
    return {
        "ptm_format": "ptm-encoder/1",
        "ptm_model": "xlnet" if isinstance(encoder, XLNetEncoder) else "encoder",
        **{k: v for k, v in encoder.config.to_dict().items() if k in SHAPE},
        **old,
        **switches,
    }


def _write_old_folder(path: Path, encoder: TransformerEncoder, config: dict[str, Any]) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_weights(unique_state(encoder), path / "model.safetensors")
    return path


def _same_outputs(a: TransformerEncoder, b: TransformerEncoder) -> bool:
    with torch.no_grad():
        return torch.equal(
            a.eval()(IDS, MASK).last_hidden_state, b.eval()(IDS, MASK).last_hidden_state
        )


def test_encoder_config_is_the_shared_shape() -> None:
    assert {f.name for f in dataclasses.fields(EncoderConfig)} == SHAPE
    assert {f.name for f in dataclasses.fields(XLNetConfig)} == SHAPE | {
        "segment_encoding",
        "memory_length",
    }
    assert {f.name for f in dataclasses.fields(PrunedEncoderConfig)} == SHAPE | {"heads_per_layer"}
    assert {f.name for f in dataclasses.fields(HFEncoderConfig)} == SHAPE | {"hf_model_type"}
    # New saves write the new shape: no paper switch the family does not own.
    assert set(bert_encoder(**SIZE).config.to_dict()) == SHAPE


def test_old_27_key_config_json_loads_into_the_same_model(tmp_path: Path) -> None:
    torch.manual_seed(0)
    bert = bert_encoder(**SIZE)
    old = _old_config_json(bert, heads_per_layer=None)
    assert len([k for k in old if not k.startswith("ptm_")]) == 27
    loaded = TransformerEncoder.from_pretrained(_write_old_folder(tmp_path / "bert", bert, old))
    assert type(loaded.config) is EncoderConfig and loaded.config == bert.config
    assert _same_outputs(loaded, bert)


def test_old_xlnet_config_json_loads_into_an_xlnet_config(tmp_path: Path) -> None:
    torch.manual_seed(0)
    xlnet = xlnet_encoder(**SIZE, memory_length=3)
    old = _old_config_json(xlnet, segment_encoding="relative", memory_length=3)
    loaded = TransformerEncoder.from_pretrained(_write_old_folder(tmp_path / "x", xlnet, old))
    assert type(loaded) is XLNetEncoder and type(loaded.config) is XLNetConfig
    assert loaded.config.memory_length == 3 and loaded.config.segment_encoding == "relative"
    assert loaded.config == xlnet.config
    assert _same_outputs(loaded, xlnet)


def test_old_pruned_config_json_loads_into_a_pruned_config(tmp_path: Path) -> None:
    torch.manual_seed(0)
    pruned = prune_heads(bert_encoder(**SIZE), {0: [1], 1: [0, 3]})
    assert isinstance(pruned.config, PrunedEncoderConfig)
    old = _old_config_json(pruned, heads_per_layer=[3, 2])
    loaded = TransformerEncoder.from_pretrained(_write_old_folder(tmp_path / "p", pruned, old))
    assert type(loaded.config) is PrunedEncoderConfig
    assert loaded.config.heads_per_layer == [3, 2]
    assert [layer.attention.num_heads for layer in loaded.layers] == [3, 2]
    assert _same_outputs(loaded, pruned)


@pytest.mark.parametrize(
    ("key", "value", "owner"),
    [
        ("norm_type", "rmsnorm", "T5Blocks"),
        ("bias", False, "T5Blocks"),
        ("attention_scale", False, "T5Blocks"),
        ("gated_feed_forward", True, "T5Blocks"),
        ("relative_attention_num_buckets", 16, "RelativeBuckets"),
        ("memory_length", 4, "XLNetConfig"),
    ],
)
def test_a_non_default_switch_without_a_place_is_refused(
    tmp_path: Path, key: str, value: object, owner: str
) -> None:
    bert = bert_encoder(**SIZE)
    old = _old_config_json(bert, **{key: value})
    folder = _write_old_folder(tmp_path / "f", bert, old)
    with pytest.raises(CheckpointError, match=rf"config\.json: {key}=.*belongs to .*{owner}"):
        TransformerEncoder.from_pretrained(folder)


def test_unknown_keys_are_still_refused() -> None:
    with pytest.raises(ValueError, match=r"c\.json: unknown encoder config field\(s\) \['rope'\]"):
        EncoderConfig.from_dict({"rope": True}, source="c.json")


def test_an_encoder_with_passed_in_blocks_is_saved_by_its_owner(tmp_path: Path) -> None:
    t5 = build_encoder_decoder(
        SIZE["vocab_size"],
        hidden_size=32,
        num_heads=4,
        encoder_layers=1,
        decoder_layers=1,
        position_encoding="t5_buckets",
        norm_type="rmsnorm",
        norm_position="pre",
        bias=False,
        attention_scale=False,
    )
    # Its config.json would rebuild BERT blocks (scaled attention, LayerNorms): refused.
    with pytest.raises(CheckpointError, match="save the owning model"):
        t5.encoder.save_pretrained(tmp_path / "half")
    assert not (tmp_path / "half").exists()
    bart = build_encoder_decoder(SIZE["vocab_size"], hidden_size=32, num_heads=4)
    bart.encoder.save_pretrained(tmp_path / "bart_half")  # BERT blocks: rebuildable
