"""Hugging Face ModernBERT <-> ptm's ModernBERT encoder: config keys and tensor names.

``ModernBertModel``'s tensors are bare (``embeddings.tok_embeddings.weight``, ...), those
of every ``ModernBertFor...`` class sit under ``model.``; the heads are ``head.*``
(``ModernBertPredictionHead``: dense, activation, norm), ``decoder.*`` (the MLM decoder,
tied to the token table) and ``classifier.*``.

Names: ``layers.<i>.attn.Wqkv`` is ptm's fused ``attention.qkv_proj`` (the same
``[q; k; v]`` order), ``attn.Wo`` its ``out_proj``; ``mlp.Wi`` is ``[W_gate; W_in]`` of
ptm's :class:`~ptm_core.modules.feed_forward.GatedFeedForward` (``act(first half) *
second half``), ``mlp.Wo`` its ``w_out``; ``attn_norm`` / ``mlp_norm`` are the layer's two
norms (layer 0 has no ``attn_norm``). Biases exist only where ``attention_bias``,
``mlp_bias`` and ``norm_bias`` say.

The MLM head: ptm's :class:`~ptm_core.heads.mlm.MaskedLMHead` always has a dense bias and a
norm bias. On import the missing ones are zeros (``classifier_bias`` / ``norm_bias``
false); on export the folder says ``classifier_bias: true`` and, when the model's norms
have no bias, the head norm's bias ``beta`` is folded into the decoder bias
(``E (g * n + beta) + b = E (g * n) + (E beta + b)`` with ``E`` the tied token table): the
same logits.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import Tensor

from ptm_core.checkpoints.io import CheckpointError
from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.modernbert import ModernBertConfig

logger = logging.getLogger(__name__)

MODEL_TYPE = "modernbert"
#: The encoder's weight prefix in every ``ModernBertFor...`` file.
HF_PREFIX = "model."
#: Tensor prefixes of ModernBERT's heads (never the encoder's).
HEAD_PREFIXES = ("head.", "decoder.", "classifier.")
# HF config key -> ModernBertConfig field, copied as they are.
_CONFIG_KEYS = {
    "vocab_size": "vocab_size",
    "hidden_size": "hidden_size",
    "intermediate_size": "intermediate_size",
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "hidden_activation": "activation",
    "max_position_embeddings": "max_positions",
    "initializer_range": "initializer_range",
    "initializer_cutoff_factor": "initializer_cutoff_factor",
    "norm_eps": "layer_norm_eps",
    "norm_bias": "norm_bias",
    "attention_bias": "attention_bias",
    "attention_dropout": "attention_dropout",
    "embedding_dropout": "dropout",
    "mlp_bias": "mlp_bias",
    "local_attention": "local_attention",
    "pad_token_id": "pad_token_id",
}
_THETA_KEYS = {"full_attention": "global_rope_theta", "sliding_attention": "local_rope_theta"}
# ptm MaskedLMHead (relative to the objective) -> ModernBertForMaskedLM.
MLM_NAMES = {
    "head.dense.weight": "head.dense.weight",
    "head.dense.bias": "head.dense.bias",
    "head.norm.weight": "head.norm.weight",
    "head.norm.bias": "head.norm.bias",
    "head.decoder.bias": "decoder.bias",
}


def config_from_hf(config: dict[str, Any], *, source: str) -> ModernBertConfig:
    """Translate a ``ModernBertConfig`` dict.

    Raises:
        CheckpointError: another ``model_type``, a layer pattern that is not "every n-th
            layer global", a rotary scaling ptm lacks, or values ptm refuses (the message
            names the file and the key).
    """
    model_type = config.get("model_type")
    if model_type != MODEL_TYPE:
        raise CheckpointError(
            f"{source}: model_type {model_type!r} is not a ModernBERT config; expected "
            f"{MODEL_TYPE!r}"
        )
    defaults = ModernBertConfig()
    values: dict[str, Any] = {
        ours: config[theirs]
        for theirs, ours in _CONFIG_KEYS.items()
        if config.get(theirs) is not None
    }
    values.setdefault("pad_token_id", 50283)  # transformers' ModernBertConfig default
    num_layers = int(values.get("num_layers", defaults.num_layers))
    values["global_attn_every_n_layers"] = _global_every(config, num_layers, source)
    values.update(_thetas(config, source))
    if config.get("classifier_activation", "gelu") != values.get("activation", "gelu"):
        logger.warning(
            "%s: classifier_activation %r differs from hidden_activation; ptm's heads use "
            "hidden_activation",
            source,
            config.get("classifier_activation"),
        )
    try:
        return ModernBertConfig(**values)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{source}: {exc}") from None


def _global_every(config: dict[str, Any], num_layers: int, source: str) -> int:
    types = config.get("layer_types")
    if types is None:
        return int(config.get("global_attn_every_n_layers", 3))
    if len(types) != num_layers:
        raise CheckpointError(
            f"{source}: layer_types has {len(types)} entries for num_hidden_layers="
            f"{num_layers}; fix layer_types"
        )
    for every in range(1, num_layers + 1):
        pattern = [
            "full_attention" if i % every == 0 else "sliding_attention" for i in range(num_layers)
        ]
        if list(types) == pattern:
            return every
    raise CheckpointError(
        f"{source}: layer_types {list(types)} is not ModernBERT's pattern (layers 0, n, 2n, ... "
        "full_attention, the others sliding_attention), the only one ptm builds"
    )


def _thetas(config: dict[str, Any], source: str) -> dict[str, float]:
    thetas: dict[str, float] = {}
    for layer_type, field in _THETA_KEYS.items():
        legacy = "global_rope_theta" if field == "global_rope_theta" else "local_rope_theta"
        params = (config.get("rope_parameters") or {}).get(layer_type) or {}
        rope_type = params.get("rope_type", "default")
        if rope_type != "default":
            raise CheckpointError(
                f"{source}: rope_parameters.{layer_type}.rope_type is {rope_type!r}; ptm builds "
                "plain rotary positions only ('default')"
            )
        theta = params.get("rope_theta", config.get(legacy))
        if theta is not None:
            thetas[field] = float(theta)
    return thetas


def check_exportable(config: EncoderConfig) -> None:
    """Raise unless ``config`` is a ModernBERT's (the only encoder this format holds)."""
    if not isinstance(config, ModernBertConfig):
        raise CheckpointError(
            "format='hf-modernbert' holds ModernBERT encoders only (rotary positions, GeGLU); "
            "this encoder is another family: save it with format='hf' or 'ptm'"
        )


