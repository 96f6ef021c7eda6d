"""LXMERT to and from Hugging Face (``LxmertModel`` / ``LxmertForPreTraining``).

ptm never imports transformers: these functions read and write state dicts and
``config.json`` files only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import Tensor

from ptm_core.atomic import atomic_directory
from ptm_core.checkpoints import CheckpointError, read_weights
from ptm_core.models.pretraining import PretrainingModel
from ptm_core.tokenization import VocabInfo
from ptm_multimodal.feature_spec import FeatureSpec
from ptm_multimodal.lxmert import LxmertModel
from ptm_multimodal.lxmert_loading import build_lxmert_pretraining, load_checked
from ptm_multimodal.lxmert_pretraining import (
    VISUAL_LOSS_NORMALIZER,
    LxmertImageQAObjective,
    LxmertMaskedLMObjective,
    LxmertMatchingObjective,
    LxmertObjectPredictionObjective,
)

_PREFIX = "lxmert."
# Hugging Face LxmertConfig key -> ptm builder argument.
HF_LXMERT_CONFIG_KEYS = {
    "vocab_size": "vocab_size",
    "hidden_size": "hidden_size",
    "num_attention_heads": "num_heads",
    "intermediate_size": "intermediate_size",
    "l_layers": "l_layers",
    "r_layers": "r_layers",
    "x_layers": "x_layers",
    "visual_feat_dim": "visual_embedding_dim",
    "visual_pos_dim": "box_size",
    "max_position_embeddings": "max_positions",
    "type_vocab_size": "type_vocab_size",
    "hidden_dropout_prob": "dropout",
    "attention_probs_dropout_prob": "attention_dropout",
    "hidden_act": "activation",
    "initializer_range": "initializer_range",
    "pad_token_id": "pad_token_id",
}
# BERT layer: ptm TransformerLayer module -> HF LxmertLayer module.
_BERT_LAYER = {
    "attention.out_proj": "attention.output.dense",
    "attention_norm": "attention.output.LayerNorm",
    "feed_forward.w_in": "intermediate.dense",
    "feed_forward.w_out": "output.dense",
    "ffn_norm": "output.LayerNorm",
}


def _layer_pairs(ours: str, theirs: str, *, cross_stream: str | None = None) -> Iterator[tuple]:
    """``(kind, ours, theirs)`` for one self-attention + FFN layer.

    ``cross_stream`` (``lang``/``visn``) names the HF sub-modules of an ``LxmertXLayer``.
    """
    if cross_stream is None:
        qkv = [f"{theirs}attention.self.{n}" for n in ("query", "key", "value")]
        yield "qkv", f"{ours}attention.qkv_proj", qkv
        for a, b in _BERT_LAYER.items():
            yield "plain", f"{ours}{a}", f"{theirs}{b}"
        return
    s = cross_stream
    qkv = [f"{theirs}{s}_self_att.self.{n}" for n in ("query", "key", "value")]
    yield "qkv", f"{ours}attention.qkv_proj", qkv
    yield "plain", f"{ours}attention.out_proj", f"{theirs}{s}_self_att.output.dense"
    yield "plain", f"{ours}attention_norm", f"{theirs}{s}_self_att.output.LayerNorm"
    yield "plain", f"{ours}feed_forward.w_in", f"{theirs}{s}_inter.dense"
    yield "plain", f"{ours}feed_forward.w_out", f"{theirs}{s}_output.dense"
    yield "plain", f"{ours}ffn_norm", f"{theirs}{s}_output.LayerNorm"


def _model_pairs(l_layers: int, r_layers: int, x_layers: int) -> Iterator[tuple]:
    """``(kind, ptm module, HF module(s))`` of the backbone (HF names without ``lxmert.``)."""
    e = "language_encoder.embeddings."
    yield "plain", f"{e}word", "embeddings.word_embeddings"
    yield "plain", f"{e}position", "embeddings.position_embeddings"
    yield "plain", f"{e}token_type", "embeddings.token_type_embeddings"
    yield "plain", f"{e}norm", "embeddings.LayerNorm"
    v = "encoder.visn_fc."
    yield "plain", "visual_encoder.feature_projection", f"{v}visn_fc"
    yield "plain", "visual_encoder.feature_norm", f"{v}visn_layer_norm"
    yield "plain", "visual_encoder.box_projection", f"{v}box_fc"
    yield "plain", "visual_encoder.box_norm", f"{v}box_layer_norm"
    for i in range(l_layers):
        yield from _layer_pairs(f"language_encoder.layers.{i}.", f"encoder.layer.{i}.")
    for i in range(r_layers):
        yield from _layer_pairs(f"object_layers.{i}.", f"encoder.r_layers.{i}.")
    for i in range(x_layers):
        ours, theirs = f"cross_layers.{i}.", f"encoder.x_layers.{i}."
        att = f"{theirs}visual_attention."
        yield "plain", f"{ours}cross_attention.q_proj", f"{att}att.query"
        yield "kv", f"{ours}cross_attention.kv_proj", [f"{att}att.key", f"{att}att.value"]
        yield "plain", f"{ours}cross_attention.out_proj", f"{att}output.dense"
        yield "plain", f"{ours}cross_norm", f"{att}output.LayerNorm"
        yield from _layer_pairs(f"{ours}language_layer.", theirs, cross_stream="lang")
        yield from _layer_pairs(f"{ours}vision_layer.", theirs, cross_stream="visn")
    yield "plain", "pooler", "pooler.dense"


def _head_pairs(names: dict[str, str], decoders: list[str]) -> Iterator[tuple]:
    """Head modules: ``names`` maps role (lm/obj/itm/qa) to its objective's name."""
    if "lm" in names:
        p = f"objectives.objectives.{names['lm']}.head."
        yield "plain", f"{p}transform.dense", "cls.predictions.transform.dense"
        yield "plain", f"{p}transform.norm", "cls.predictions.transform.LayerNorm"
    if "itm" in names:
        yield "plain", f"objectives.objectives.{names['itm']}.classifier", "cls.seq_relationship"
    if "obj" in names:
        p = f"objectives.objectives.{names['obj']}.head."
        yield "plain", f"{p}transform.dense", "obj_predict_head.transform.dense"
        yield "plain", f"{p}transform.norm", "obj_predict_head.transform.LayerNorm"
        for key in decoders:
            yield "plain", f"{p}decoders.{key}", f"obj_predict_head.decoder_dict.{key}"
    if "qa" in names:
        p = f"objectives.objectives.{names['qa']}.head."
        yield "plain", f"{p}dense", "answer_head.logit_fc.0"
        yield "plain", f"{p}norm", "answer_head.logit_fc.2"
        yield "plain", f"{p}out", "answer_head.logit_fc.3"


