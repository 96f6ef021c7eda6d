"""Hugging Face BART (``BartModel`` / ``BartForConditionalGeneration``) <-> ptm encoder-decoder.

Name map (``{p}`` = ``model.`` for ``BartForConditionalGeneration``, empty for ``BartModel``):

============================================  ==========================================
Hugging Face                                  ptm
============================================  ==========================================
``{p}shared.weight``                          ``encoder.embeddings.word.weight`` (shared)
``{p}encoder.embed_positions.weight``         ``encoder.embeddings.position.weight``
``{p}encoder.layernorm_embedding.*``          ``encoder.embeddings.norm.*``
``{p}encoder.layers.i.self_attn.{q,k,v}_proj`` ``encoder.layers.i.attention.qkv_proj`` (cat)
``{p}encoder.layers.i.self_attn.out_proj``    ``encoder.layers.i.attention.out_proj``
``{p}encoder.layers.i.self_attn_layer_norm``  ``encoder.layers.i.attention_norm``
``{p}encoder.layers.i.fc1`` / ``fc2``         ``encoder.layers.i.feed_forward.w_in/w_out``
``{p}encoder.layers.i.final_layer_norm``      ``encoder.layers.i.ffn_norm``
``{p}decoder.embed_positions.weight``         ``decoder.embeddings.position.weight``
``{p}decoder.layernorm_embedding.*``          ``decoder.embeddings.norm.*``
``{p}decoder.layers.i.self_attn.*``           ``decoder.layers.i.self_attention.*``
``{p}decoder.layers.i.encoder_attn.q_proj``   ``decoder.layers.i.cross_attention.q_proj``
``{p}decoder.layers.i.encoder_attn.{k,v}``    ``decoder.layers.i.cross_attention.kv_proj`` (cat)
``{p}decoder.layers.i.*_layer_norm``          ``..._attention_norm`` / ``ffn_norm``
``final_logits_bias``                         ``final_logits_bias``
============================================  ==========================================

``lm_head.weight`` is the shared table (tied); positions keep BART's offset of 2 rows.
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

_LAYER_RENAMES = {
    "self_attn.out_proj": "{att}.out_proj",
    "self_attn_layer_norm": "{att}_norm",
    "fc1": "feed_forward.w_in",
    "fc2": "feed_forward.w_out",
    "final_layer_norm": "ffn_norm",
    "encoder_attn.q_proj": "cross_attention.q_proj",
    "encoder_attn.out_proj": "cross_attention.out_proj",
    "encoder_attn_layer_norm": "cross_attention_norm",
}


def is_hf_bart_config(config: dict[str, Any]) -> bool:
    return config.get("model_type") == "bart"


def hf_config_to_seq2seq(config: dict[str, Any], *, source: str) -> Seq2SeqConfig:
    """Translate a BART ``config.json`` into :class:`Seq2SeqConfig`."""
    heads = config.get("encoder_attention_heads", 16)
    if config.get("decoder_attention_heads", heads) != heads:
        raise CheckpointError(
            f"{source}: encoder_attention_heads={heads} and decoder_attention_heads="
            f"{config.get('decoder_attention_heads')} differ; ptm uses one num_heads"
        )
    ffn = config.get("encoder_ffn_dim", 4096)
    if config.get("decoder_ffn_dim", ffn) != ffn:
        raise CheckpointError(f"{source}: encoder_ffn_dim and decoder_ffn_dim differ")
    return Seq2SeqConfig(
        vocab_size=config["vocab_size"],
        hidden_size=config.get("d_model", 1024),
        encoder_layers=config.get("encoder_layers", 12),
        decoder_layers=config.get("decoder_layers", 12),
        num_heads=heads,
        intermediate_size=ffn,
        max_positions=config.get("max_position_embeddings", 1024),
        position_offset=2,
        dropout=config.get("dropout", 0.1),
        attention_dropout=config.get("attention_dropout", 0.0),
        activation=config.get("activation_function", "gelu"),
        layer_norm_eps=1e-5,
        norm_position="post",
        pad_token_id=config.get("pad_token_id", 1),
        bos_token_id=config.get("bos_token_id", 0),
        eos_token_id=config.get("eos_token_id", 2),
        decoder_start_token_id=config.get("decoder_start_token_id", 2),
        share_embeddings=True,
        tie_lm_head=config.get("tie_word_embeddings", True),
        scale_embedding=config.get("scale_embedding", False),
        initializer_range=config.get("init_std", 0.02),
    )


def seq2seq_config_to_hf(config: Seq2SeqConfig) -> dict[str, Any]:
    """``config.json`` of a ``BartForConditionalGeneration`` with the same numbers."""
    if config.norm_position != "post" or not config.share_embeddings or config.position_offset != 2:
        raise CheckpointError(
            "only post-LN models with shared embeddings and position_offset=2 export to "
            "BART; save with format='ptm'"
        )
    return {
        "model_type": "bart",
        "architectures": ["BartForConditionalGeneration"],
        "vocab_size": config.vocab_size,
        "d_model": config.hidden_size,
        "encoder_layers": config.encoder_layers,
        "decoder_layers": config.decoder_layers,
        "encoder_attention_heads": config.num_heads,
        "decoder_attention_heads": config.num_heads,
        "encoder_ffn_dim": config.intermediate_size,
        "decoder_ffn_dim": config.intermediate_size,
        "max_position_embeddings": config.max_positions,
        "dropout": config.dropout,
        "attention_dropout": config.attention_dropout,
        "activation_dropout": 0.0,
        "activation_function": config.activation,
        "pad_token_id": config.pad_token_id,
        "bos_token_id": config.bos_token_id,
        "eos_token_id": config.eos_token_id,
        "decoder_start_token_id": config.decoder_start_token_id,
        "forced_eos_token_id": config.eos_token_id,
        "scale_embedding": config.scale_embedding,
        "tie_word_embeddings": config.tie_lm_head,
        "init_std": config.initializer_range,
        "encoder_layerdrop": 0.0,
        "decoder_layerdrop": 0.0,
    }


def hf_bart_to_ptm(state: dict[str, Tensor], config: Seq2SeqConfig) -> dict[str, Tensor]:
    """Rename a BART state dict to ptm names (fusing q/k/v and k/v projections).

    Raises:
        CheckpointError: a needed tensor is missing; the message names it.
    """
    prefix = "model." if any(k.startswith("model.") for k in state) else ""
    remaining = {k[len(prefix) :] if k.startswith(prefix) else k: v for k, v in state.items()}
    out: dict[str, Tensor] = {}

    def take(name: str) -> Tensor:
        if name not in remaining:
            raise CheckpointError(f"BART checkpoint lacks {prefix}{name}")
        return remaining.pop(name)

    table = remaining.pop("shared.weight", None)
    for side in ("encoder", "decoder"):
        own = remaining.pop(f"{side}.embed_tokens.weight", None)
        table = table if table is not None else own
    if table is None:
        raise CheckpointError("BART checkpoint lacks shared.weight")
    out["encoder.embeddings.word.weight"] = table
    for side, count in (("encoder", config.encoder_layers), ("decoder", config.decoder_layers)):
        out[f"{side}.embeddings.position.weight"] = take(f"{side}.embed_positions.weight")
        for kind in ("weight", "bias"):
            out[f"{side}.embeddings.norm.{kind}"] = take(f"{side}.layernorm_embedding.{kind}")
        att = "attention" if side == "encoder" else "self_attention"
        for i in range(count):
            hf = f"{side}.layers.{i}."
            ours = f"{side}.layers.{i}."
            for kind in ("weight", "bias"):
                out[f"{ours}{att}.qkv_proj.{kind}"] = torch.cat(
                    [take(f"{hf}self_attn.{p}_proj.{kind}") for p in "qkv"]
                )
                for hf_name, name in _LAYER_RENAMES.items():
                    if side == "encoder" and hf_name.startswith("encoder_attn"):
                        continue
                    out[f"{ours}{name.format(att=att)}.{kind}"] = take(f"{hf}{hf_name}.{kind}")
                if side == "decoder":
                    out[f"{ours}cross_attention.kv_proj.{kind}"] = torch.cat(
                        [take(f"{hf}encoder_attn.{p}_proj.{kind}") for p in "kv"]
                    )
    bias = state.get("final_logits_bias")
    out["final_logits_bias"] = (
        bias if bias is not None else torch.zeros(1, config.vocab_size, dtype=table.dtype)
    )
    remaining.pop("final_logits_bias", None)
    remaining.pop("lm_head.weight", None)
    if remaining:
        raise CheckpointError(f"BART checkpoint has tensors ptm does not know: {sorted(remaining)}")
    head = state.get("lm_head.weight")
    if head is not None and not config.tie_lm_head:
        out["lm_head.weight"] = head
    return out


def ptm_to_hf_bart(state: dict[str, Tensor], config: Seq2SeqConfig) -> dict[str, Tensor]:
    """Inverse of :func:`hf_bart_to_ptm`, with ``BartForConditionalGeneration`` names."""
    out: dict[str, Tensor] = {"model.shared.weight": state["encoder.embeddings.word.weight"]}
    d = config.hidden_size
    for side, count in (("encoder", config.encoder_layers), ("decoder", config.decoder_layers)):
        p = f"model.{side}."
        out[f"{p}embed_positions.weight"] = state[f"{side}.embeddings.position.weight"]
        for kind in ("weight", "bias"):
            out[f"{p}layernorm_embedding.{kind}"] = state[f"{side}.embeddings.norm.{kind}"]
        att = "attention" if side == "encoder" else "self_attention"
        for i in range(count):
            hf = f"{p}layers.{i}."
            ours = f"{side}.layers.{i}."
            for kind in ("weight", "bias"):
                for name, part in zip(
                    "qkv", state[f"{ours}{att}.qkv_proj.{kind}"].split(d), strict=True
                ):
                    out[f"{hf}self_attn.{name}_proj.{kind}"] = part
                for hf_name, name in _LAYER_RENAMES.items():
                    if side == "encoder" and hf_name.startswith("encoder_attn"):
                        continue
                    out[f"{hf}{hf_name}.{kind}"] = state[f"{ours}{name.format(att=att)}.{kind}"]
                if side == "decoder":
                    k, v = state[f"{ours}cross_attention.kv_proj.{kind}"].split(d)
                    out[f"{hf}encoder_attn.k_proj.{kind}"] = k
                    out[f"{hf}encoder_attn.v_proj.{kind}"] = v
    out["final_logits_bias"] = state["final_logits_bias"]
    if not config.tie_lm_head:
        out["lm_head.weight"] = state["lm_head.weight"]
    return {k: v.detach().contiguous().clone() for k, v in out.items()}


def load_bart(path: str | Path, **overrides: Any) -> EncoderDecoderModel:
    """Load a Hugging Face BART directory (``BartModel`` / ``BartForConditionalGeneration``).

    Raises:
        CheckpointError: no config, not a BART config, missing/unknown tensors or shape
            mismatches; the message names the file and the tensors.
    """
    directory = Path(path)
    config_path = directory / "config.json"
    if not config_path.exists():
        raise CheckpointError(f"{directory}: no config.json; is this a checkpoint directory?")
    raw = json.loads(config_path.read_text())
    if not is_hf_bart_config(raw):
        raise CheckpointError(f"{config_path}: model_type={raw.get('model_type')!r}, not 'bart'")
    state, weights_path = read_weights(directory)
    config = hf_config_to_seq2seq(raw, source=str(config_path))
    state = hf_bart_to_ptm(state, config)
    return build_seq2seq_model(
        with_overrides(config, overrides, source=str(config_path)), state, source=str(weights_path)
    )


def check_bart_layout(config: Seq2SeqConfig) -> None:
    """Raise :class:`~ptm_core.checkpoints.CheckpointError` unless ``config`` is BART's
    layout (learned positions, LayerNorms, biases, scaled attention, plain feed-forward)."""
    if (
        config.bucketed
        or config.norm_type != "layernorm"
        or not (config.bias and config.attention_scale and config.embedding_layer_norm)
        or config.gated_feed_forward
        or config.scale_decoder_output
    ):
        raise CheckpointError(
            "BART export needs learned positions, LayerNorms, biases, scaled attention, "
            "an embedding LayerNorm, a plain feed-forward and an unscaled LM head; "
            "save with format='ptm'"
        )


def save_bart(model: EncoderDecoderModel, path: str | Path) -> Path:
    """Write a ``BartForConditionalGeneration`` directory (``config.json`` +
    ``model.safetensors``, BART names) atomically.

    Raises:
        CheckpointError: the model is not in BART's layout (:func:`check_bart_layout`,
            :func:`seq2seq_config_to_hf`).
    """
    check_bart_layout(model.config)
    config = seq2seq_config_to_hf(model.config)
    state = ptm_to_hf_bart(model.state_dict(), model.config)
    with atomic_directory(Path(path)) as tmp:
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        save_file(state, str(tmp / "model.safetensors"))
    return Path(path)
