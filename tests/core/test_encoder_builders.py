"""Family builders, encoder_from_config and XLNetEncoder against the former construction.

The fingerprints were taken from the encoders built before the builders existed (one
``TransformerEncoder`` class branching on ``position_encoding``), seed 0: same parameter
names and shapes (hashed), and a position-weighted sum of every tensor's values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping

import pytest
import torch
from torch import Tensor, nn

from ptm_core.encoders import (
    EncoderConfig,
    TransformerEncoder,
    TransformerSize,
    XLNetConfig,
    XLNetEncoder,
    albert_encoder,
    albert_tiny,
    bert_encoder,
    bert_mini,
    bert_tiny,
    build_layers,
    builders,
    electra_tiny,
    encoder_from_config,
    xlnet_encoder,
    xlnet_tiny,
)

SMALL = {"vocab_size": 100, "hidden_size": 32, "num_layers": 2, "num_heads": 2}


def fingerprint(state: Mapping[str, Tensor]) -> tuple[int, str, float]:
    """(tensor count, hash of names and shapes, position-weighted sum of the values)."""
    shapes = ";".join(f"{k}:{tuple(v.shape)}" for k, v in state.items())
    total = 0.0
    for index, tensor in enumerate(state.values()):
        if tensor.is_floating_point():
            flat = tensor.detach().double().flatten()
            weights = torch.linspace(1.0, 2.0, flat.numel(), dtype=torch.float64)
            total += (index + 1) * float((flat * weights).sum())
    return len(state), hashlib.sha256(shapes.encode()).hexdigest()[:16], total


# Built before the refactor, torch.manual_seed(0).
FORMER: dict[str, tuple[Callable[[], nn.Module], tuple[int, str, float]]] = {
    "bert_tiny": (bert_tiny, (29, "1b0db14875eb7688", 15392.580064527887)),
    "bert_mini": (bert_mini, (53, "1b79def6474219b7", 97592.34345455027)),
    "albert_tiny": (albert_tiny, (55, "60fa947c0b0b6da1", 51276.61268879097)),
    "electra_tiny": (electra_tiny, (31, "731936e1a840e4a9", 16924.799588144604)),
    "xlnet_tiny": (xlnet_tiny, (36, "be9e72ebe24bc025", 17843.434307701304)),
    "bert_pre": (
        lambda: bert_encoder(norm_position="pre", **SMALL),
        (31, "f15a1e3daf218aa9", 5228.489426470576),
    ),
    "albert_ffn": (
        lambda: albert_encoder(share_layers="ffn", embedding_size=16, **SMALL),
        (31, "53ea137b79bb71ed", 4237.331802741461),
    ),
    "xlnet_mem": (
        lambda: xlnet_encoder(memory_length=4, **SMALL),
        (36, "184e93be8ca426d9", 4626.2748127280975),
    ),
}


@pytest.mark.parametrize("name", sorted(FORMER))
def test_presets_build_the_former_weights(name: str) -> None:
    build, (count, shapes, total) = FORMER[name]
    torch.manual_seed(0)
    got = fingerprint(build().state_dict())
    assert got[:2] == (count, shapes)
    assert got[2] == pytest.approx(total, rel=1e-12)


def _xlnet_config(**numbers: int) -> XLNetConfig:
    """The config the former ``xlnet_encoder`` wrote, field by field."""
    return XLNetConfig(
        **numbers,
        intermediate_size=4 * numbers["hidden_size"],
        type_vocab_size=2,
        dropout=0.1,
        attention_dropout=0.1,
        norm_position="post",
        position_encoding="relative",
        segment_encoding="relative",
        embedding_layer_norm=False,
    )


# (builder call, the EncoderConfig the former code built for the same numbers)
CASES: dict[str, tuple[Callable[[], nn.Module], EncoderConfig]] = {
    "bert": (
        lambda: builders.bert(TransformerSize(**SMALL)),
        EncoderConfig(**SMALL, intermediate_size=128),
    ),
    "bert_xlm": (
        lambda: builders.bert(TransformerSize(**SMALL, pad_token_id=2), type_vocab_size=0),
        EncoderConfig(**SMALL, intermediate_size=128, type_vocab_size=0, pad_token_id=2),
    ),
    "albert": (
        lambda: builders.albert(TransformerSize(**SMALL), embedding_size=16),
        EncoderConfig(**SMALL, intermediate_size=128, embedding_size=16, share_layers="all"),
    ),
    "electra": (
        lambda: builders.electra(TransformerSize(**SMALL, intermediate_size=48), embedding_size=8),
        EncoderConfig(**SMALL, intermediate_size=48, embedding_size=8),
    ),
    "xlnet": (
        lambda: builders.xlnet(TransformerSize(**SMALL)),
        _xlnet_config(**SMALL),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_builder_equals_the_config_construction(name: str) -> None:
    build, config = CASES[name]
    torch.manual_seed(3)
    built = build().eval()
    torch.manual_seed(3)
    direct = encoder_from_config(config).eval()  # from the numbers alone, for every family
    assert type(built) is type(direct) is encoder_from_config(config).__class__
    assert built.config == config
    assert built.config.to_dict() == config.to_dict()
    a, b = built.state_dict(), direct.state_dict()
    assert [(k, v.shape) for k, v in a.items()] == [(k, v.shape) for k, v in b.items()]
    assert all(torch.equal(a[k], b[k]) for k in a)
    ids = torch.randint(1, 100, (2, 6))
    with torch.no_grad():
        assert torch.equal(built(ids).last_hidden_state, direct(ids).last_hidden_state)


def test_encoder_from_config_picks_the_class() -> None:
    absolute = EncoderConfig(**SMALL, intermediate_size=64)
    bucketed = EncoderConfig(**SMALL, intermediate_size=64, position_encoding="bucketed")
    relative = _xlnet_config(**SMALL)
    assert type(encoder_from_config(absolute)) is TransformerEncoder
    assert type(encoder_from_config(bucketed)) is TransformerEncoder
    xlnet = encoder_from_config(relative)
    assert type(xlnet) is XLNetEncoder
    assert isinstance(xlnet, TransformerEncoder)  # type hints and checks stay valid
    assert xlnet.hidden_size == 32 and xlnet.word_embeddings is xlnet.embeddings.word
    # The absolute-position class does not branch into the relative path: it refuses.
    with pytest.raises(ValueError, match="encoder_from_config"):
        TransformerEncoder(relative)


def test_transformer_encoder_has_no_relative_path() -> None:
    encoder = builders.bert(TransformerSize(**SMALL))
    assert not hasattr(encoder, "query_embedding")
    with pytest.raises(ValueError, match="XLNetEncoder"):
        encoder(torch.tensor([[1, 2, 3]]), memory=[torch.zeros(1, 2, 32)] * 2)
    with pytest.raises(ValueError, match="position_encoding='relative'"):
        XLNetEncoder(EncoderConfig(**SMALL, intermediate_size=64))
    with pytest.raises(ValueError, match="attention block passed in"):
        build_layers(_xlnet_config(**SMALL))


def test_xlnet_encoder_round_trips_its_config_json(tmp_path) -> None:
    torch.manual_seed(0)
    encoder = xlnet_tiny().eval()
    encoder.save_pretrained(tmp_path / "x")
    loaded = TransformerEncoder.from_pretrained(tmp_path / "x").eval()
    assert type(loaded) is XLNetEncoder
    assert loaded.config == encoder.config
    ids = torch.randint(1, 100, (1, 5))
    with torch.no_grad():
        assert torch.equal(loaded(ids).last_hidden_state, encoder(ids).last_hidden_state)


def test_transformer_size_pick_takes_only_size_names() -> None:
    size = TransformerSize.pick({"hidden_size": 64, "num_heads": 4, "spec": None}, dropout=0.0)
    assert size == TransformerSize(hidden_size=64, num_heads=4, dropout=0.0)
    assert size.config().intermediate_size == 256