def _kinds(name: str) -> tuple[str, ...]:
    return (
        ("weight",)
        if name.endswith(("embeddings", ".word", ".position", ".token_type"))
        else (
            "weight",
            "bias",
        )
    )


def _roles(wrapped: PretrainingModel) -> dict[str, str]:
    """role (lm/obj/itm/qa) -> objective name in ``wrapped``'s mix."""
    classes = {
        LxmertMaskedLMObjective: "lm",
        LxmertObjectPredictionObjective: "obj",
        LxmertMatchingObjective: "itm",
        LxmertImageQAObjective: "qa",
    }
    roles: dict[str, str] = {}
    for name, objective in wrapped.objectives:
        role = classes.get(type(objective))
        if role is not None:
            roles[role] = name
    return roles


def hf_lxmert_config_to_ptm(
    config: dict[str, Any], *, source: str = "config.json"
) -> dict[str, Any]:
    """The :func:`~ptm_multimodal.lxmert.lxmert` arguments of a Hugging Face ``LxmertConfig``.

    Raises:
        CheckpointError: not an LXMERT config, or a key is missing (named).
    """
    if config.get("model_type") != "lxmert":
        raise CheckpointError(
            f"{source}: field 'model_type' is {config.get('model_type')!r}, expected 'lxmert'"
        )
    numbers: dict[str, Any] = {}
    for theirs, ours in HF_LXMERT_CONFIG_KEYS.items():
        if theirs in config:
            numbers[ours] = config[theirs]
        elif theirs not in ("pad_token_id", "initializer_range", "type_vocab_size"):
            raise CheckpointError(f"{source}: field {theirs!r} is missing from the LXMERT config")
    numbers["pad_token_id"] = numbers.get("pad_token_id") or 0
    return numbers