def config_to_hf(config: EncoderConfig) -> dict[str, Any]:
    """The ``ModernBertConfig`` dict of ``config`` (the heads as ptm computes them:
    ``classifier_bias`` true, ``classifier_activation`` the encoder's)."""
    check_exportable(config)
    assert isinstance(config, ModernBertConfig)
    hf: dict[str, Any] = {theirs: getattr(config, ours) for theirs, ours in _CONFIG_KEYS.items()}
    every = config.global_attn_every_n_layers
    hf.update(
        model_type=MODEL_TYPE,
        architectures=["ModernBertModel"],
        mlp_dropout=0.0,
        global_attn_every_n_layers=every,
        layer_types=[
            "full_attention" if config.is_global(i) else "sliding_attention"
            for i in range(config.num_layers)
        ],
        rope_parameters={
            layer_type: {"rope_type": "default", "rope_theta": getattr(config, field)}
            for layer_type, field in _THETA_KEYS.items()
        },
        classifier_bias=True,
        classifier_activation=config.activation,
        decoder_bias=True,
        tie_word_embeddings=True,
        # ptm's heads read no special token id; transformers' defaults (50281, ...) would
        # point outside a ptm vocabulary.
        bos_token_id=None,
        eos_token_id=None,
        cls_token_id=None,
        sep_token_id=None,
    )
    return hf


def _layer_names(config: EncoderConfig, index: int) -> dict[str, str]:
    """ptm name -> Hugging Face name of layer ``index``'s tensors (without Wi, which splits)."""
    assert isinstance(config, ModernBertConfig)
    ours, theirs = f"layers.{index}.", f"layers.{index}."
    names = {
        f"{ours}attention.qkv_proj.weight": f"{theirs}attn.Wqkv.weight",
        f"{ours}attention.out_proj.weight": f"{theirs}attn.Wo.weight",
        f"{ours}ffn_norm.weight": f"{theirs}mlp_norm.weight",
        f"{ours}feed_forward.w_out.weight": f"{theirs}mlp.Wo.weight",
    }
    if index > 0:
        names[f"{ours}attention_norm.weight"] = f"{theirs}attn_norm.weight"
    if config.attention_bias:
        names[f"{ours}attention.qkv_proj.bias"] = f"{theirs}attn.Wqkv.bias"
        names[f"{ours}attention.out_proj.bias"] = f"{theirs}attn.Wo.bias"
    if config.mlp_bias:
        names[f"{ours}feed_forward.w_out.bias"] = f"{theirs}mlp.Wo.bias"
    if config.norm_bias:
        names[f"{ours}ffn_norm.bias"] = f"{theirs}mlp_norm.bias"
        if index > 0:
            names[f"{ours}attention_norm.bias"] = f"{theirs}attn_norm.bias"
    return names


