"""ALBERT switches: factorised embeddings, cross-layer sharing, the explicit attention path,
and the albert_tiny preset (MLM + SOP) training with a falling loss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ptm_core import EncoderConfig, TransformerEncoder, bert_encoder
from ptm_core.encoders import albert_encoder
from ptm_core.heads import MaskedLMHead
from ptm_core.modules import causal_mask
from ptm_core.modules.execution import ExecutionSettings, apply_execution_settings


def _count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())  # shared parameters counted once


def _albert(share: str = "all", **kw: object) -> TransformerEncoder:
    values: dict[str, object] = dict(
        vocab_size=50,
        embedding_size=8,
        hidden_size=32,
        num_layers=3,
        num_heads=2,
        max_positions=20,
        share_layers=share,
    )
    values.update(kw)
    return albert_encoder(**values)  # type: ignore[arg-type]


def test_factorised_embeddings_are_v_by_e_then_projected() -> None:
    encoder = _albert(share="none")
    assert tuple(encoder.word_embeddings.weight.shape) == (50, 8)
    assert encoder.embedding_projection is not None
    assert tuple(encoder.embedding_projection.weight.shape) == (32, 8)
    out = encoder(torch.tensor([[2, 7, 9, 3]]), output_hidden_states=True)
    assert out.last_hidden_state.shape == (1, 4, 32)
    assert out.hidden_states is not None and out.hidden_states[0].shape == (1, 4, 32)
    # The MLM head tied to the V x E table decodes from E.
    head = MaskedLMHead(32, 50, tie_to=encoder.word_embeddings)
    assert head.decoder.weight is encoder.word_embeddings.weight
    assert head(out.last_hidden_state).shape == (1, 4, 50)


def test_bert_defaults_have_no_projection_and_no_sharing() -> None:
    encoder = bert_encoder(vocab_size=50, hidden_size=32, num_layers=2, num_heads=2)
    assert encoder.embedding_projection is None
    assert not any("embedding_projection" in k for k in encoder.state_dict())
    assert len({id(layer) for layer in encoder.layers}) == 2


@pytest.mark.parametrize(
    ("share", "shared_attention", "shared_ffn"),
    [("none", False, False), ("all", True, True), ("attention", True, False), ("ffn", False, True)],
)
def test_cross_layer_sharing(share: str, shared_attention: bool, shared_ffn: bool) -> None:
    encoder = _albert(share=share)
    layers = list(encoder.layers)
    assert len(layers) == 3
    assert (len({id(layer.attention) for layer in layers}) == 1) == shared_attention
    assert (len({id(layer.feed_forward) for layer in layers}) == 1) == shared_ffn
    unshared = _count(_albert(share="none"))
    attention = _count(layers[0].attention)
    ffn = _count(layers[0].feed_forward)
    saved = 2 * (attention * shared_attention + ffn * shared_ffn)
    if share == "all":  # the LayerNorms are shared too
        saved = (
            unshared
            - _count(encoder.embeddings)
            - _count(encoder.embedding_projection)
            - (_count(layers[0]))
        )
    assert _count(encoder) == unshared - saved
    # One optimiser step changes every use of a shared block identically.
    out = encoder(torch.tensor([[2, 7, 9, 3]])).last_hidden_state
    out.sum().backward()
    if shared_attention:
        assert layers[0].attention.qkv_proj.weight is layers[2].attention.qkv_proj.weight


def test_old_config_json_without_the_new_fields_loads(tmp_path: Path) -> None:
    encoder = bert_encoder(vocab_size=50, hidden_size=32, num_layers=2, num_heads=2)
    encoder.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    del config["embedding_size"], config["share_layers"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    again = TransformerEncoder.from_pretrained(tmp_path)
    assert again.config.embedding_size is None and again.config.share_layers == "none"


def test_bad_switches_name_the_field() -> None:
    with pytest.raises(ValueError, match="share_layers"):
        EncoderConfig(share_layers="some")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="embedding_size"):
        EncoderConfig(embedding_size=0)


@pytest.mark.parametrize("mask_kind", ["padding", "visibility"])
def test_explicit_attention_path_matches_sdpa_and_returns_scores(mask_kind: str) -> None:
    torch.manual_seed(0)
    encoder = _albert(share="none", num_layers=2).eval()
    apply_execution_settings(
        encoder, ExecutionSettings(unpadding="off")
    )  # the padded SDPA path against the explicit one
    ids = torch.randint(5, 50, (2, 7))
    if mask_kind == "padding":
        mask = torch.ones(2, 7, dtype=torch.long)
        mask[1, 4:] = 0
    else:
        mask = causal_mask(7).expand(2, 7, 7)
    with torch.no_grad():
        fast = encoder(ids, mask)
        explicit = encoder(ids, mask, output_attention_scores=True)
    assert fast.attention_scores is None
    diff = (fast.last_hidden_state - explicit.last_hidden_state).abs().max().item()
    assert diff <= 1e-5
    assert explicit.attention_scores is not None and len(explicit.attention_scores) == 2
    scores = explicit.attention_scores[0]
    assert scores.shape == (2, 2, 7, 7)
    hidden = torch.finfo(scores.dtype).min
    if mask_kind == "padding":
        assert (scores[1, :, :, 4:] == hidden).all() and (scores[0] > hidden).all()
    else:
        assert (scores[:, :, 0, 1:] == hidden).all() and (scores[:, :, -1] > hidden).all()


CORPUS = (
    Path(__file__).resolve().parents[2] / "data_specs" / "text_corpus" / "sample" / "corpus.txt"
)


def run_preset(name: str, tmp_path: Path, *overrides: str) -> list[dict]:
    """Run ``ptm pretrain experiment=NAME`` briefly; return the metric records."""
    from flows.config import compose_config
    from flows.runner import run_composed

    cfg = compose_config(
        [
            f"experiment={name}",
            "trainer.max_steps=30",
            "trainer.log_every=1",
            "trainer.save_every=1000",
            "trainer.warmup_ratio=0.1",
            "trainer.progress=false",
            "trainer.device=cpu",
            "data.max_length=32",
            "data.batch_size=8",
            f"trainer.output_dir={tmp_path}",
            *overrides,
        ]
    )
    result = run_composed(cfg)
    return [json.loads(line) for line in Path(result.metrics_path).read_text().splitlines()]


def test_albert_tiny_preset_loss_falls(tmp_path: Path) -> None:
    records = run_preset(
        "albert_tiny", tmp_path, "model.hidden_size=64", "model.intermediate_size=128"
    )
    losses = [r["loss"] for r in records]
    assert len(losses) == 30
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5
    assert {"mlm/loss", "sop/loss", "sop/accuracy"} <= set(records[-1])
    encoder = TransformerEncoder.from_pretrained(tmp_path / "final")
    assert encoder.config.share_layers == "all" and encoder.config.embedding_size == 32