def lxmert_config_to_hf(wrapped: PretrainingModel, *, heads: bool = True) -> dict[str, Any]:
    """A Hugging Face ``LxmertConfig`` dict for ``wrapped`` (its model and head sizes).

    Raises:
        CheckpointError: a model Hugging Face's LXMERT cannot express (pre-LN, or a
            LayerNorm epsilon other than LXMERT's fixed 1e-12).
    """
    model = wrapped.encoder
    if not isinstance(model, LxmertModel):
        raise CheckpointError(f"not an LXMERT: {type(model).__name__}")
    numbers = model.hyperparameters
    language = model.language_encoder.config
    if numbers.get("layer_norm_eps", 1e-12) != 1e-12:
        raise CheckpointError(
            f"config.json field layer_norm_eps is {numbers['layer_norm_eps']}: Hugging Face's "
            "LXMERT fixes it at 1e-12; pre-train with model.layer_norm_eps=1e-12 to export"
        )
    hf: dict[str, Any] = {"model_type": "lxmert", "architectures": ["LxmertModel"]}
    for theirs, ours in HF_LXMERT_CONFIG_KEYS.items():
        hf[theirs] = numbers[ours] if ours in numbers else getattr(language, ours)
    hf["intermediate_size"] = language.intermediate_size
    roles = _roles(wrapped) if heads else {}
    objectives = dict(wrapped.objectives.objectives)
    obj = objectives.get(roles.get("obj", ""))
    obj_head: Any = None if obj is None else obj.head
    decoders = {} if obj_head is None else {k: d.out_features for k, d in obj_head.decoders.items()}
    qa = objectives.get(roles.get("qa", ""))
    hf.update(
        num_qa_labels=qa.num_answers if qa is not None else 1,
        num_object_labels=decoders.get("obj", 1),
        num_attr_labels=decoders.get("attr", 1),
        visual_obj_loss="obj" in decoders,
        visual_attr_loss="attr" in decoders,
        visual_feat_loss="feat" in decoders,
        task_mask_lm="lm" in roles,
        task_matched="itm" in roles,
        task_obj_predict=obj is not None,
        task_qa=qa is not None,
        visual_loss_normalizer=VISUAL_LOSS_NORMALIZER,
        tie_word_embeddings=True,
    )
    return hf


def _split(kind: str, tensor: Tensor, parts: int) -> list[Tensor]:
    return list(tensor.chunk(parts, dim=0)) if kind != "plain" else [tensor]


def hf_lxmert_to_ptm(
    state: dict[str, Tensor], config: dict[str, Any], roles: dict[str, str] | None = None
) -> tuple[dict[str, Tensor], list[str], list[str]]:
    """Map a Hugging Face ``LxmertForPreTraining``/``LxmertModel`` state dict onto
    :class:`~ptm_core.models.pretraining.PretrainingModel` names.

    Args:
        state: HF tensors (``lxmert.`` prefix optional).
        config: the HF config dict (layer counts, which heads exist).
        roles: role (lm/obj/itm/qa) -> ptm objective name (default: the role itself).

    Returns:
        ``(ptm state, missing HF names, unused HF names)``.
    """
    roles = dict(roles or {r: r for r in ("lm", "obj", "itm", "qa")})
    source = {k.removeprefix(_PREFIX): v for k, v in state.items()}
    used: set[str] = set()
    missing: list[str] = []
    out: dict[str, Tensor] = {}

    def take(name: str) -> Tensor | None:
        if name not in source:
            missing.append(name)
            return None
        used.add(name)
        return source[name]

    decoders = [k for k in ("obj", "attr", "feat") if config.get(f"visual_{k}_loss", True)]
    present = {
        "lm": "cls.predictions.bias" in source,
        "itm": "cls.seq_relationship.weight" in source,
        "obj": "obj_predict_head.transform.dense.weight" in source,
        "qa": "answer_head.logit_fc.0.weight" in source,
    }
    roles = {r: n for r, n in roles.items() if present[r]}
    numbers = (config["l_layers"], config["r_layers"], config["x_layers"])
    for _kind, ours, theirs in [*_model_pairs(*numbers), *_head_pairs(roles, decoders)]:
        prefix = "" if ours.startswith("objectives.") else "encoder."
        for suffix in _kinds(ours):
            names = theirs if isinstance(theirs, list) else [theirs]
            tensors = [take(f"{n}.{suffix}") for n in names]
            if all(t is not None for t in tensors):
                out[f"{prefix}{ours}.{suffix}"] = torch.cat(tensors, dim=0)  # type: ignore[arg-type]
    if "lm" in roles:
        lm = f"objectives.objectives.{roles['lm']}.head.decoder."
        bias = take("cls.predictions.bias")
        if bias is not None:
            out[f"{lm}bias"] = bias
        out[f"{lm}weight"] = out["encoder.language_encoder.embeddings.word.weight"]
        used.update(("cls.predictions.decoder.weight", "cls.predictions.decoder.bias"))
    unused = sorted(k for k in source if k not in used and not k.endswith("position_ids"))
    return out, missing, unused


