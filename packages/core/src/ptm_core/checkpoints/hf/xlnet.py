"""Hugging Face XLNet (``XLNetModel`` / ``XLNetLMHeadModel``) <-> ptm.

XLNet is the core encoder with ``position_encoding="relative"``,
``segment_encoding="relative"`` and no embedding LayerNorm. Hugging Face stores each
projection as one ``(D, h, d)`` parameter; ptm uses bias-free ``nn.Linear`` layers:

=========================================  ==================================================
Hugging Face (``transformer.`` optional)   ptm
=========================================  ==================================================
``word_embedding.weight``                  ``embeddings.word.weight``
``mask_emb`` ``(1, 1, D)``                 ``query_embedding`` ``(D,)``
``layer.{i}.rel_attn.{q,k,v,r}``           ``layers.{i}.attention.{query,key,value,position}_proj.weight``
                                           (``W = p.reshape(D, h*d).T``)
``layer.{i}.rel_attn.o``                   ``layers.{i}.attention.out_proj.weight`` (``o.reshape(D, h*d)``)
``layer.{i}.rel_attn.r_w_bias``            ``layers.{i}.attention.content_bias``
``layer.{i}.rel_attn.r_r_bias``            ``layers.{i}.attention.position_bias``
``layer.{i}.rel_attn.r_s_bias``            ``layers.{i}.attention.segment_bias``
``layer.{i}.rel_attn.seg_embed``           ``layers.{i}.attention.segment_embeddings``
``layer.{i}.rel_attn.layer_norm``          ``layers.{i}.attention_norm``
``layer.{i}.ff.layer_{1,2}``               ``layers.{i}.feed_forward.w_{in,out}``
``layer.{i}.ff.layer_norm``                ``layers.{i}.ffn_norm``
``lm_loss.{weight,bias}``                  ``PermutationLMObjective``: the tied table and
                                           ``output_bias`` (:func:`load_lm_head`)
=========================================  ==================================================
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from ptm_core.checkpoints.io import CheckpointError, read_weights
from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.xlnet import XLNetConfig

if TYPE_CHECKING:
    from ptm_core.objectives.permutation_lm import PermutationLMObjective

_CONFIG_KEYS = {
    "vocab_size": "vocab_size",
    "d_model": "hidden_size",
    "n_layer": "num_layers",
    "n_head": "num_heads",
    "d_inner": "intermediate_size",
    "ff_activation": "activation",
    "layer_norm_eps": "layer_norm_eps",
    "dropout": "dropout",
    "initializer_range": "initializer_range",
}
_PROJECTIONS = {"q": "query_proj", "k": "key_proj", "v": "value_proj", "r": "position_proj"}
_PARAMETERS = {
    "r_w_bias": "content_bias",
    "r_r_bias": "position_bias",
    "r_s_bias": "segment_bias",
    "seg_embed": "segment_embeddings",
}
_MODULES = {
    "rel_attn.layer_norm": "attention_norm",
    "ff.layer_1": "feed_forward.w_in",
    "ff.layer_2": "feed_forward.w_out",
    "ff.layer_norm": "ffn_norm",
}
_HEAD_PREFIXES = ("lm_loss.",)


def config_from_hf(config: dict[str, Any], *, source: str) -> XLNetConfig:
    """Our :class:`XLNetConfig` for a Hugging Face ``XLNetConfig`` dict (bidirectional
    attention)."""
    if config.get("attn_type", "bi") != "bi":
        raise CheckpointError(
            f"{source}: attn_type {config.get('attn_type')!r} is not supported; ptm loads "
            "XLNet with bidirectional attention (attn_type='bi'), the pre-training setting"
        )
    if config.get("bi_data"):
        raise CheckpointError(
            f"{source}: bi_data=true (forward and backward relative encodings in one batch) "
            "is not supported; set it to false"
        )
    if (config.get("clamp_len") or -1) > 0:
        raise CheckpointError(
            f"{source}: clamp_len={config['clamp_len']} is not supported (ptm never clamps "
            "relative distances); set it to -1"
        )
    d_model, n_head = config.get("d_model", 1024), config.get("n_head", 16)
    if config.get("d_head", d_model // n_head) * n_head != d_model:
        raise CheckpointError(
            f"{source}: d_head * n_head must equal d_model; got d_head={config.get('d_head')}, "
            f"n_head={n_head}, d_model={d_model}"
        )
    values = {ours: config[theirs] for theirs, ours in _CONFIG_KEYS.items() if theirs in config}
    values["attention_dropout"] = config.get("dropout", 0.1)
    values["pad_token_id"] = config.get("pad_token_id") or 0
    values["memory_length"] = config.get("mem_len") or 0
    try:
        return XLNetConfig(
            **values,
            position_encoding="relative",
            segment_encoding="relative",
            embedding_layer_norm=False,
            type_vocab_size=2,
        )
    except ValueError as exc:
        raise CheckpointError(f"{source}: {exc}") from None


def check_exportable(config: EncoderConfig) -> None:
    """Raise unless ``config`` is an XLNet-shaped encoder (see the module table)."""
    problems = []
    if not (isinstance(config, XLNetConfig) and config.segment_encoding == "relative"):
        problems.append("position_encoding and segment_encoding must both be 'relative'")
    if config.embedding_layer_norm:
        problems.append("embedding_layer_norm must be false")
    if config.norm_position != "post" or config.share_layers != "none" or config.factorised:
        problems.append("the layers must be post-LN, unshared, with unfactorised embeddings")
    if problems:
        raise CheckpointError(
            "this encoder cannot be exported as XLNet: "
            + "; ".join(problems)
            + ". Save it with format='ptm'"
        )


def config_to_hf(config: EncoderConfig) -> dict[str, Any]:
    """An ``XLNetConfig`` dict for an XLNet-shaped ``config``."""
    check_exportable(config)
    hf: dict[str, Any] = {theirs: getattr(config, ours) for theirs, ours in _CONFIG_KEYS.items()}
    assert isinstance(config, XLNetConfig)  # check_exportable
    hf.update(
        d_head=config.hidden_size // config.num_heads,
        attn_type="bi",
        bi_data=False,
        clamp_len=-1,
        mem_len=config.memory_length or None,
        pad_token_id=config.pad_token_id,
        architectures=["XLNetModel"],
        model_type="xlnet",
    )
    return hf


def state_from_hf(
    state: dict[str, Tensor], config: EncoderConfig
) -> tuple[dict[str, Tensor], dict[str, Tensor], list[str], list[str]]:
    """Map XLNet tensors onto ptm names.

    Returns:
        ``(encoder_state, head_state, missing, unknown)``: ``missing`` lists the Hugging
        Face names an XLNet of this size needs and the file lacks, ``unknown`` the names
        that are neither encoder nor head tensors.
    """
    width = config.hidden_size
    source = {name.removeprefix("transformer."): tensor for name, tensor in state.items()}
    used: set[str] = set()
    out: dict[str, Tensor] = {}
    missing: list[str] = []

    def take(name: str) -> Tensor | None:
        if name not in source:
            missing.append(name)
            return None
        used.add(name)
        return source[name]

    word = take("word_embedding.weight")
    if word is not None:
        out["embeddings.word.weight"] = word
    mask = take("mask_emb")
    if mask is not None:
        out["query_embedding"] = mask.reshape(-1)
    for i in range(config.num_layers):
        prefix, ours = f"layer.{i}.", f"layers.{i}."
        for theirs, name in _PROJECTIONS.items():
            found = take(f"{prefix}rel_attn.{theirs}")
            if found is not None:
                out[f"{ours}attention.{name}.weight"] = found.reshape(width, width).T.contiguous()
        found = take(f"{prefix}rel_attn.o")
        if found is not None:
            out[f"{ours}attention.out_proj.weight"] = found.reshape(width, width).contiguous()
        for theirs, name in _PARAMETERS.items():
            found = take(f"{prefix}rel_attn.{theirs}")
            if found is not None:
                out[f"{ours}attention.{name}"] = found
        for theirs, name in _MODULES.items():
            for kind in ("weight", "bias"):
                found = take(f"{prefix}{theirs}.{kind}")
                if found is not None:
                    out[f"{ours}{name}.{kind}"] = found
    head = {k: v for k, v in source.items() if k.startswith(_HEAD_PREFIXES)}
    unknown = sorted(k for k in source if k not in used and k not in head)
    return out, head, missing, unknown


def state_to_hf(state: dict[str, Tensor], config: EncoderConfig) -> dict[str, Tensor]:
    """ptm encoder tensors -> ``XLNetModel`` names (no ``transformer.`` prefix)."""
    check_exportable(config)
    width, heads = config.hidden_size, config.num_heads
    head_dim = width // heads
    out = {
        "word_embedding.weight": state["embeddings.word.weight"].detach().clone(),
        "mask_emb": state["query_embedding"].detach().reshape(1, 1, width).clone(),
    }
    for i in range(config.num_layers):
        prefix, ours = f"layer.{i}.", f"layers.{i}."
        for theirs, name in _PROJECTIONS.items():
            weight = state[f"{ours}attention.{name}.weight"].detach()
            out[f"{prefix}rel_attn.{theirs}"] = weight.T.reshape(width, heads, head_dim).clone()
        out[f"{prefix}rel_attn.o"] = (
            state[f"{ours}attention.out_proj.weight"].detach().reshape(width, heads, head_dim)
        ).clone()
        for theirs, name in _PARAMETERS.items():
            out[f"{prefix}rel_attn.{theirs}"] = state[f"{ours}attention.{name}"].detach().clone()
        for theirs, name in _MODULES.items():
            for kind in ("weight", "bias"):
                out[f"{prefix}{theirs}.{kind}"] = state[f"{ours}{name}.{kind}"].detach().clone()
    return {name: tensor.contiguous() for name, tensor in out.items()}


def load_lm_head(path: str | Path, objective: PermutationLMObjective) -> None:
    """Load the output layer of an ``XLNetLMHeadModel`` directory into ``objective``.

    XLNet's ``lm_loss`` is tied to the token table (which the encoder loads); only its
    bias is the head's own tensor. The tied weight in the file must equal the table.

    Raises:
        CheckpointError: the file has no ``lm_loss.bias`` (an ``XLNetModel`` without a
            head), or its size does not fit the objective's vocabulary.
    """
    weights, weights_path = read_weights(Path(path))
    heads = {k.removeprefix("transformer."): v for k, v in weights.items()}
    bias = heads.get("lm_loss.bias")
    if bias is None:
        raise CheckpointError(
            f"{weights_path}: no lm_loss.bias; this is not an XLNetLMHeadModel checkpoint, "
            "load the encoder only (the permutation-LM bias then starts at zero)"
        )
    if bias.shape != objective.output_bias.shape:
        raise CheckpointError(
            f"{weights_path}: lm_loss.bias has {bias.shape[0]} entries but the objective's "
            f"vocabulary has {objective.output_bias.shape[0]}; build it with the checkpoint's "
            "vocab_size"
        )
    weight = heads.get("lm_loss.weight")
    if weight is not None and not torch.equal(weight, objective.table.weight.detach()):
        raise CheckpointError(
            f"{weights_path}: lm_loss.weight differs from the token table; XLNet ties them. "
            "Build the objective on the encoder loaded from the same directory"
        )
    with torch.no_grad():
        objective.output_bias.copy_(bias)


#: The encoder's weight prefix in an ``XLNetLMHeadModel`` file.
HF_PREFIX = "transformer."


def pretraining_heads() -> tuple[Any, ...]:
    """The head an ``XLNetLMHeadModel`` folder fills: the permutation LM's output bias."""
    from ptm_core.checkpoints.hf.pretraining_heads import HFHead
    from ptm_core.objectives.permutation_lm import PermutationLMObjective

    return (
        HFHead(
            PermutationLMObjective,
            ("lm_loss.bias",),
            lambda _heads, objective, directory, _src: load_lm_head(directory, objective),
        ),
    )


