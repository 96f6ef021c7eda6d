"""Hugging Face RoBERTa and XLM-RoBERTa <-> ptm encoder: config keys and tensor names.

RoBERTa (Liu et al., 2019) and XLM-R (Conneau et al., 2020) are BERT's post-LN layers
under BERT's tensor names, prefixed ``roberta.``. Two things differ:

- **positions**: RoBERTa numbers the real tokens from ``padding_idx + 1`` (``2``), so rows
  ``0..padding_idx`` of its table never meet a real token. ptm's table drops them on import
  (ptm position ``i`` = RoBERTa row ``padding_idx + 1 + i``; ``max_positions`` 514 -> 512)
  and export writes them back as zeros (the padding row is zero in RoBERTa too). With
  right padding, as ptm's collators pad, every real token gets the same vector; padding
  positions differ but no real token attends to them.
- **heads**: the MLM head is ``lm_head.{dense, layer_norm, bias}`` (decoder tied), the
  sequence classifier ``classifier.{dense, out_proj}`` on ``<s>`` (:func:`task_heads`).

No token types: ``type_vocab_size`` is 1. The config comes back as an
:class:`~ptm_core.encoders.config.HFEncoderConfig` that remembers ``model_type``, so
``ptm export --format hf`` writes a ``Roberta...`` / ``XLMRoberta...`` folder again.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ptm_core.checkpoints.hf.bert import (
    HF_BERT_CONFIG_KEYS,
    check_bert_layout,
    hf_bert_to_ptm,
    hf_config_to_encoder_config,
    ptm_to_hf_bert,
)
from ptm_core.checkpoints.hf.pretraining_heads import take_head_group
from ptm_core.checkpoints.io import CheckpointError
from ptm_core.encoders.config import EncoderConfig, HFEncoderConfig

MODEL_TYPES = ("roberta", "xlm-roberta")
#: The encoder's weight prefix in every ``RobertaFor...`` file.
HF_PREFIX = "roberta."
_CLASS_PREFIX = {"roberta": "Roberta", "xlm-roberta": "XLMRoberta"}
_POSITIONS = "embeddings.position_embeddings.weight"
# ptm MaskedLMHead (relative to the objective) -> RobertaLMHead.
MLM_NAMES = {
    "head.dense.weight": "lm_head.dense.weight",
    "head.dense.bias": "lm_head.dense.bias",
    "head.norm.weight": "lm_head.layer_norm.weight",
    "head.norm.bias": "lm_head.layer_norm.bias",
    "head.decoder.bias": "lm_head.bias",
}


def class_prefix(model_type: str) -> str:
    """``Roberta`` or ``XLMRoberta``: the start of every ``transformers`` class name."""
    return _CLASS_PREFIX[model_type]


def _offset(pad_token_id: int) -> int:
    return pad_token_id + 1


def config_from_hf(config: dict[str, Any], *, source: str) -> HFEncoderConfig:
    """Translate a ``RobertaConfig`` / ``XLMRobertaConfig`` dict into an encoder config.

    Raises:
        CheckpointError: another ``model_type``, relative positions, or a position table
            too short for RoBERTa's offset (the message names the file and the key).
    """
    model_type = config.get("model_type")
    if model_type not in MODEL_TYPES:
        raise CheckpointError(
            f"{source}: model_type {model_type!r} is not a RoBERTa config; expected one of "
            f"{', '.join(MODEL_TYPES)}"
        )
    values = dict(config)
    values.setdefault("pad_token_id", 1)  # RobertaConfig's default, not BERT's 0
    values["model_type"] = "bert"
    base = hf_config_to_encoder_config(values, source=source)
    offset = _offset(base.pad_token_id)
    if base.max_positions <= offset:
        raise CheckpointError(
            f"{source}: max_position_embeddings={base.max_positions} leaves no position for "
            f"a real token (RoBERTa numbers them from pad_token_id + 1 = {offset}); fix "
            "max_position_embeddings"
        )
    fields = {**base.to_dict(), "max_positions": base.max_positions - offset}
    return HFEncoderConfig(**fields, hf_model_type=str(model_type))


def config_to_hf(config: EncoderConfig) -> dict[str, Any]:
    """The ``RobertaConfig`` / ``XLMRobertaConfig`` dict of ``config``."""
    check_exportable(config)
    model_type = getattr(config, "hf_model_type", "roberta")
    hf = {theirs: getattr(config, ours) for theirs, ours in HF_BERT_CONFIG_KEYS.items()}
    hf["max_position_embeddings"] = config.max_positions + _offset(config.pad_token_id)
    hf.update(
        architectures=[f"{class_prefix(model_type)}Model"],
        model_type=model_type,
        position_embedding_type="absolute",
    )
    return hf


def check_exportable(config: EncoderConfig) -> None:
    """Raise unless ``config`` can be written as a ``RobertaModel``."""
    check_bert_layout(config, "hf-roberta")
    if config.factorised or config.share_layers != "none" or config.relative:
        raise CheckpointError(
            "a RoBERTa checkpoint has no factorised embeddings, layer sharing or relative "
            "positions; save this encoder with format='hf' or 'ptm'"
        )
    if config.type_vocab_size < 1:
        raise CheckpointError(
            "a RoBERTa checkpoint has a token-type table (type_vocab_size >= 1); this encoder "
            "has none: save it with format='hf-distilbert' or 'ptm'"
        )


def state_from_hf(
    state: dict[str, Tensor], config: EncoderConfig
) -> tuple[dict[str, Tensor], dict[str, Tensor], list[str], list[str]]:
    """Map RoBERTa tensors onto ptm names; the contract of
    :func:`~ptm_core.checkpoints.hf.bert.hf_bert_to_ptm` (heads: ``lm_head.*``)."""
    source: dict[str, Tensor] = {}
    for name, tensor in state.items():
        source[name.removeprefix(HF_PREFIX)] = tensor
    heads = {k: v for k, v in source.items() if k.startswith(("lm_head.", "pooler."))}
    as_bert = {k: v for k, v in source.items() if not k.startswith("lm_head.")}
    offset = _offset(config.pad_token_id)
    table = as_bert.get(_POSITIONS)
    # A table of the wrong length keeps its shape so check_state names it.
    if table is not None and table.shape[0] == config.max_positions + offset:
        as_bert[_POSITIONS] = table[offset:]
    encoder_state, _, missing, unknown = hf_bert_to_ptm(as_bert, config.num_layers)
    return encoder_state, heads, missing, unknown


def state_to_hf(state: dict[str, Tensor], config: EncoderConfig) -> dict[str, Tensor]:
    """Inverse of :func:`state_from_hf` for the encoder tensors (no prefix)."""
    out = ptm_to_hf_bert(state, config.num_layers)
    table = out[_POSITIONS]
    unused = torch.zeros(_offset(config.pad_token_id), table.shape[1], dtype=table.dtype)
    out[_POSITIONS] = torch.cat([unused, table], dim=0)
    return out


def hf_export_state(
    encoder_state: dict[str, Tensor],
    config: EncoderConfig,
    groups: dict[str, dict[str, Tensor]],
    used: list[str],
) -> tuple[dict[str, Tensor], str, str]:
    """The model file of a ``RobertaForMaskedLM`` (when an objective holds exactly the MLM
    head's tensors) or a bare ``RobertaModel``.

    Args:
        encoder_state: :func:`state_to_hf`'s tensors.
        config: the encoder's config (its ``hf_model_type`` names the classes).
        groups: the objectives' own tensors by objective name (``heads.safetensors``).
        used: objective names already exported; the MLM objective's name is appended.

    Returns:
        ``(state, architecture, auto_class)``.
    """
    prefix = class_prefix(getattr(config, "hf_model_type", "roberta"))
    state = {f"{HF_PREFIX}{k}": v for k, v in encoder_state.items()}
    mlm = take_head_group(groups, MLM_NAMES, used)
    if mlm:
        state.update(mlm)
        return state, f"{prefix}ForMaskedLM", "AutoModelForMaskedLM"
    return state, f"{prefix}Model", "AutoModel"


def pretraining_heads() -> tuple[Any, ...]:
    """The head a ``RobertaForMaskedLM`` folder fills: MLM (and its subclasses)."""
    from ptm_core.checkpoints.hf.pretraining_heads import masked_lm_head

    return (masked_lm_head(MLM_NAMES),)


def task_heads(model_type: str = "roberta") -> tuple[Any, ...]:
    """The ``RobertaFor...`` / ``XLMRobertaFor...`` fine-tuning classes of ``model_type``
    (:mod:`ptm_core.checkpoints.hf.task_heads`).

    The sequence classifier is ``RobertaClassificationHead`` (dropout, ``dense``, tanh,
    dropout, ``out_proj`` on ``<s>``): ptm's tanh pooler with ``input_dropout``. A tanh
    head without that first dropout exports to it too, as the two compute the same thing
    outside training. Multiple choice is BERT's: ``roberta.pooler`` + ``classifier``.
    """
    from ptm_core.checkpoints.hf.task_heads import (
        CLASSIFIER_NAMES,
        DENSE_OUT_PROJ_NAMES,
        QA_NAMES,
        HeadVariant,
        HFTaskHead,
        read_dropout,
        write_dropout,
    )

    prefix = class_prefix(model_type)
    dropout_keys = ("classifier_dropout", "hidden_dropout_prob")
    roberta_head = HeadVariant(input_dropout=True)

    def read_head(config: dict[str, Any], source: str) -> HeadVariant:
        dropout = read_dropout(dropout_keys)(config, source).dropout
        return HeadVariant(input_dropout=True, dropout=dropout)

    def write_head(variant: HeadVariant) -> dict[str, Any] | None:
        if variant.shape()[:2] != roberta_head.shape()[:2]:
            return None
        return {"classifier_dropout": variant.dropout}

    pooler = {
        "pooler.dense.weight": "roberta.pooler.dense.weight",
        "pooler.dense.bias": "roberta.pooler.dense.bias",
    }
    return (
        HFTaskHead(
            f"{prefix}ForSequenceClassification",
            "classification",
            DENSE_OUT_PROJ_NAMES,
            read_head,
            write_head,
            fixed="dropout, dense, tanh, dropout, out_proj on the first token",
        ),
        HFTaskHead(
            f"{prefix}ForTokenClassification",
            "tagging",
            CLASSIFIER_NAMES,
            read_dropout(dropout_keys),
            write_dropout("classifier_dropout"),
        ),
        HFTaskHead(f"{prefix}ForQuestionAnswering", "qa", QA_NAMES),
        HFTaskHead(
            f"{prefix}ForMultipleChoice",
            "multiple_choice",
            {**pooler, **CLASSIFIER_NAMES},
            read_dropout(dropout_keys),
            write_dropout("classifier_dropout"),
        ),
    )