def _names(config: EncoderConfig) -> dict[str, str]:
    assert isinstance(config, ModernBertConfig)
    names = {
        "embeddings.word.weight": "embeddings.tok_embeddings.weight",
        "embeddings.norm.weight": "embeddings.norm.weight",
        "final_norm.weight": "final_norm.weight",
    }
    if config.norm_bias:
        names["embeddings.norm.bias"] = "embeddings.norm.bias"
        names["final_norm.bias"] = "final_norm.bias"
    for index in range(config.num_layers):
        names.update(_layer_names(config, index))
    return names


def state_from_hf(
    state: dict[str, Tensor], config: EncoderConfig
) -> tuple[dict[str, Tensor], dict[str, Tensor], list[str], list[str]]:
    """Map ModernBERT tensors onto ptm names.

    Returns:
        ``(encoder_state, heads, missing, unknown)``: ptm-named encoder tensors, the head
        tensors (``head.*``, ``decoder.*``, ``classifier.*``), the Hugging Face names that
        were expected but absent, and the names that mean nothing to ModernBERT.
    """
    assert isinstance(config, ModernBertConfig)
    source = {name.removeprefix(HF_PREFIX): tensor for name, tensor in state.items()}
    heads = {k: v for k, v in source.items() if k.startswith(HEAD_PREFIXES)}
    encoder_state: dict[str, Tensor] = {}
    missing: list[str] = []
    used: set[str] = set(heads)
    for ours, theirs in _names(config).items():
        if theirs in source:
            encoder_state[ours] = source[theirs]
            used.add(theirs)
        else:
            missing.append(theirs)
    width = config.intermediate_size
    for index in range(config.num_layers):
        for part in ("weight", "bias"):
            theirs = f"layers.{index}.mlp.Wi.{part}"
            if part == "bias" and not config.mlp_bias:
                continue
            if theirs not in source:
                missing.append(theirs)
                continue
            used.add(theirs)
            fused = source[theirs]
            if fused.shape[0] != 2 * width:  # keep the shape so check_state names it
                encoder_state[f"layers.{index}.feed_forward.w_gate.{part}"] = fused
                continue
            encoder_state[f"layers.{index}.feed_forward.w_gate.{part}"] = fused[:width]
            encoder_state[f"layers.{index}.feed_forward.w_in.{part}"] = fused[width:]
    unknown = sorted(name for name in source if name not in used)
    return encoder_state, heads, missing, unknown


def state_to_hf(state: dict[str, Tensor], config: EncoderConfig) -> dict[str, Tensor]:
    """Inverse of :func:`state_from_hf` for the encoder tensors (no prefix)."""
    assert isinstance(config, ModernBertConfig)
    out = {theirs: state[ours] for ours, theirs in _names(config).items()}
    for index in range(config.num_layers):
        ffn = f"layers.{index}.feed_forward."
        parts = ("weight", "bias") if config.mlp_bias else ("weight",)
        for part in parts:
            out[f"layers.{index}.mlp.Wi.{part}"] = torch.cat(
                [state[f"{ffn}w_gate.{part}"], state[f"{ffn}w_in.{part}"]], dim=0
            )
    return out


def export_mlm_head(
    head: dict[str, Tensor], token_table: Tensor, config: EncoderConfig
) -> dict[str, Tensor]:
    """ptm's MLM head tensors (``MLM_NAMES`` keys) as ``ModernBertForMaskedLM``'s, the
    norm bias folded into the decoder bias when the model's norms have none."""
    assert isinstance(config, ModernBertConfig)
    out = {theirs: head[ours].contiguous() for ours, theirs in MLM_NAMES.items()}
    if not config.norm_bias:
        beta = out.pop("head.norm.bias")
        out["decoder.bias"] = out["decoder.bias"] + token_table.float() @ beta.float()
    return out


def hf_export_state(
    encoder_state: dict[str, Tensor],
    config: EncoderConfig,
    groups: dict[str, dict[str, Tensor]],
    used: list[str],
) -> tuple[dict[str, Tensor], str, str]:
    """The model file of a ``ModernBertForMaskedLM`` (when an objective holds exactly the
    MLM head's tensors) or a bare ``ModernBertModel``.

    Returns:
        ``(state, architecture, auto_class)``.
    """
    for objective, tensors in groups.items():
        if objective not in used and set(tensors) == set(MLM_NAMES):
            used.append(objective)
            table = encoder_state["embeddings.tok_embeddings.weight"]
            state = {f"{HF_PREFIX}{k}": v for k, v in encoder_state.items()}
            state.update(export_mlm_head(tensors, table, config))
            return state, "ModernBertForMaskedLM", "AutoModelForMaskedLM"
    return dict(encoder_state), "ModernBertModel", "AutoModel"