def task_heads(model_type: str = "xlnet") -> tuple[Any, ...]:
    """The ``XLNetFor...`` fine-tuning classes (:mod:`ptm_core.checkpoints.hf.task_heads`).

    Sequence classification and multiple choice read ``sequence_summary`` (by default the
    last token, tanh) and ``logits_proj``; the token classifier has no dropout;
    ``XLNetForQuestionAnsweringSimple`` is BERT's span head (the beam-search
    ``XLNetForQuestionAnswering`` has no ptm counterpart).
    """
    from ptm_core.checkpoints.hf.task_heads import (
        CLASSIFIER_NAMES,
        QA_NAMES,
        HeadVariant,
        HFTaskHead,
        read_summary,
        write_summary,
    )

    pooled = {
        "pooler.dense.weight": "sequence_summary.summary.weight",
        "pooler.dense.bias": "sequence_summary.summary.bias",
        "classifier.weight": "logits_proj.weight",
        "classifier.bias": "logits_proj.bias",
    }

    def summary(config: dict[str, Any], source: str) -> HeadVariant:
        return read_summary(config, source, default_type="last", default_activation="tanh")

    fixed = "a projection of the first or last token with tanh or GELU"
    return (
        HFTaskHead(
            "XLNetForSequenceClassification",
            "classification",
            pooled,
            summary,
            write_summary,
            fixed=fixed,
        ),
        HFTaskHead(
            "XLNetForTokenClassification",
            "tagging",
            CLASSIFIER_NAMES,
            lambda _config, _source: HeadVariant(dropout=0.0),
            lambda variant: {} if variant.shape() == HeadVariant().shape() else None,
        ),
        HFTaskHead("XLNetForQuestionAnsweringSimple", "qa", QA_NAMES),
        HFTaskHead(
            "XLNetForMultipleChoice", "multiple_choice", pooled, summary, write_summary, fixed=fixed
        ),
    )
