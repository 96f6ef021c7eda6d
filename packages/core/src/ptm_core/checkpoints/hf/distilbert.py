"""Hugging Face DistilBERT <-> ptm encoder: config keys and tensor names.

DistilBERT (Sanh et al., 2019) is BERT's post-LN layer under other names, with no token
types (``type_vocab_size=0``) and LayerNorm epsilon fixed at 1e-12:

=====================================  ===============================================
ptm                                    Hugging Face (``distilbert.`` prefix)
=====================================  ===============================================
``embeddings.{word,position}``         ``embeddings.{word,position}_embeddings``
``embeddings.norm``                    ``embeddings.LayerNorm``
``layers.i.attention.qkv_proj``        ``transformer.layer.i.attention.{q,k,v}_lin``
``layers.i.attention.out_proj``        ``transformer.layer.i.attention.out_lin``
``layers.i.attention_norm``            ``transformer.layer.i.sa_layer_norm``
``layers.i.feed_forward.w_{in,out}``   ``transformer.layer.i.ffn.lin{1,2}``
``layers.i.ffn_norm``                  ``transformer.layer.i.output_layer_norm``
=====================================  ===============================================

The MLM head is ``vocab_transform`` -> activation -> ``vocab_layer_norm`` ->
``vocab_projector`` (tied to the token table); the sequence classifier is
``pre_classifier`` -> ReLU -> ``classifier`` on the first token. A table of sinusoidal
positions (``sinusoidal_pos_embds``) is saved as weights like a learned one, so it loads
as a learned table and is exported with the option off.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from ptm_core.checkpoints.hf.bert import check_bert_layout, read_bert_layout
from ptm_core.checkpoints.hf.pretraining_heads import take_head_group
from ptm_core.checkpoints.io import CheckpointError
from ptm_core.encoders.config import EncoderConfig, HFEncoderConfig

HF_PREFIX = "distilbert."
# DistilBertConfig key -> EncoderConfig field.
CONFIG_KEYS = {
    "vocab_size": "vocab_size",
    "dim": "hidden_size",
    "n_layers": "num_layers",
    "n_heads": "num_heads",
    "hidden_dim": "intermediate_size",
    "max_position_embeddings": "max_positions",
    "dropout": "dropout",
    "attention_dropout": "attention_dropout",
    "activation": "activation",
    "pad_token_id": "pad_token_id",
    "initializer_range": "initializer_range",
}
_EMBEDDINGS = {
    "embeddings.word.weight": "embeddings.word_embeddings.weight",
    "embeddings.position.weight": "embeddings.position_embeddings.weight",
    "embeddings.norm.weight": "embeddings.LayerNorm.weight",
    "embeddings.norm.bias": "embeddings.LayerNorm.bias",
}
_LAYER = {
    "attention.out_proj": "attention.out_lin",
    "attention_norm": "sa_layer_norm",
    "feed_forward.w_in": "ffn.lin1",
    "feed_forward.w_out": "ffn.lin2",
    "ffn_norm": "output_layer_norm",
}
_QKV = ("q_lin", "k_lin", "v_lin")
_HEAD_PREFIXES = ("vocab_", "pre_classifier.", "classifier.", "qa_outputs.")
# ptm MaskedLMHead (relative to the objective) -> DistilBertForMaskedLM.
MLM_NAMES = {
    "head.dense.weight": "vocab_transform.weight",
    "head.dense.bias": "vocab_transform.bias",
    "head.norm.weight": "vocab_layer_norm.weight",
    "head.norm.bias": "vocab_layer_norm.bias",
    "head.decoder.bias": "vocab_projector.bias",
}


def config_from_hf(config: dict[str, Any], *, source: str) -> HFEncoderConfig:
    """Translate a ``DistilBertConfig`` dict into an encoder config.

    Raises:
        CheckpointError: another ``model_type`` or an impossible value (names the file).
    """
    if config.get("model_type") != "distilbert":
        raise CheckpointError(
            f"{source}: model_type {config.get('model_type')!r} is not a DistilBERT config; "
            "expected 'distilbert'"
        )
    values = {ours: config[theirs] for theirs, ours in CONFIG_KEYS.items() if theirs in config}
    if values.get("pad_token_id") is None:
        values["pad_token_id"] = 0
    try:
        return HFEncoderConfig(
            **values, type_vocab_size=0, layer_norm_eps=1e-12, hf_model_type="distilbert"
        )
    except ValueError as exc:
        raise CheckpointError(f"{source}: {exc}") from None


def check_exportable(config: EncoderConfig) -> None:
    """Raise unless ``config`` can be written as a ``DistilBertModel``."""
    check_bert_layout(config, "hf-distilbert")
    if config.factorised or config.share_layers != "none" or config.relative:
        raise CheckpointError(
            "a DistilBERT checkpoint has no factorised embeddings, layer sharing or relative "
            "positions; save this encoder with format='hf' or 'ptm'"
        )
    if config.type_vocab_size != 0 or config.layer_norm_eps != 1e-12:
        raise CheckpointError(
            f"a DistilBERT checkpoint has no token types and LayerNorm eps 1e-12; this encoder "
            f"has type_vocab_size={config.type_vocab_size}, layer_norm_eps="
            f"{config.layer_norm_eps}: save it with format='hf-bert' or 'ptm'"
        )


def config_to_hf(config: EncoderConfig) -> dict[str, Any]:
    """The ``DistilBertConfig`` dict of ``config``."""
    check_exportable(config)
    hf = {theirs: getattr(config, ours) for theirs, ours in CONFIG_KEYS.items()}
    hf.update(
        architectures=["DistilBertModel"], model_type="distilbert", sinusoidal_pos_embds=False
    )
    return hf


def state_from_hf(
    state: dict[str, Tensor], config: EncoderConfig
) -> tuple[dict[str, Tensor], dict[str, Tensor], list[str], list[str]]:
    """Map DistilBERT tensors onto ptm names; the contract of
    :func:`~ptm_core.checkpoints.hf.bert.hf_bert_to_ptm` (heads: ``vocab_*``)."""
    source = {name.removeprefix(HF_PREFIX): tensor for name, tensor in state.items()}
    out, missing, used = read_bert_layout(
        source,
        config.num_layers,
        embeddings=_EMBEDDINGS,
        layer=_LAYER,
        qkv=tuple(f"attention.{p}" for p in _QKV),
        layer_prefix="transformer.layer.{}.",
    )
    heads = {k: v for k, v in source.items() if k.startswith("vocab_")}
    unknown = sorted(
        k
        for k in source
        if k not in used and not k.startswith(_HEAD_PREFIXES) and k != "embeddings.position_ids"
    )
    return out, heads, missing, unknown


def state_to_hf(state: dict[str, Tensor], config: EncoderConfig) -> dict[str, Tensor]:
    """Inverse of :func:`state_from_hf` for the encoder tensors (no prefix)."""
    out: dict[str, Tensor] = {theirs: state[ours] for ours, theirs in _EMBEDDINGS.items()}
    for i in range(config.num_layers):
        prefix = f"transformer.layer.{i}."
        for kind in ("weight", "bias"):
            fused = state[f"layers.{i}.attention.qkv_proj.{kind}"]
            for name, part in zip(_QKV, fused.chunk(3, dim=0), strict=True):
                out[f"{prefix}attention.{name}.{kind}"] = part
            for ours, theirs in _LAYER.items():
                out[f"{prefix}{theirs}.{kind}"] = state[f"layers.{i}.{ours}.{kind}"]
    return {k: v.detach().contiguous().clone() for k, v in out.items()}


def hf_export_state(
    encoder_state: dict[str, Tensor],
    config: EncoderConfig,
    groups: dict[str, dict[str, Tensor]],
    used: list[str],
) -> tuple[dict[str, Tensor], str, str]:
    """A ``DistilBertForMaskedLM`` file (when an objective holds exactly the MLM head's
    tensors) or a bare ``DistilBertModel``; see
    :func:`~ptm_core.checkpoints.hf.roberta.hf_export_state`."""
    state = {f"{HF_PREFIX}{k}": v for k, v in encoder_state.items()}
    mlm = take_head_group(groups, MLM_NAMES, used)
    if mlm:
        state.update(mlm)
        return state, "DistilBertForMaskedLM", "AutoModelForMaskedLM"
    return state, "DistilBertModel", "AutoModel"


def pretraining_heads() -> tuple[Any, ...]:
    """The head a ``DistilBertForMaskedLM`` folder fills: MLM (and its subclasses)."""
    from ptm_core.checkpoints.hf.pretraining_heads import masked_lm_head

    return (masked_lm_head(MLM_NAMES),)


def task_heads(model_type: str = "distilbert") -> tuple[Any, ...]:
    """The ``DistilBertFor...`` fine-tuning classes (:mod:`ptm_core.checkpoints.hf.task_heads`).

    Sequence classification and multiple choice are ``pre_classifier`` -> ReLU -> dropout
    (``seq_classif_dropout``) -> ``classifier`` on the first token: ptm's pooler with
    ``activation="relu"``. The token classifier's dropout is the encoder's ``dropout``.
    """
    from ptm_core.checkpoints.hf.task_heads import (
        CLASSIFIER_NAMES,
        QA_NAMES,
        HeadVariant,
        HFTaskHead,
        read_dropout,
    )

    relu_head = HeadVariant(activation="relu")

    def read_head(config: dict[str, Any], source: str) -> HeadVariant:
        dropout = read_dropout(("seq_classif_dropout",))(config, source).dropout
        return HeadVariant(activation="relu", dropout=dropout)

    def write_head(variant: HeadVariant) -> dict[str, Any] | None:
        if variant.shape() != relu_head.shape():
            return None
        return {"seq_classif_dropout": variant.dropout}

    pooled = {
        "pooler.dense.weight": "pre_classifier.weight",
        "pooler.dense.bias": "pre_classifier.bias",
        **CLASSIFIER_NAMES,
    }
    fixed = "pre_classifier, ReLU, dropout, classifier on the first token"
    return (
        HFTaskHead(
            "DistilBertForSequenceClassification",
            "classification",
            pooled,
            read_head,
            write_head,
            fixed=fixed,
        ),
        HFTaskHead(
            "DistilBertForTokenClassification",
            "tagging",
            CLASSIFIER_NAMES,
            read_dropout(("dropout",)),
            lambda variant: {} if variant.shape() == HeadVariant().shape() else None,
        ),
        HFTaskHead("DistilBertForQuestionAnswering", "qa", QA_NAMES),
        HFTaskHead(
            "DistilBertForMultipleChoice",
            "multiple_choice",
            pooled,
            read_head,
            write_head,
            fixed=fixed,
        ),
    )