def _load_mlm_head(
    heads: dict[str, Tensor], objective: Any, _directory: object, _source: str
) -> None:
    """Copy ``ModernBertForMaskedLM``'s head into ptm's MLM head; absent biases are zeros."""
    params = dict(objective.named_parameters())
    with torch.no_grad():
        for ours, theirs in MLM_NAMES.items():
            target = params[ours]
            tensor = heads.get(theirs)
            if tensor is None:
                target.zero_()
                continue
            if tensor.shape != target.shape:
                raise ValueError(
                    f"{theirs}: checkpoint {tuple(tensor.shape)} vs model {tuple(target.shape)}"
                )
            target.copy_(tensor)


def pretraining_heads() -> tuple[Any, ...]:
    """The head a ``ModernBertForMaskedLM`` folder fills: MLM (and its subclasses)."""
    from ptm_core.checkpoints.hf.pretraining_heads import HFHead
    from ptm_core.objectives.mlm import MaskedLMObjective

    return (HFHead(MaskedLMObjective, ("head.dense.weight", "head.norm.weight"), _load_mlm_head),)


# ptm ModernBertTaskHead -> every ModernBertFor<Task>'s head tensors.
_TASK_NAMES = {
    "dense.weight": "head.dense.weight",
    "dense.bias": "head.dense.bias",
    "norm.weight": "head.norm.weight",
    "norm.bias": "head.norm.bias",
    "classifier.weight": "classifier.weight",
    "classifier.bias": "classifier.bias",
}
_POOLS = {"cls": "first", "mean": "mean"}


def _read_head(config: dict[str, Any], source: str) -> Any:
    from ptm_core.checkpoints.hf.task_heads import HeadVariant

    pooling = config.get("classifier_pooling", "cls")
    if pooling not in _POOLS:
        raise CheckpointError(
            f"{source}: classifier_pooling {pooling!r} is not one of {', '.join(_POOLS)}"
        )
    activation = config.get("classifier_activation", "gelu")
    if activation != config.get("hidden_activation", "gelu"):
        raise CheckpointError(
            f"{source}: classifier_activation {activation!r} differs from hidden_activation "
            f"{config.get('hidden_activation', 'gelu')!r}; ptm's ModernBERT heads use the "
            "encoder's activation. Set classifier_activation to it or load the encoder alone"
        )
    dropout = float(config.get("classifier_dropout") or 0.0)
    return HeadVariant(pool=_POOLS[pooling], activation=str(activation), dropout=dropout)


def _write_head(variant: Any) -> dict[str, Any] | None:
    pooling = {ours: theirs for theirs, ours in _POOLS.items()}.get(variant.pool)
    if pooling is None:
        return None
    return {
        "classifier_pooling": pooling,
        "classifier_dropout": variant.dropout,
        "classifier_bias": True,
    }


def _export_head(head: dict[str, Tensor], config: EncoderConfig) -> dict[str, Tensor]:
    """Fold the head norm's bias into the classifier bias when the folder's norms have
    none (``classifier`` is linear: ``W (g n + beta) + b = W (g n) + (W beta + b)``)."""
    assert isinstance(config, ModernBertConfig)
    if config.norm_bias:
        return head
    out = dict(head)
    beta = out.pop("head.norm.bias")
    out["classifier.bias"] = out["classifier.bias"] + out["classifier.weight"] @ beta
    return out


def task_heads(model_type: str = MODEL_TYPE) -> tuple[Any, ...]:
    """The four ``ModernBertFor...`` classes (:mod:`ptm_core.checkpoints.hf.task_heads`):
    each reads ``head`` (``ModernBertPredictionHead``), dropout and ``classifier``; the
    sequence-level ones pool ``classifier_pooling`` (``cls`` or ``mean``)."""
    from ptm_core.checkpoints.hf.task_heads import HFTaskHead

    optional = ("head.dense.bias", "head.norm.bias")
    kinds = {
        "SequenceClassification": "classification",
        "TokenClassification": "tagging",
        "QuestionAnswering": "qa",
        "MultipleChoice": "multiple_choice",
    }
    return tuple(
        HFTaskHead(
            f"ModernBertFor{task}",
            kind,
            _TASK_NAMES,
            _read_head,
            _write_head,
            fixed="a prediction head (dense, activation, norm) and a classifier",
            optional=optional,
            export=_export_head,
        )
        for task, kind in kinds.items()
    )
