"""Hugging Face ELECTRA (``ElectraModel``, ``ElectraForPreTraining``, ``ElectraForMaskedLM``
and the ``ElectraFor<Task>`` classes of :func:`task_heads`) <-> ptm.

ELECTRA's discriminator is BERT with factorised embeddings: the layers use BERT's names
(mapped by :func:`~ptm_core.checkpoints.hf.bert.hf_bert_to_ptm`), ``embeddings_project`` maps onto
ptm's ``embedding_projection`` (present only when ``embedding_size != hidden_size``), and
``discriminator_predictions.{dense,dense_prediction}`` onto
:class:`~ptm_core.heads.TokenDiscriminatorHead`, and the generator's
``generator_predictions.{dense,LayerNorm}`` + ``generator_lm_head`` (``ElectraForMaskedLM``)
onto a :class:`~ptm_core.heads.MaskedLMHead` of width ``E`` tied to the token table.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ptm_core.checkpoints.hf.bert import HF_BERT_CONFIG_KEYS, hf_bert_to_ptm, ptm_to_hf_bert
from ptm_core.checkpoints.io import CheckpointError, check_state, read_weights
from ptm_core.encoders.config import EncoderConfig
from ptm_core.heads.mlm import MaskedLMHead
from ptm_core.heads.token_discriminator import TokenDiscriminatorHead

_CONFIG_KEYS = {**HF_BERT_CONFIG_KEYS, "embedding_size": "embedding_size"}
_PROJECTION = "embeddings_project"
_HEAD_PREFIXES = ("discriminator_predictions.", "generator_predictions.", "generator_lm_head.")
_DISCRIMINATOR_NAMES = {
    "dense.weight": "discriminator_predictions.dense.weight",
    "dense.bias": "discriminator_predictions.dense.bias",
    "prediction.weight": "discriminator_predictions.dense_prediction.weight",
    "prediction.bias": "discriminator_predictions.dense_prediction.bias",
}


def config_from_hf(config: dict[str, Any], *, source: str) -> EncoderConfig:
    """An :class:`EncoderConfig` for an ``ElectraConfig`` dict."""
    position_type = config.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise CheckpointError(
            f"{source}: position_embedding_type {position_type!r} is not supported "
            "(only 'absolute')"
        )
    values = {ours: config[theirs] for theirs, ours in _CONFIG_KEYS.items() if theirs in config}
    values["pad_token_id"] = values.get("pad_token_id") or 0
    values["embedding_size"] = values.get("embedding_size", 128)
    try:
        return EncoderConfig(**values)
    except ValueError as exc:
        raise CheckpointError(f"{source}: {exc}") from None


def config_to_hf(config: EncoderConfig) -> dict[str, Any]:
    """An ``ElectraConfig`` dict for ``config`` (post-LN, no layer sharing)."""
    if config.share_layers != "none" or config.norm_position != "post":
        raise CheckpointError(
            "only post-LN encoders without layer sharing can be exported as ELECTRA (got "
            f"share_layers={config.share_layers!r}, norm_position={config.norm_position!r}); "
            "save it with format='ptm'"
        )
    hf = {theirs: getattr(config, ours) for theirs, ours in _CONFIG_KEYS.items()}
    hf.update(
        embedding_size=config.embedding_width,
        architectures=["ElectraModel"],
        model_type="electra",
        position_embedding_type="absolute",
    )
    return hf


def state_from_hf(
    state: dict[str, Tensor], config: EncoderConfig
) -> tuple[dict[str, Tensor], dict[str, Tensor], list[str], list[str]]:
    """Map ELECTRA tensors onto ptm names; same contract as :func:`hf_bert_to_ptm`."""
    as_bert: dict[str, Tensor] = {}
    extra: dict[str, Tensor] = {}
    heads: dict[str, Tensor] = {}
    for name, tensor in state.items():
        key = name.removeprefix("electra.")
        if key.startswith(_HEAD_PREFIXES):
            heads[key] = tensor
        elif key.startswith(_PROJECTION + "."):
            extra["embedding_projection" + key[len(_PROJECTION) :]] = tensor
        else:
            as_bert[key] = tensor
    encoder_state, _, missing, unknown = hf_bert_to_ptm(as_bert, config.num_layers)
    encoder_state.update(extra)
    if config.factorised:
        missing += [
            f"{_PROJECTION}.{k}"
            for k in ("weight", "bias")
            if f"{_PROJECTION}.{k}" not in {n.removeprefix("electra.") for n in state}
        ]
    else:
        unknown += [f"{_PROJECTION}.{k.rpartition('.')[2]}" for k in extra]
        encoder_state = {k: v for k, v in encoder_state.items() if k not in extra}
    return encoder_state, heads, missing, unknown


def state_to_hf(state: dict[str, Tensor], config: EncoderConfig) -> dict[str, Tensor]:
    """ptm encoder tensors -> ``ElectraModel`` names (no ``electra.`` prefix)."""
    out = ptm_to_hf_bert(state, config.num_layers)
    if config.factorised:
        for kind in ("weight", "bias"):
            out[f"{_PROJECTION}.{kind}"] = state[f"embedding_projection.{kind}"].detach().clone()
    return out


def discriminator_head_from_hf(
    heads: dict[str, Tensor], head: TokenDiscriminatorHead, *, source: str = "checkpoint"
) -> None:
    """Load ``discriminator_predictions.*`` (prefix-free names) into ``head``."""
    absent = sorted(t for t in _DISCRIMINATOR_NAMES.values() if t not in heads)
    if absent:
        raise CheckpointError(
            f"{source}: head tensors {absent} are missing; this is not an "
            "ElectraForPreTraining checkpoint, load the encoder only"
        )
    check_state(head, {ours: heads[t] for ours, t in _DISCRIMINATOR_NAMES.items()}, source=source)


def discriminator_head_to_hf(head: TokenDiscriminatorHead) -> dict[str, Tensor]:
    """``head`` -> ``ElectraForPreTraining`` names."""
    own = head.state_dict()
    return {t: own[ours].detach().contiguous().clone() for ours, t in _DISCRIMINATOR_NAMES.items()}


def load_discriminator_head(path: str | Path, head: TokenDiscriminatorHead) -> None:
    """Load the discriminator head of an ``ElectraForPreTraining`` directory into ``head``."""
    weights, weights_path = read_weights(Path(path))
    heads = {k.removeprefix("electra."): v for k, v in weights.items()}
    discriminator_head_from_hf(heads, head, source=str(weights_path))


# ptm MaskedLMHead <- ElectraForMaskedLM's generator head (its decoder is tied to the table).
GENERATOR_NAMES = {
    "dense.weight": "generator_predictions.dense.weight",
    "dense.bias": "generator_predictions.dense.bias",
    "norm.weight": "generator_predictions.LayerNorm.weight",
    "norm.bias": "generator_predictions.LayerNorm.bias",
    "decoder.bias": "generator_lm_head.bias",
}


def generator_head_from_hf(
    heads: dict[str, Tensor], head: MaskedLMHead, *, source: str = "checkpoint"
) -> None:
    """Load ``ElectraForMaskedLM``'s ``generator_predictions`` (dense, GELU, LayerNorm) and
    ``generator_lm_head`` bias into an MLM head tied to the encoder's ``E``-wide table.

    Raises:
        CheckpointError: a head tensor is missing, or ``generator_lm_head.weight`` is not
            the token table (ELECTRA ties them).
    """
    absent = sorted(t for t in GENERATOR_NAMES.values() if t not in heads)
    if absent:
        raise CheckpointError(
            f"{source}: head tensors {absent} are missing; this is not an ElectraForMaskedLM "
            "checkpoint, load the encoder only"
        )
    tied = heads.get("generator_lm_head.weight")
    if tied is not None and not torch.equal(tied, head.decoder.weight.detach()):
        raise CheckpointError(
            f"{source}: generator_lm_head.weight differs from the token table; ELECTRA ties "
            "them. Build the MLM head on the encoder loaded from the same folder"
        )
    own = {ours: heads[theirs] for ours, theirs in GENERATOR_NAMES.items()}
    own["decoder.weight"] = head.decoder.weight.detach()
    check_state(head, own, source=source)


#: The encoder's weight prefix in an ``ElectraForPreTraining`` file.
HF_PREFIX = "electra."


#: Where ``ptm export --format hf`` writes an ELECTRA run's generator.
GENERATOR_DIR = "generator"


def generator_export(
    encoder_state: dict[str, Tensor], config: EncoderConfig, tensors: dict[str, Tensor]
) -> tuple[dict[str, Any], dict[str, Tensor]] | None:
    """The ``ElectraForMaskedLM`` (config dict, file tensors) of the replaced-token
    detection objective's generator, or ``None`` when ``tensors`` hold none.

    The generator shares the discriminator's embeddings (as in ELECTRA), so they come from
    ``encoder_state``; its layers, its ``E -> D_g`` projection and its MLM head from the
    objective's own tensors. Its width and depth are read off the tensors; its heads
    follow :func:`~ptm_core.objectives.electra.electra_generator`'s rule.

    Args:
        encoder_state: the discriminator's ptm-named tensors.
        config: the discriminator's config.
        tensors: the objective's tensors (``generator.*``, ``generator_head.*``, ...).
    """
    from ptm_core.objectives.electra import generator_heads

    own = {
        k.removeprefix("generator."): v for k, v in tensors.items() if k.startswith("generator.")
    }
    head = {
        k.removeprefix("generator_head."): v
        for k, v in tensors.items()
        if k.startswith("generator_head.")
    }
    if "layers.0.attention.qkv_proj.weight" not in own or set(head) != set(GENERATOR_NAMES):
        return None
    hidden = int(own["layers.0.attention.qkv_proj.weight"].shape[1])
    layers = 1 + max(int(k.split(".")[1]) for k in own if k.startswith("layers."))
    generator = replace(
        config,
        hidden_size=hidden,
        num_heads=generator_heads(config.num_heads, hidden, hidden / config.hidden_size),
        intermediate_size=int(own["layers.0.feed_forward.w_in.weight"].shape[0]),
        num_layers=layers,
        embedding_size=config.embedding_width,
    )
    embeddings = {k: v for k, v in encoder_state.items() if k.startswith("embeddings.")}
    state = {f"electra.{k}": v for k, v in state_to_hf({**embeddings, **own}, generator).items()}
    state.update({theirs: head[ours] for ours, theirs in GENERATOR_NAMES.items()})
    state["generator_lm_head.weight"] = encoder_state["embeddings.word.weight"]  # tied
    hf = config_to_hf(generator)
    hf["architectures"] = ["ElectraForMaskedLM"]
    return hf, state


def pretraining_heads() -> tuple[Any, ...]:
    """The heads an ``ElectraForPreTraining`` folder fills (the discriminator of replaced
    token detection) and an ``ElectraForMaskedLM`` folder (the generator's MLM head)."""
    from ptm_core.checkpoints.hf.pretraining_heads import HFHead
    from ptm_core.objectives.electra import ReplacedTokenDetectionObjective
    from ptm_core.objectives.mlm import MaskedLMObjective

    return (
        HFHead(
            ReplacedTokenDetectionObjective,
            ("discriminator_predictions.dense.weight",),
            lambda heads, objective, _dir, source: discriminator_head_from_hf(
                heads, objective.discriminator_head, source=source
            ),
        ),
        HFHead(
            MaskedLMObjective,
            ("generator_predictions.dense.weight", "generator_lm_head.bias"),
            lambda heads, objective, _dir, source: generator_head_from_hf(
                heads, objective.head, source=source
            ),
        ),
    )


def task_heads(model_type: str = "electra") -> tuple[Any, ...]:
    """The ``ElectraFor...`` fine-tuning classes (:mod:`ptm_core.checkpoints.hf.task_heads`).

    ``ElectraForSequenceClassification``'s head is fixed (``ElectraClassificationHead``:
    dropout, dense, GELU, dropout, ``out_proj`` on the first token); multiple choice reads
    its ``sequence_summary`` from the config (``summary_type``, ``summary_activation``).
    """
    from ptm_core.checkpoints.hf.task_heads import (
        CLASSIFIER_NAMES,
        DENSE_OUT_PROJ_NAMES,
        QA_NAMES,
        HeadVariant,
        HFTaskHead,
        read_dropout,
        read_summary,
        write_dropout,
        write_summary,
    )

    dropout_keys = ("classifier_dropout", "hidden_dropout_prob")
    electra_head = HeadVariant(activation="gelu", input_dropout=True)

    def read_head(config: dict[str, Any], source: str) -> HeadVariant:
        return replace(electra_head, dropout=read_dropout(dropout_keys)(config, source).dropout)

    def write_head(variant: HeadVariant) -> dict[str, Any] | None:
        if variant.shape() != electra_head.shape():
            return None
        return {"classifier_dropout": variant.dropout}

    summary = {
        "pooler.dense.weight": "sequence_summary.summary.weight",
        "pooler.dense.bias": "sequence_summary.summary.bias",
    }
    return (
        HFTaskHead(
            "ElectraForSequenceClassification",
            "classification",
            DENSE_OUT_PROJ_NAMES,
            read_head,
            write_head,
            fixed="dropout, dense, GELU, dropout, out_proj on the first token",
        ),
        HFTaskHead(
            "ElectraForTokenClassification",
            "tagging",
            CLASSIFIER_NAMES,
            read_dropout(dropout_keys),
            write_dropout("classifier_dropout"),
        ),
        HFTaskHead("ElectraForQuestionAnswering", "qa", QA_NAMES),
        HFTaskHead(
            "ElectraForMultipleChoice",
            "multiple_choice",
            {**summary, **CLASSIFIER_NAMES},
            lambda config, source: read_summary(
                config, source, default_type="first", default_activation="gelu"
            ),
            write_summary,
            fixed="a projection of the first or last token with tanh or GELU",
        ),
    )
