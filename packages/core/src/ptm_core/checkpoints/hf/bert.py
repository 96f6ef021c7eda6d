"""Hugging Face BERT <-> ptm encoder: config keys and tensor names.

Query/key/value are concatenated into ptm's fused projection on import and split again on
export. ALBERT and ELECTRA (:mod:`ptm_core.checkpoints.hf.albert`,
:mod:`~ptm_core.checkpoints.hf.electra`) reuse this map for their layers. Like every
family module it exposes ``config_from_hf``, ``config_to_hf``, ``state_from_hf``,
``state_to_hf`` and ``check_exportable``; it only translates names and configs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from ptm_core.checkpoints.io import CheckpointError
from ptm_core.encoders.config import EncoderConfig

# Hugging Face BertConfig key -> EncoderConfig field (ALBERT and ELECTRA add embedding_size).
HF_BERT_CONFIG_KEYS = {
    "vocab_size": "vocab_size",
    "hidden_size": "hidden_size",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "intermediate_size": "intermediate_size",
    "max_position_embeddings": "max_positions",
    "type_vocab_size": "type_vocab_size",
    "hidden_dropout_prob": "dropout",
    "attention_probs_dropout_prob": "attention_dropout",
    "hidden_act": "activation",
    "layer_norm_eps": "layer_norm_eps",
    "pad_token_id": "pad_token_id",
    "initializer_range": "initializer_range",
}


# One-to-one tensor names (ptm <- HF), besides the fused query/key/value.
_HF_EMBEDDING_NAMES = {
    "embeddings.word.weight": "embeddings.word_embeddings.weight",
    "embeddings.position.weight": "embeddings.position_embeddings.weight",
    "embeddings.token_type.weight": "embeddings.token_type_embeddings.weight",
    "embeddings.norm.weight": "embeddings.LayerNorm.weight",
    "embeddings.norm.bias": "embeddings.LayerNorm.bias",
}

_HF_LAYER_NAMES = {
    "attention.out_proj": "attention.output.dense",
    "attention_norm": "attention.output.LayerNorm",
    "feed_forward.w_in": "intermediate.dense",
    "feed_forward.w_out": "output.dense",
    "ffn_norm": "output.LayerNorm",
}

_HF_QKV = ("query", "key", "value")

# Tensors of a BERT checkpoint that belong to heads or are buffers, not to the encoder.
_HF_NON_ENCODER_PREFIXES = ("pooler.", "cls.", "embeddings.position_ids")


def is_hf_bert_config(config: dict[str, Any]) -> bool:
    """Whether a config.json is a Hugging Face BERT config rather than a ptm one."""
    return "ptm_format" not in config and (
        config.get("model_type") == "bert" or "num_hidden_layers" in config
    )


def hf_config_to_encoder_config(config: dict[str, Any], *, source: str) -> EncoderConfig:
    """Translate a Hugging Face ``BertConfig`` dict into an :class:`EncoderConfig`."""
    model_type = config.get("model_type", "bert")
    if model_type != "bert":
        raise CheckpointError(
            f"{source}: model_type {model_type!r} is not supported; only 'bert' checkpoints "
            "can be mapped onto TransformerEncoder"
        )
    position_type = config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise CheckpointError(
            f"{source}: position_embedding_type {position_type!r} is not supported "
            "(only 'absolute')"
        )
    values = {
        ours: config[theirs] for theirs, ours in HF_BERT_CONFIG_KEYS.items() if theirs in config
    }
    values.setdefault("pad_token_id", 0)
    if values["pad_token_id"] is None:
        values["pad_token_id"] = 0
    try:
        return EncoderConfig(**values)
    except ValueError as exc:
        raise CheckpointError(f"{source}: {exc}") from None


def hf_bert_to_ptm(
    state: dict[str, Tensor], num_layers: int
) -> tuple[dict[str, Tensor], dict[str, Tensor], list[str], list[str]]:
    """Map a Hugging Face BERT state dict onto ptm encoder names.

    Args:
        state: tensors by Hugging Face name (``bert.`` prefixes allowed; TF-era
            ``gamma``/``beta`` LayerNorm names accepted).
        num_layers: number of encoder layers expected.

    Returns:
        ``(encoder_state, head_state, missing, unknown)``: ptm-named encoder tensors,
        the pooler/``cls.`` tensors (HF names, prefix stripped) for heads, the HF names
        that were expected but absent, and names that mean nothing to a BERT encoder.
    """
    source: dict[str, Tensor] = {}
    for name, tensor in state.items():
        key = name.removeprefix("bert.")
        if key.endswith("LayerNorm.gamma"):
            key = key[: -len("gamma")] + "weight"
        elif key.endswith("LayerNorm.beta"):
            key = key[: -len("beta")] + "bias"
        source[key] = tensor

    encoder_state, missing, used = read_bert_layout(
        source,
        num_layers,
        embeddings=_HF_EMBEDDING_NAMES,
        layer=_HF_LAYER_NAMES,
        qkv=tuple(f"attention.self.{p}" for p in _HF_QKV),
        layer_prefix="encoder.layer.{}.",
    )
    head_state = {k: v for k, v in source.items() if k.startswith(("pooler.", "cls."))}
    unknown = sorted(
        k for k in source if k not in used and not k.startswith(_HF_NON_ENCODER_PREFIXES)
    )
    return encoder_state, head_state, missing, unknown


def read_bert_layout(
    source: Mapping[str, Tensor],
    num_layers: int,
    *,
    embeddings: Mapping[str, str],
    layer: Mapping[str, str],
    qkv: Sequence[str],
    layer_prefix: str,
) -> tuple[dict[str, Tensor], list[str], set[str]]:
    """Read BERT's layer layout under a family's own names (BERT, DistilBERT, ...).

    Args:
        source: the file's tensors, encoder prefix already stripped.
        num_layers: layers expected.
        embeddings: ptm name -> file name of the embedding tensors.
        layer: ptm module -> file module inside a layer (``.weight``/``.bias`` added).
        qkv: the file's query, key and value modules inside a layer (fused into
            ``attention.qkv_proj``).
        layer_prefix: a layer's file prefix with ``{}`` for its index (``encoder.layer.{}.``).

    Returns:
        ``(encoder_state, missing, used)``: ptm-named tensors, the file names expected but
        absent (in reading order), and the file names read.
    """
    state: dict[str, Tensor] = {}
    missing: list[str] = []
    used: set[str] = set()

    def take(name: str) -> Tensor | None:
        if name not in source:
            missing.append(name)
            return None
        used.add(name)
        return source[name]

    for ours, theirs in embeddings.items():
        found = take(theirs)
        if found is not None:
            state[ours] = found
    for i in range(num_layers):
        prefix = layer_prefix.format(i)
        for kind in ("weight", "bias"):
            parts = [take(f"{prefix}{p}.{kind}") for p in qkv]
            if all(p is not None for p in parts):
                state[f"layers.{i}.attention.qkv_proj.{kind}"] = torch.cat(
                    [p for p in parts if p is not None], dim=0
                )
            for ours, theirs in layer.items():
                found = take(f"{prefix}{theirs}.{kind}")
                if found is not None:
                    state[f"layers.{i}.{ours}.{kind}"] = found
    return state, missing, used


def ptm_to_hf_bert(state: dict[str, Tensor], num_layers: int) -> dict[str, Tensor]:
    """Inverse of :func:`hf_bert_to_ptm` for the encoder tensors (HF names, no prefix)."""
    out: dict[str, Tensor] = {}
    for ours, theirs in _HF_EMBEDDING_NAMES.items():
        out[theirs] = state[ours]
    for i in range(num_layers):
        hf_prefix = f"encoder.layer.{i}."
        for kind in ("weight", "bias"):
            fused = state[f"layers.{i}.attention.qkv_proj.{kind}"]
            for name, part in zip(_HF_QKV, fused.chunk(3, dim=0), strict=True):
                out[f"{hf_prefix}attention.self.{name}.{kind}"] = part
            for ours, theirs in _HF_LAYER_NAMES.items():
                out[f"{hf_prefix}{theirs}.{kind}"] = state[f"layers.{i}.{ours}.{kind}"]
    return {k: v.detach().contiguous().clone() for k, v in out.items()}


def encoder_config_to_hf(config: EncoderConfig) -> dict[str, Any]:
    """A Hugging Face ``BertConfig`` dict equivalent to ``config`` (post-LN only)."""
    if config.norm_position != "post":
        raise CheckpointError(
            "only post-LN (BERT) encoders can be exported to Hugging Face BERT; this one "
            "is pre-LN. Save it with format='ptm'"
        )
    hf = {theirs: getattr(config, ours) for theirs, ours in HF_BERT_CONFIG_KEYS.items()}
    hf.update(
        architectures=["BertModel"],
        model_type="bert",
        position_embedding_type="absolute",
    )
    return hf


def check_bert_layout(config: EncoderConfig, format: str) -> None:
    """Raise unless ``config`` has BERT's layer layout (what BERT, ALBERT and ELECTRA share)."""
    defaults = EncoderConfig()
    switches = (
        "position_encoding",
        "embedding_layer_norm",
        # Pruned heads (`ptm compress --method prune-heads`, a PrunedEncoderConfig's
        # field): layers of different widths.
        "heads_per_layer",
    )
    changed = [
        f"{name}={getattr(config, name)!r}"
        for name in switches
        if getattr(config, name, None) != getattr(defaults, name, None)
    ]
    if changed:
        raise CheckpointError(
            f"format={format!r} needs BERT's layer layout, but this encoder has "
            f"{', '.join(changed)}; save it with format='ptm'"
            + (" or 'hf-xlnet'" if config.relative else "")
            + (" or 'hf-modernbert'" if config.position_encoding == "rotary" else "")
        )


