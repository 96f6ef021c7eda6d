"""The T5 layout of the encoder-decoder: parity with transformers' T5 on random-init weights,
bucketed position bias, KV-cache decoding, load and export."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from ptm_core.checkpoints import CheckpointError, fill_shared_tensors
from ptm_core.checkpoints.hf.t5 import hf_config_to_seq2seq, hf_t5_to_ptm
from ptm_core.encoders import EncoderConfig, TransformerEncoder, build_encoder_decoder
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.encoders.layers import standard_attention, standard_feed_forward, standard_norm
from ptm_core.modules.positions import RelativePositionBias, relative_position_bucket

transformers = pytest.importorskip("transformers")
VOCAB = 97


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _hf_config(**changes: object) -> Any:
    settings: dict[str, object] = {
        "vocab_size": VOCAB,
        "d_model": 32,
        "d_kv": 8,
        "num_heads": 4,
        "num_layers": 2,
        "num_decoder_layers": 2,
        "d_ff": 64,
        "relative_attention_num_buckets": 32,
        "relative_attention_max_distance": 128,
        "dropout_rate": 0.0,
        "decoder_start_token_id": 0,
    }
    settings.update(changes)
    return transformers.T5Config(**settings)


def _randomise(model: torch.nn.Module) -> None:
    # RMS norm weights start at 1: perturb every tensor so the name map is really checked.
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for tensor in model.state_dict().values():
            if tensor.is_floating_point():
                tensor.add_(0.05 * torch.randn(tensor.shape, generator=g))


def _hf_model(cls_name: str = "T5ForConditionalGeneration", **changes: object) -> Any:
    torch.manual_seed(0)
    model = getattr(transformers, cls_name)(_hf_config(**changes)).eval()
    _randomise(model)
    return model


def _ptm_from_hf(hf_model: Any) -> EncoderDecoderModel:
    config = hf_config_to_seq2seq(hf_model.config.to_dict(), source="test")
    ours = EncoderDecoderModel(config).eval()
    state = hf_t5_to_ptm(dict(hf_model.state_dict()), config)
    ours.load_state_dict(fill_shared_tensors(ours, state))
    return ours


def _any(value: str) -> Any:
    # A value outside a Literal field's type, as a user's config file could hold.
    return value


def _inputs(
    source_length: int = 11, target_length: int = 7
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(2, VOCAB, (2, source_length), generator=g)
    mask = torch.ones_like(ids)
    mask[1, source_length - 3 :] = 0
    ids[1, source_length - 3 :] = 0  # T5 pad id
    decoder_ids = torch.randint(2, VOCAB, (2, target_length), generator=g)
    decoder_ids[:, 0] = 0  # decoder start = pad
    return ids, mask, decoder_ids


@pytest.mark.parametrize(("num_buckets", "max_distance"), [(32, 128), (8, 20), (16, 16)])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_bucket_function_matches_transformers(
    num_buckets: int, max_distance: int, bidirectional: bool
) -> None:
    distances = torch.arange(-400, 401)
    expected = transformers.models.t5.modeling_t5.T5Attention._relative_position_bucket(
        distances, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    got = relative_position_bucket(
        distances, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert torch.equal(got, expected)
    assert int(got.min()) >= 0 and int(got.max()) < num_buckets
    # Exact small distances (half of each direction's buckets), then one shared bucket
    # from max_distance on.
    exact = num_buckets // 4 if bidirectional else num_buckets // 2
    assert len(set(got[400 - exact + 1 : 401].tolist())) == exact  # keys at/before the query
    assert int(got[400 - max_distance - 50]) == int(got[0])
    if bidirectional:
        assert len(set(got[400 : 400 + exact].tolist())) == exact
        assert int(got[400 + max_distance + 50]) == int(got[-1]) == num_buckets - 1
    else:
        assert set(got[401:].tolist()) == {0}  # future keys: bucket 0 (masked anyway)
        assert int(got[0]) == num_buckets - 1


def test_position_bias_of_a_cached_step_is_the_full_bias_rows() -> None:
    torch.manual_seed(0)
    bias = RelativePositionBias(4, 32, 128, bidirectional=False)
    full = bias(9, 9)  # (1, h, 9, 9)
    assert full.shape == (1, 4, 9, 9)
    torch.testing.assert_close(bias(3, 9, query_offset=6), full[:, :, 6:9])
    torch.testing.assert_close(bias(1, 5, query_offset=4), full[:, :, 4:5, :5])


@pytest.mark.parametrize(
    ("source_length", "target_length", "buckets"),
    [
        (11, 7, {}),
        (150, 140, {}),  # distances beyond max_distance=128: every bucket is used
        (40, 30, {"relative_attention_num_buckets": 8, "relative_attention_max_distance": 20}),
    ],
)
def test_t5_model_parity_with_padding(
    source_length: int, target_length: int, buckets: dict[str, Any]
) -> None:
    hf = _hf_model("T5Model", **buckets)
    ours = _ptm_from_hf(hf)
    assert ours.config.relative_attention_num_buckets == hf.config.relative_attention_num_buckets
    ids, mask, decoder_ids = _inputs(source_length, target_length)
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


@pytest.mark.parametrize(
    "variant",
    [{}, {"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False}],
    ids=["t5-v1.0", "t5-v1.1"],
)
def test_t5_for_conditional_generation_parity(variant: dict[str, Any]) -> None:
    hf = _hf_model(**variant)
    ours = _ptm_from_hf(hf)
    assert ours.config.scale_decoder_output == (not variant)
    ids, mask, decoder_ids = _inputs()
    with torch.no_grad():
        expected = hf(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids)
        got = ours(ids, decoder_ids, attention_mask=mask)
    # v1.1's untied head is not rescaled, so logits reach ~25: a one-ulp difference in the
    # last decoder state (~1e-6, which kernels on another CPU give) becomes ~1e-5 there.
    # The tolerance is 1e-5 plus 1e-6 of each logit's size (fp32 rounding grows with it).
    torch.testing.assert_close(got.logits, expected.logits, atol=1e-5, rtol=1e-6)
    assert float(got.logits.std()) > 0.1  # parity of non-trivial logits


def test_export_to_transformers_and_reload(tmp_path: Path) -> None:
    hf = _hf_model()
    ours = _ptm_from_hf(hf)
    ids, mask, decoder_ids = _inputs()
    with torch.no_grad():
        reference = ours(ids, decoder_ids, attention_mask=mask).logits
    ours.save_pretrained(tmp_path / "hf", format="hf")
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["model_type"] == "t5"
    back = transformers.T5ForConditionalGeneration.from_pretrained(tmp_path / "hf").eval()
    reloaded = EncoderDecoderModel.from_pretrained(tmp_path / "hf").eval()
    hf.save_pretrained(tmp_path / "from_hf")
    from_hf = EncoderDecoderModel.from_pretrained(tmp_path / "from_hf").eval()
    ours.save_pretrained(tmp_path / "ptm")
    native = EncoderDecoderModel.from_pretrained(tmp_path / "ptm").eval()
    with torch.no_grad():
        exported = back(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids).logits
        for model in (reloaded, from_hf, native):
            torch.testing.assert_close(
                model(ids, decoder_ids, attention_mask=mask).logits, reference, atol=1e-6, rtol=0
            )
    torch.testing.assert_close(exported, reference, atol=1e-5, rtol=0)
    assert native.config == ours.config


def test_untied_head_export_round_trip(tmp_path: Path) -> None:
    hf = _hf_model(feed_forward_proj="gated-gelu", tie_word_embeddings=False)
    ours = _ptm_from_hf(hf)
    with torch.no_grad():
        ours.lm_head.weight = torch.nn.Parameter(torch.randn_like(ours.lm_head.weight))
    ours.config.tie_lm_head = False
    ours.save_pretrained(tmp_path, format="hf-t5")
    back = EncoderDecoderModel.from_pretrained(tmp_path).eval()
    assert not back.config.tie_lm_head and back.config.gated_feed_forward
    hf_back = transformers.T5ForConditionalGeneration.from_pretrained(tmp_path).eval()
    ids, mask, decoder_ids = _inputs()
    with torch.no_grad():
        reference = ours(ids, decoder_ids, attention_mask=mask).logits
        torch.testing.assert_close(
            back(ids, decoder_ids, attention_mask=mask).logits, reference, atol=1e-6, rtol=0
        )
        hf_logits = hf_back(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids)
    torch.testing.assert_close(hf_logits.logits, reference, atol=1e-5, rtol=0)


def test_greedy_generate_with_cache_matches_transformers() -> None:
    hf = _hf_model()
    with torch.no_grad():
        # A small token table lets the layers, not the tied input embedding, pick the next
        # token, so greedy outputs vary along the sequence and between sources.
        hf.shared.weight.mul_(0.1)
    ours = _ptm_from_hf(hf)
    ids, mask, _ = _inputs()
    with torch.no_grad():
        expected = hf.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=12, do_sample=False, num_beams=1
        )
    assert expected[:, 0].tolist() == [0, 0]  # decoder start = pad
    expected_rows = expected[:, 1:].tolist()
    got = ours.generate(ids, mask, max_length=12, eos_token_id=-1)
    assert got == expected_rows
    assert got[0] != got[1] and len(set(got[0])) >= 3, got
    assert got == ours.generate(ids, mask, max_length=12, eos_token_id=-1, use_cache=False)
    # With an end token met by one row only: that row stops there, the other runs on.
    eos = got[0][3]
    with torch.no_grad():
        expected = hf.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=12,
            do_sample=False,
            num_beams=1,
            eos_token_id=eos,
        )
    rows = [r[: r.index(eos) + 1] if eos in r else r for r in expected[:, 1:].tolist()]
    assert ours.generate(ids, mask, max_length=12, eos_token_id=eos) == rows
    assert len(rows[0]) < len(rows[1]) or eos in rows[1]


def test_cached_step_logits_equal_full_recompute() -> None:
    ours = _ptm_from_hf(_hf_model())
    ids, mask, decoder_ids = _inputs()
    with torch.no_grad():
        memory = ours.encode(ids, mask).last_hidden_state
        _, full = ours.decode(decoder_ids, memory, mask)  # (B, T, V)
        cache = ours.init_decoder_cache(memory, mask)
        for t in range(3):  # one token at a time
            step, cache = ours.decode_step(decoder_ids[:, t : t + 1], cache)
            torch.testing.assert_close(step[:, 0], full[:, t], atol=1e-5, rtol=0)
        step, cache = ours.decode_step(decoder_ids[:, 3:], cache)  # the rest at once
    assert cache.length == decoder_ids.shape[1]
    torch.testing.assert_close(step, full[:, 3:], atol=1e-5, rtol=0)


def test_position_bias_tables_learn_and_positions_matter() -> None:
    torch.manual_seed(0)
    model = build_encoder_decoder(
        VOCAB,
        hidden_size=32,
        encoder_layers=2,
        decoder_layers=2,
        num_heads=4,
        intermediate_size=64,
        dropout=0.0,
        position_encoding="t5_buckets",
        norm_type="rmsnorm",
        layer_norm_eps=1e-6,
        norm_position="pre",
        bias=False,
        attention_scale=False,
        activation="relu",
        embedding_layer_norm=False,
        scale_decoder_output=True,
        position_offset=0,
        pad_token_id=0,
    )
    names = {name for name, _ in model.named_parameters()}
    assert not any("position.weight" in n or n.endswith(".bias") for n in names)
    ids, mask, decoder_ids = _inputs()
    out = model(ids, decoder_ids, attention_mask=mask)
    out.logits.square().mean().backward()
    for stack in (model.encoder, model.decoder):
        assert stack.relative_position_bias is not None
        grad = stack.relative_position_bias.embedding.weight.grad
        assert grad is not None and float(grad.abs().sum()) > 0
    # No position table: only the bias tells positions apart, so reversing the source
    # changes the encoder output beyond a permutation.
    with torch.no_grad():
        forward = model.encode(ids[:1]).last_hidden_state
        backward = model.encode(ids[:1].flip(1)).last_hidden_state.flip(1)
    assert not torch.allclose(forward, backward, atol=1e-4)


def test_t5_initialisation_scales() -> None:
    torch.manual_seed(0)
    d, heads, ffn = 64, 4, 128
    model = build_encoder_decoder(
        500,
        hidden_size=d,
        num_heads=heads,
        encoder_layers=1,
        decoder_layers=1,
        intermediate_size=ffn,
        position_encoding="t5_buckets",
        norm_type="rmsnorm",
        bias=False,
        attention_scale=False,
        initialization="t5",
    )
    encoder_layer: Any = model.encoder.layers[0]
    decoder_layer: Any = model.decoder.layers[0]
    bias_table: Any = model.decoder.relative_position_bias
    qkv = encoder_layer.attention.qkv_proj.weight
    expected = {
        "table": (model.encoder.embeddings.word.weight, 1.0),
        "query": (qkv[:d], (d * d // heads) ** -0.5),
        "key/value": (qkv[d:], d**-0.5),
        "cross key/value": (decoder_layer.cross_attention.kv_proj.weight, d**-0.5),
        "ffn out": (decoder_layer.feed_forward.w_out.weight, ffn**-0.5),
        "bias table": (bias_table.embedding.weight, d**-0.5),
    }
    for name, (weight, std) in expected.items():
        assert abs(float(weight.detach().std()) / std - 1) < 0.15, name
    assert model.lm_head.weight is model.encoder.embeddings.word.weight


def test_bucketed_encoder_keeps_the_other_encodings() -> None:
    config = EncoderConfig(
        vocab_size=50,
        hidden_size=16,
        num_layers=2,
        num_heads=2,
        intermediate_size=32,
        position_encoding="bucketed",
        norm_position="pre",
        type_vocab_size=0,
    )
    # T5's blocks are passed in; the shape knows nothing of them.
    encoder = TransformerEncoder(
        config,
        attention=lambda index: standard_attention(config, index, bias=False, scale=False),
        feed_forward=lambda: standard_feed_forward(config, bias=False),
        norm=lambda: standard_norm(config, "rmsnorm"),
    ).eval()
    assert encoder.embeddings.position is None and encoder.relative_position_bias is not None
    ids = torch.randint(0, 50, (2, 6))
    mask = torch.ones_like(ids)
    mask[0, 4:] = 0
    with torch.no_grad():
        out = encoder(ids, mask, output_attention_scores=True)
        plain = encoder(ids, mask)
    torch.testing.assert_close(out.last_hidden_state, plain.last_hidden_state)
    assert out.attention_scores is not None and out.attention_scores[0].shape == (2, 2, 6, 6)
    with pytest.raises(ValueError, match=r"'bucketed' \(T5\)"):
        EncoderConfig(position_encoding=_any("t5"))
    with pytest.raises(ValueError, match="unknown norm_type 'batchnorm'"):
        standard_norm(config, "batchnorm")
    with pytest.raises(ValueError, match="position_bias is T5's bucketed bias"):
        TransformerEncoder(
            EncoderConfig(**{**config.to_dict(), "position_encoding": "absolute"}),
            position_bias=lambda: RelativePositionBias(2, bidirectional=True),
        )


def test_export_of_other_layouts_and_wide_attention_is_refused(tmp_path: Path) -> None:
    bart_like = build_encoder_decoder(VOCAB, hidden_size=16, num_heads=2, encoder_layers=1)
    with pytest.raises(CheckpointError, match="position_encoding='learned'"):
        bart_like.save_pretrained(tmp_path / "x", format="hf-t5")
    assert not (tmp_path / "x").exists()
    t5_like = _ptm_from_hf(_hf_model())
    with pytest.raises(CheckpointError, match="BART export needs"):
        t5_like.save_pretrained(tmp_path / "y", format="hf-bart")
    assert not (tmp_path / "y").exists()
    with pytest.raises(ValueError, match="format must be one of"):
        t5_like.save_pretrained(tmp_path / "z", format="t5")
    with pytest.raises(CheckpointError, match="3B/11B"):
        hf_config_to_seq2seq(_hf_config(d_kv=16).to_dict(), source="wide")
    with pytest.raises(ValueError, match=r"Seq2SeqConfig\.position_encoding"):
        build_encoder_decoder(VOCAB, hidden_size=16, num_heads=2, position_encoding="rope")


def test_missing_tensor_is_named(tmp_path: Path) -> None:
    hf = _hf_model()
    hf.save_pretrained(tmp_path)
    from safetensors.torch import load_file, save_file

    state = load_file(tmp_path / "model.safetensors")
    del state["decoder.block.1.layer.1.EncDecAttention.k.weight"]
    save_file(state, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"EncDecAttention\.k\.weight"):
        EncoderDecoderModel.from_pretrained(tmp_path)
