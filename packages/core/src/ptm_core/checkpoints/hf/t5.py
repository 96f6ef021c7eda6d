"""Hugging Face T5 (``T5Model`` / ``T5ForConditionalGeneration``) <-> ptm encoder-decoder.

T5 (Raffel et al., 2020) is :class:`~ptm_core.encoders.EncoderDecoderModel` with the T5
switches of :class:`~ptm_core.encoders.Seq2SeqConfig` (bucketed relative position bias,
RMS norms, no biases, no attention scaling). Name map (``T5Model`` has the same names
without ``lm_head``):

=====================================================  ====================================
Hugging Face                                           ptm
=====================================================  ====================================
``shared.weight``                                      ``encoder.embeddings.word.weight``
``{s}.block.0.layer.0.SelfAttention.relative_``        ``{s}.relative_position_bias.``
``attention_bias.weight``                              ``embedding.weight``
``encoder.block.i.layer.0.SelfAttention.{q,k,v}``      ``encoder.layers.i.attention.qkv_proj``
``encoder.block.i.layer.0.SelfAttention.o``            ``encoder.layers.i.attention.out_proj``
``encoder.block.i.layer.0.layer_norm``                 ``encoder.layers.i.attention_norm``
``encoder.block.i.layer.1.DenseReluDense.wi / wo``     ``encoder.layers.i.feed_forward.w_in /
                                                       w_out``
``...DenseReluDense.wi_0 / wi_1`` (gated, v1.1)        ``...feed_forward.w_gate / w_in``
``encoder.block.i.layer.1.layer_norm``                 ``encoder.layers.i.ffn_norm``
``decoder.block.i.layer.0.SelfAttention.*``            ``decoder.layers.i.self_attention.*``
``decoder.block.i.layer.0.layer_norm``                 ``decoder.layers.i.self_attention_norm``
``decoder.block.i.layer.1.EncDecAttention.q / o``      ``decoder.layers.i.cross_attention.
                                                       q_proj / out_proj``
``decoder.block.i.layer.1.EncDecAttention.{k,v}``      ``decoder.layers.i.cross_attention.
                                                       kv_proj``
``decoder.block.i.layer.1.layer_norm``                 ``decoder.layers.i.cross_attention_norm``
``decoder.block.i.layer.2.*``                          ``decoder.layers.i.feed_forward.* /
                                                       ffn_norm``
``{s}.final_layer_norm``                               ``{s}.final_norm``
``lm_head.weight`` (untied only)                       ``lm_head.weight``
=====================================================  ====================================

Projections ``{q,k,v}`` are concatenated into ptm's fused ``qkv_proj`` (and ``{k,v}`` into
``kv_proj``). ptm needs ``num_heads * d_kv == d_model`` (every T5 and T5 v1.1 size up to
``large``; the 3B and 11B models have wider attention and are refused with a message).
T5 v1.0 ties the head to the token table and multiplies the decoder output by
``d_model ** -0.5`` (``scale_decoder_output``); v1.1 has its own head and no scaling. The
head is untied on load when the file holds an ``lm_head.weight`` that differs from
``shared.weight``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import Tensor

from ptm_core.atomic import atomic_directory
from ptm_core.checkpoints.io import CheckpointError, read_weights
from ptm_core.checkpoints.seq2seq_ptm import build_seq2seq_model, with_overrides
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.encoders.encoder_decoder_config import Seq2SeqConfig
from ptm_core.modules.feed_forward import ACTIVATIONS


def is_hf_t5_config(config: dict[str, Any]) -> bool:
    return config.get("model_type") == "t5"


def is_hf_t5_directory(path: str | Path) -> bool:
    """Whether ``path/config.json`` is a Hugging Face T5 config."""
    config_path = Path(path) / "config.json"
    if not config_path.exists():
        return False
    return is_hf_t5_config(json.loads(config_path.read_text()))


def _feed_forward(config: dict[str, Any], source: str) -> tuple[str, bool]:
    # "relu" (v1.0), "gated-gelu" (v1.1, tanh GELU) or "[gated-]ACT" -> (activation, gated).
    proj = config.get("feed_forward_proj", "relu")
    parts = proj.split("-")
    gated = len(parts) == 2 and parts[0] == "gated"
    if len(parts) > 2 or (len(parts) == 2 and not gated):
        raise CheckpointError(f"{source}: feed_forward_proj={proj!r} is not 'ACT' or 'gated-ACT'")
    activation = "gelu_new" if proj == "gated-gelu" else parts[-1]
    if activation not in ACTIVATIONS:
        raise CheckpointError(
            f"{source}: feed_forward_proj={proj!r} uses activation {activation!r}, which ptm "
            f"does not have; valid: {', '.join(sorted(ACTIVATIONS))}"
        )
    return activation, gated


def hf_config_to_seq2seq(config: dict[str, Any], *, source: str) -> Seq2SeqConfig:
    """Translate a T5 ``config.json`` into :class:`Seq2SeqConfig`.

    Raises:
        CheckpointError: attention wider than ``d_model`` or an unknown feed-forward.
    """
    d_model = config.get("d_model", 512)
    heads = config.get("num_heads", 8)
    d_kv = config.get("d_kv", 64)
    if heads * d_kv != d_model:
        raise CheckpointError(
            f"{source}: num_heads * d_kv = {heads} * {d_kv} != d_model = {d_model}; ptm's "
            "attention has width d_model (T5 3B/11B are not supported)"
        )
    activation, gated = _feed_forward(config, source)
    tied = config.get("tie_word_embeddings", True) is not False
    # transformers >= 5 writes the scaling explicitly (and always ties the config); older
    # configs imply it: T5 v1.0 ties and scales, v1.1 does neither.
    scale = config.get("scale_decoder_outputs", tied)
    pad = config.get("pad_token_id", 0)
    dropout = config.get("dropout_rate", 0.1)
    start = config.get("decoder_start_token_id")
    return Seq2SeqConfig(
        vocab_size=config["vocab_size"],
        hidden_size=d_model,
        encoder_layers=config.get("num_layers", 6),
        decoder_layers=config.get("num_decoder_layers") or config.get("num_layers", 6),
        num_heads=heads,
        intermediate_size=config.get("d_ff", 2048),
        max_positions=config.get("n_positions", 512),
        position_offset=0,
        dropout=dropout,
        attention_dropout=dropout,
        activation=activation,
        layer_norm_eps=config.get("layer_norm_epsilon", 1e-6),
        norm_position="pre",
        pad_token_id=pad,
        bos_token_id=pad,
        eos_token_id=config.get("eos_token_id", 1),
        decoder_start_token_id=pad if start is None else start,
        share_embeddings=True,
        tie_lm_head=tied,
        scale_embedding=False,
        initializer_range=0.02,
        position_encoding="t5_buckets",
        relative_attention_num_buckets=config.get("relative_attention_num_buckets", 32),
        relative_attention_max_distance=config.get("relative_attention_max_distance", 128),
        norm_type="rmsnorm",
        bias=False,
        attention_scale=False,
        gated_feed_forward=gated,
        embedding_layer_norm=False,
        scale_decoder_output=bool(scale),
        initialization="t5",
    )


def seq2seq_config_to_hf(config: Seq2SeqConfig) -> dict[str, Any]:
    """``config.json`` of a ``T5ForConditionalGeneration`` with the same numbers.

    Raises:
        CheckpointError: the model is not in the T5 layout; the message lists what differs.
    """
    expected = {
        "position_encoding": "t5_buckets",
        "norm_type": "rmsnorm",
        "norm_position": "pre",
        "bias": False,
        "attention_scale": False,
        "embedding_layer_norm": False,
        "share_embeddings": True,
        "scale_embedding": False,
    }
    wrong = [
        f"{name}={getattr(config, name)!r} (T5: {value!r})"
        for name, value in expected.items()
        if getattr(config, name) != value
    ]
    if wrong:
        raise CheckpointError(
            f"only the T5 layout exports to T5; this model has {', '.join(wrong)}; "
            "save with format='ptm'"
        )
    if config.gated_feed_forward:
        proj = "gated-gelu" if config.activation == "gelu_new" else f"gated-{config.activation}"
    else:
        proj = config.activation
    return {
        "model_type": "t5",
        "architectures": ["T5ForConditionalGeneration"],
        "vocab_size": config.vocab_size,
        "d_model": config.hidden_size,
        "d_kv": config.hidden_size // config.num_heads,
        "d_ff": config.intermediate_size,
        "num_layers": config.encoder_layers,
        "num_decoder_layers": config.decoder_layers,
        "num_heads": config.num_heads,
        "n_positions": config.max_positions,
        "relative_attention_num_buckets": config.relative_attention_num_buckets,
        "relative_attention_max_distance": config.relative_attention_max_distance,
        "dropout_rate": config.dropout,
        "layer_norm_epsilon": config.layer_norm_eps,
        "initializer_factor": 1.0,
        "feed_forward_proj": proj,
        "is_encoder_decoder": True,
        "use_cache": True,
        "pad_token_id": config.pad_token_id,
        "eos_token_id": config.eos_token_id,
        "decoder_start_token_id": config.decoder_start_token_id,
        "tie_word_embeddings": config.tie_lm_head,
        "scale_decoder_outputs": config.scale_decoder_output,
    }


def _attention_names(hf: str, ours: str, cross: bool) -> list[tuple[list[str], str]]:
    # (HF tensors, concatenated in order) -> ptm tensor, for one attention block.
    if cross:
        return [
            ([f"{hf}.q.weight"], f"{ours}.q_proj.weight"),
            ([f"{hf}.k.weight", f"{hf}.v.weight"], f"{ours}.kv_proj.weight"),
            ([f"{hf}.o.weight"], f"{ours}.out_proj.weight"),
        ]
    return [
        ([f"{hf}.q.weight", f"{hf}.k.weight", f"{hf}.v.weight"], f"{ours}.qkv_proj.weight"),
        ([f"{hf}.o.weight"], f"{ours}.out_proj.weight"),
    ]


def _name_map(config: Seq2SeqConfig) -> list[tuple[list[str], str]]:
    """Every (HF names, ptm name) pair of the T5 layout, lm_head and tied tables excluded."""
    ffn = (
        [("wi_0", "w_gate"), ("wi_1", "w_in"), ("wo", "w_out")]
        if config.gated_feed_forward
        else [("wi", "w_in"), ("wo", "w_out")]
    )
    pairs: list[tuple[list[str], str]] = [(["shared.weight"], "encoder.embeddings.word.weight")]
    for side, count in (("encoder", config.encoder_layers), ("decoder", config.decoder_layers)):
        pairs.append(
            (
                [f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"],
                f"{side}.relative_position_bias.embedding.weight",
            )
        )
        self_name = "attention" if side == "encoder" else "self_attention"
        for i in range(count):
            hf = f"{side}.block.{i}.layer"
            ours = f"{side}.layers.{i}"
            pairs += _attention_names(f"{hf}.0.SelfAttention", f"{ours}.{self_name}", cross=False)
            pairs.append(([f"{hf}.0.layer_norm.weight"], f"{ours}.{self_name}_norm.weight"))
            ffn_index = 1
            if side == "decoder":
                pairs += _attention_names(
                    f"{hf}.1.EncDecAttention", f"{ours}.cross_attention", cross=True
                )
                pairs.append(([f"{hf}.1.layer_norm.weight"], f"{ours}.cross_attention_norm.weight"))
                ffn_index = 2
            for hf_name, name in ffn:
                pairs.append(
                    (
                        [f"{hf}.{ffn_index}.DenseReluDense.{hf_name}.weight"],
                        f"{ours}.feed_forward.{name}.weight",
                    )
                )
            pairs.append(([f"{hf}.{ffn_index}.layer_norm.weight"], f"{ours}.ffn_norm.weight"))
        pairs.append(([f"{side}.final_layer_norm.weight"], f"{side}.final_norm.weight"))
    return pairs


def hf_t5_to_ptm(state: dict[str, Tensor], config: Seq2SeqConfig) -> dict[str, Tensor]:
    """Rename a T5 state dict to ptm names (fusing q/k/v and k/v projections).

    Raises:
        CheckpointError: a needed tensor is missing or one is left over; the message names them.
    """
    remaining = dict(state)
    table = remaining.get("shared.weight")
    for side in ("encoder", "decoder"):
        own = remaining.pop(f"{side}.embed_tokens.weight", None)
        table = table if table is not None else own
    if table is not None:
        remaining["shared.weight"] = table
    head = remaining.pop("lm_head.weight", None)
    # transformers never uses it; older checkpoints carry it.
    remaining.pop("decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight", None)
    out: dict[str, Tensor] = {}
    missing: list[str] = []
    for hf_names, name in _name_map(config):
        absent = [n for n in hf_names if n not in remaining]
        if absent:
            missing += absent
            continue
        parts = [remaining.pop(n) for n in hf_names]
        out[name] = parts[0] if len(parts) == 1 else torch.cat(parts)
    if missing:
        raise CheckpointError(f"T5 checkpoint lacks {missing}")
    if remaining:
        raise CheckpointError(f"T5 checkpoint has tensors ptm does not know: {sorted(remaining)}")
    if not config.tie_lm_head:
        if head is None:
            raise CheckpointError(
                "T5 checkpoint with tie_word_embeddings=false lacks lm_head.weight"
            )
        out["lm_head.weight"] = head
    dtype = out["encoder.embeddings.word.weight"].dtype
    out["final_logits_bias"] = torch.zeros(1, config.vocab_size, dtype=dtype)
    return out


def ptm_to_hf_t5(state: dict[str, Tensor], config: Seq2SeqConfig) -> dict[str, Tensor]:
    """Inverse of :func:`hf_t5_to_ptm`, with ``T5ForConditionalGeneration`` names."""
    d = config.hidden_size
    out: dict[str, Tensor] = {}
    for hf_names, name in _name_map(config):
        parts = state[name].split(d) if len(hf_names) > 1 else (state[name],)
        for hf_name, part in zip(hf_names, parts, strict=True):
            out[hf_name] = part
    out["lm_head.weight"] = state["lm_head.weight"]
    return {k: v.detach().contiguous().clone() for k, v in out.items()}


def load_t5(path: str | Path, **overrides: Any) -> EncoderDecoderModel:
    """Load a Hugging Face T5 directory as an :class:`EncoderDecoderModel`.

    Args:
        path: directory with a T5 ``config.json`` and ``model.safetensors`` (or
            ``pytorch_model.bin``) of ``T5Model`` or ``T5ForConditionalGeneration``.
        **overrides: :class:`Seq2SeqConfig` fields to change, e.g. ``dropout=0.0``.

    Raises:
        CheckpointError: not a T5 config, unsupported sizes, missing/unknown tensors or
            shape mismatches; the message names the file and the tensors.
    """
    directory = Path(path)
    config_path = directory / "config.json"
    if not config_path.exists():
        raise CheckpointError(f"{directory}: no config.json; is this a checkpoint directory?")
    raw = json.loads(config_path.read_text())
    if not is_hf_t5_config(raw):
        raise CheckpointError(f"{config_path}: model_type={raw.get('model_type')!r}, not 't5'")
    config = hf_config_to_seq2seq(raw, source=str(config_path))
    state, weights_path = read_weights(directory)
    head, table = state.get("lm_head.weight"), state.get("shared.weight")
    config.tie_lm_head = head is None or (table is not None and torch.equal(head, table))
    config = with_overrides(config, overrides, source=str(config_path))
    try:
        state = hf_t5_to_ptm(state, config)
    except CheckpointError as error:
        raise CheckpointError(f"{weights_path}: {error}") from None
    return build_seq2seq_model(config, state, source=str(weights_path))


def save_t5(model: EncoderDecoderModel, path: str | Path) -> Path:
    """Write a ``T5ForConditionalGeneration`` directory (``config.json`` +
    ``model.safetensors``) atomically.

    Raises:
        CheckpointError: the model is not in the T5 layout.
    """
    config = seq2seq_config_to_hf(model.config)
    state = ptm_to_hf_t5(model.state_dict(), model.config)
    if model.config.tie_lm_head:
        # safetensors stores a tensor once; transformers re-ties lm_head to shared.
        del state["lm_head.weight"]
    with atomic_directory(Path(path)) as tmp:
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        save_file(state, str(tmp / "model.safetensors"))
    return Path(path)