def check_exportable(config: EncoderConfig) -> None:
    """Raise unless ``config`` can be written as a Hugging Face ``BertModel``."""
    check_bert_layout(config, "hf-bert")
    if config.factorised or config.share_layers != "none" or config.relative:
        raise CheckpointError(
            "a BERT checkpoint has no factorised embeddings, layer sharing or relative "
            "positions; export "
            "this encoder with format='hf-albert' / 'hf-electra' or 'ptm'"
        )


# The family interface (the same four functions as albert, electra and xlnet).
def config_from_hf(config: dict[str, Any], *, source: str) -> EncoderConfig:
    """:func:`hf_config_to_encoder_config`."""
    return hf_config_to_encoder_config(config, source=source)


def config_to_hf(config: EncoderConfig) -> dict[str, Any]:
    """:func:`encoder_config_to_hf`."""
    return encoder_config_to_hf(config)


def state_from_hf(
    state: dict[str, Tensor], config: EncoderConfig
) -> tuple[dict[str, Tensor], dict[str, Tensor], list[str], list[str]]:
    """:func:`hf_bert_to_ptm` for ``config.num_layers`` layers."""
    return hf_bert_to_ptm(state, config.num_layers)


def state_to_hf(state: dict[str, Tensor], config: EncoderConfig) -> dict[str, Tensor]:
    """:func:`ptm_to_hf_bert` for ``config.num_layers`` layers."""
    return ptm_to_hf_bert(state, config.num_layers)