def ptm_to_hf_lxmert(wrapped: PretrainingModel) -> tuple[dict[str, Tensor], str]:
    """HF-named tensors of a ptm LXMERT with its heads (inverse of :func:`hf_lxmert_to_ptm`).

    Returns:
        ``(state, architecture)``: ``LxmertForPreTraining`` names (``lxmert.`` prefix) when
        the ``lm`` and ``itm`` heads are present, else ``LxmertModel`` names.
    """
    model = wrapped.encoder
    if not isinstance(model, LxmertModel):
        raise CheckpointError(f"not an LXMERT: {type(model).__name__}")
    roles = _roles(wrapped)
    full = "lm" in roles and "itm" in roles
    if not full:
        roles = {}
    objectives = dict(wrapped.objectives.objectives)
    obj_head: Any = objectives[roles["obj"]].head if "obj" in roles else None
    decoders = list(obj_head.decoders) if obj_head is not None else []
    ours_state = {k: v.detach() for k, v in wrapped.state_dict().items()}
    numbers = (
        len(model.language_encoder.layers),
        len(model.object_layers),
        len(model.cross_layers),
    )
    out: dict[str, Tensor] = {}
    for kind, ours, theirs in [*_model_pairs(*numbers), *_head_pairs(roles, decoders)]:
        prefix = "" if ours.startswith("objectives.") else "encoder."
        hf_prefix = _PREFIX if full and not ours.startswith("objectives.") else ""
        names = theirs if isinstance(theirs, list) else [theirs]
        for suffix in _kinds(ours):
            parts = _split(kind, ours_state[f"{prefix}{ours}.{suffix}"], len(names))
            for name, part in zip(names, parts, strict=True):
                out[f"{hf_prefix}{name}.{suffix}"] = part.clone()
    if not full:
        return {k: v.contiguous() for k, v in out.items()}, "LxmertModel"
    bias = ours_state[f"objectives.objectives.{roles['lm']}.head.decoder.bias"].clone()
    out["cls.predictions.bias"] = bias
    # tied to the word table in transformers; stored as its own copy (safetensors)
    out["cls.predictions.decoder.weight"] = out[
        f"{_PREFIX}embeddings.word_embeddings.weight"
    ].clone()
    return {k: v.contiguous() for k, v in out.items()}, "LxmertForPreTraining"


def save_hf_lxmert(wrapped: PretrainingModel, path: str | Path) -> str:
    """Write ``config.json`` + ``model.safetensors`` that transformers' LXMERT loads.

    Returns:
        The architecture written: ``LxmertForPreTraining`` (with ``lm`` and ``itm`` heads;
        ``obj``/``qa`` heads when present) or ``LxmertModel``.
    """
    state, architecture = ptm_to_hf_lxmert(wrapped)
    hf_config = lxmert_config_to_hf(wrapped, heads=architecture == "LxmertForPreTraining")
    hf_config["architectures"] = [architecture]
    with atomic_directory(path, kind="export") as tmp:
        (tmp / "config.json").write_text(json.dumps(hf_config, indent=2) + "\n")
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    return architecture


def load_hf_lxmert(
    path: str | Path, vocab: VocabInfo | None = None, *, feature_spec: FeatureSpec | None = None
) -> PretrainingModel:
    """Load a Hugging Face LXMERT directory (``config.json`` + weights).

    ``LxmertForPreTraining`` weights give the objectives ``lm``, ``obj`` (with the
    checkpoint's ``obj``/``attr``/``feat`` decoders), ``itm`` and ``qa``
    (``num_answers = num_qa_labels``) as far as the checkpoint has their heads;
    ``LxmertModel`` weights give the bare model with the ``itm`` classifier absent.

    Raises:
        CheckpointError: not an LXMERT, or tensors missing/unknown (named).
    """
    directory = Path(path)
    config_path = directory / "config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{config_path}: cannot read the config ({exc})") from None
    numbers = hf_lxmert_config_to_ptm(config, source=str(config_path))
    state, _ = read_weights(directory)
    source = {k.removeprefix(_PREFIX) for k in state}
    heads: dict[str, dict[str, Any]] = {}
    if "cls.predictions.bias" in source:
        heads["lm"] = {"class": "LxmertMaskedLMObjective"}
    if "obj_predict_head.transform.dense.weight" in source:
        heads["obj"] = {
            "class": "LxmertObjectPredictionObjective",
            "num_classes": config["num_object_labels"] if config.get("visual_obj_loss") else 0,
            "num_attributes": config["num_attr_labels"] if config.get("visual_attr_loss") else 0,
            "feature_regression": bool(config.get("visual_feat_loss", True)),
        }
    if "cls.seq_relationship.weight" in source:
        heads["itm"] = {"class": "LxmertMatchingObjective"}
    if "answer_head.logit_fc.0.weight" in source:
        heads["qa"] = {"class": "LxmertImageQAObjective", "num_answers": config["num_qa_labels"]}
    if not heads:  # LxmertModel: no heads; the mix needs one, matching has no HF tensors
        heads["itm"] = {"class": "LxmertMatchingObjective"}
    wrapped = build_lxmert_pretraining(numbers, vocab, heads, feature_spec=feature_spec)
    mapped, missing, unused = hf_lxmert_to_ptm(state, config)
    if missing or unused:
        raise CheckpointError(
            f"{directory}: not an LXMERT state dict: missing {sorted(missing)}, unknown {unused}"
        )
    load_checked(
        wrapped, mapped, directory, allow_missing=("itm.classifier",) if len(heads) == 1 else ()
    )
    return wrapped