#: The encoder's weight prefix in a ``BertForPreTraining`` file.
HF_PREFIX = "bert."


def pretraining_heads() -> tuple[Any, ...]:
    """The heads a ``BertForPreTraining`` folder fills: MLM (and WWM, span masking), NSP."""
    from ptm_core.checkpoints.hf.bert_heads import load_bert_pretraining_heads
    from ptm_core.checkpoints.hf.pretraining_heads import HFHead
    from ptm_core.objectives.mlm import MaskedLMObjective
    from ptm_core.objectives.nsp import NextSentenceObjective

    return (
        HFHead(
            MaskedLMObjective,
            ("cls.predictions.bias", "cls.predictions.transform.dense.weight"),
            lambda heads, objective, _dir, _src: load_bert_pretraining_heads(heads, mlm=objective),
        ),
        HFHead(
            NextSentenceObjective,
            ("cls.seq_relationship.weight", "pooler.dense.weight"),
            lambda heads, objective, _dir, _src: load_bert_pretraining_heads(heads, nsp=objective),
        ),
    )


def task_heads(model_type: str = "bert") -> tuple[Any, ...]:
    """The ``BertFor...`` fine-tuning classes (:mod:`ptm_core.checkpoints.hf.task_heads`)."""
    from ptm_core.checkpoints.hf.task_heads import bert_style_rows

    return bert_style_rows(
        "Bert",
        {
            "pooler.dense.weight": "bert.pooler.dense.weight",
            "pooler.dense.bias": "bert.pooler.dense.bias",
        },
        sequence_dropout=("classifier_dropout", "hidden_dropout_prob"),
        token_dropout=("classifier_dropout", "hidden_dropout_prob"),
    )
