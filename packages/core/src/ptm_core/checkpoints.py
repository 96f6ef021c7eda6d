"""Encoder checkpoints: ptm's own format and Hugging Face BERT import/export.

ptm format: ``config.json`` (the :class:`EncoderConfig` fields plus ``ptm_format``) and
``model.safetensors`` with ptm's parameter names. Hugging Face BERT directories are read
(``model.safetensors``, or ``pytorch_model.bin`` through ``torch.load(weights_only=True)``,
never a full unpickle) and written with an explicit name map; query/key/value are
concatenated into ptm's fused projection and split again on export.
"""

from __future__ import annotations

import json
import logging
import pickle
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from ptm_core.atomic import atomic_directory
from ptm_core.encoders.config import EncoderConfig

if TYPE_CHECKING:
    from ptm_core.encoders.transformer import TransformerEncoder
    from ptm_core.tokenization import WordPieceTokenizer

logger = logging.getLogger(__name__)

PTM_ENCODER_FORMAT = "ptm-encoder/1"

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


class CheckpointError(ValueError):
    """A checkpoint cannot be loaded: the message names the file and what is wrong."""


_MISSING_CONFIG = (
    "a checkpoint directory needs config.json and model.safetensors (ptm) or a Hugging Face "
    "BERT config.json with model.safetensors/pytorch_model.bin"
)


def read_json_object(path: Path, missing: str = _MISSING_CONFIG) -> dict[str, Any]:
    """A checkpoint's JSON object file; every failure is a :class:`CheckpointError` naming
    the file (and the line of invalid JSON). ``missing`` says what to do when it is absent."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path}: missing; {missing}") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object")
    return data


def read_weights(directory: Path) -> tuple[dict[str, Tensor], Path]:
    """Read the weights file of a checkpoint directory without unpickling code.

    Returns:
        The tensors by name and the file they came from.
    """
    safetensors_path = directory / "model.safetensors"
    bin_path = directory / "pytorch_model.bin"
    try:
        if safetensors_path.exists():
            return load_file(safetensors_path), safetensors_path
        if bin_path.exists():
            state = torch.load(bin_path, map_location="cpu", weights_only=True)
            if not isinstance(state, dict):
                raise CheckpointError(f"{bin_path}: expected a dict of tensors")
            return state, bin_path
    except CheckpointError:
        raise
    except pickle.UnpicklingError:
        # torch's message advises weights_only=False: never pass that on for a file that
        # may come from anyone, and this file is not damaged, it holds more than tensors.
        raise CheckpointError(
            f"{bin_path}: holds Python code or objects besides tensors, which ptm will not "
            "unpickle (loading it could run that code). Use a model.safetensors file instead: "
            "most hubs publish one, or convert this file once where you trust its source"
        ) from None
    except Exception as exc:
        path = safetensors_path if safetensors_path.exists() else bin_path
        raise CheckpointError(
            f"{path}: cannot read the weights ({type(exc).__name__}: {exc}); the file is "
            "damaged or truncated, restore or re-export it"
        ) from None
    raise CheckpointError(
        f"{directory}: no model.safetensors or pytorch_model.bin; copy the weights file next "
        "to config.json"
    )


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

    encoder_state: dict[str, Tensor] = {}
    missing: list[str] = []
    used: set[str] = set()

    def take(hf_name: str) -> Tensor | None:
        if hf_name not in source:
            missing.append(hf_name)
            return None
        used.add(hf_name)
        return source[hf_name]

    for ours, theirs in _HF_EMBEDDING_NAMES.items():
        found = take(theirs)
        if found is not None:
            encoder_state[ours] = found
    for i in range(num_layers):
        hf_prefix = f"encoder.layer.{i}."
        for kind in ("weight", "bias"):
            parts = [take(f"{hf_prefix}attention.self.{p}.{kind}") for p in _HF_QKV]
            if all(p is not None for p in parts):
                encoder_state[f"layers.{i}.attention.qkv_proj.{kind}"] = torch.cat(
                    [p for p in parts if p is not None], dim=0
                )
            for ours, theirs in _HF_LAYER_NAMES.items():
                found = take(f"{hf_prefix}{theirs}.{kind}")
                if found is not None:
                    encoder_state[f"layers.{i}.{ours}.{kind}"] = found
    head_state = {k: v for k, v in source.items() if k.startswith(("pooler.", "cls."))}
    unknown = sorted(
        k for k in source if k not in used and not k.startswith(_HF_NON_ENCODER_PREFIXES)
    )
    return encoder_state, head_state, missing, unknown


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


def check_state(
    model: torch.nn.Module,
    state: dict[str, Tensor],
    *,
    source: str,
    strict: bool = True,
    unknown: list[str] | None = None,
    missing_source_names: list[str] | None = None,
) -> None:
    """Load ``state`` into ``model``, raising one error that lists every problem.

    Args:
        model: target module.
        state: tensors by ``model``'s parameter names.
        source: file the tensors came from (for the message).
        strict: whether missing or unknown tensors are errors.
        unknown: extra source names that mapped to nothing.
        missing_source_names: source-side names of tensors that were absent.
    """
    expected = model.state_dict()
    problems: list[str] = []
    mismatched = [
        f"{k}: checkpoint {tuple(v.shape)} vs model {tuple(expected[k].shape)}"
        for k, v in state.items()
        if k in expected and tuple(v.shape) != tuple(expected[k].shape)
    ]
    if mismatched:
        problems.append("shape mismatches:\n  " + "\n  ".join(mismatched))
    missing = missing_source_names or sorted(k for k in expected if k not in state)
    extra = sorted((unknown or []) + [k for k in state if k not in expected])
    if strict and missing:
        problems.append("missing tensors:\n  " + "\n  ".join(missing))
    if strict and extra:
        problems.append("unknown tensors:\n  " + "\n  ".join(extra))
    if problems:
        raise CheckpointError(
            f"{source}: the checkpoint does not fit the model:\n"
            + "\n".join(problems)
            + "\nCheck that config.json matches the weights, or pass strict=False to load "
            "what fits."
        )
    model.load_state_dict({k: v for k, v in state.items() if k in expected}, strict=False)


def load_encoder(path: str | Path, *, strict: bool = True, **overrides: Any) -> TransformerEncoder:
    """Load a ptm or Hugging Face BERT directory into a :class:`TransformerEncoder`."""
    from ptm_core.encoders.transformer import TransformerEncoder

    directory = Path(path)
    if not directory.is_dir():
        raise CheckpointError(
            f"{directory}: not a directory; pass the folder that holds config.json and the weights"
        )
    config_path = directory / "config.json"
    raw = read_json_object(config_path)
    weights, weights_path = read_weights(directory)
    family = _hf_family(raw)
    if family is not None:
        config = family.config_from_hf(raw, source=str(config_path))
        config = _apply_overrides(config, overrides, source=str(config_path))
        state, _, missing, unknown = family.state_from_hf(weights, config)
    elif is_hf_bert_config(raw):
        config = hf_config_to_encoder_config(raw, source=str(config_path))
        config = _apply_overrides(config, overrides, source=str(config_path))
        state, _, missing, unknown = hf_bert_to_ptm(weights, config.num_layers)
    else:
        try:
            config = EncoderConfig.from_dict(raw, source=str(config_path))
        except (TypeError, ValueError) as exc:
            raise CheckpointError(str(exc)) from None
        config = _apply_overrides(config, overrides, source=str(config_path))
        state, missing, unknown = weights, [], []
    encoder = TransformerEncoder(config)
    check_state(
        encoder,
        fill_shared_tensors(encoder, state),
        source=str(weights_path),
        strict=strict,
        unknown=unknown,
        missing_source_names=missing or None,
    )
    return encoder


def _hf_family(raw: dict[str, Any]) -> Any:
    """The :mod:`ptm_core.checkpoints_hf` module for an ALBERT/ELECTRA config, else None."""
    if "ptm_format" in raw:
        return None
    from ptm_core.checkpoints_hf import FAMILIES

    return FAMILIES.get(str(raw.get("model_type")))


def shared_tensor_groups(model: torch.nn.Module) -> list[list[str]]:
    """Names that refer to one tensor (ALBERT cross-layer sharing), in ``state_dict`` order.

    Only groups of two or more names are returned.
    """
    groups: dict[int, list[str]] = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        groups.setdefault(id(tensor), []).append(name)
    return [names for names in groups.values() if len(names) > 1]


def unique_state(model: torch.nn.Module) -> dict[str, Tensor]:
    """``model.state_dict()`` with every shared tensor kept once, under its first name.

    safetensors refuses to write one tensor under two names; :func:`fill_shared_tensors`
    restores the other names on load.
    """
    repeats = {name for names in shared_tensor_groups(model) for name in names[1:]}
    return {k: v.detach().contiguous() for k, v in model.state_dict().items() if k not in repeats}


def fill_shared_tensors(model: torch.nn.Module, state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Add the repeated names of shared tensors to ``state`` from the name that is present."""
    groups = shared_tensor_groups(model)
    if not groups:
        return state
    state = dict(state)
    for names in groups:
        present = next((n for n in names if n in state), None)
        if present is not None:
            for name in names:
                state.setdefault(name, state[present])
    return state


def _apply_overrides(
    config: EncoderConfig, overrides: dict[str, Any], *, source: str
) -> EncoderConfig:
    if not overrides:
        return config
    return EncoderConfig.from_dict({**config.to_dict(), **overrides}, source=source)


def save_encoder(
    encoder: TransformerEncoder,
    path: str | Path,
    *,
    format: str = "ptm",
    extra_writers: Sequence[Callable[[Path], object]] = (),
    tokenizer: WordPieceTokenizer | None = None,
    heads: torch.nn.Module | Mapping[str, Tensor] | None = None,
) -> Path:
    """Write an encoder checkpoint directory atomically.

    Args:
        encoder: the model.
        path: target directory.
        format: ``"ptm"``, or a Hugging Face layout: ``"hf-bert"`` (``BertModel``),
            ``"hf-albert"`` (``AlbertModel``), ``"hf-electra"`` (``ElectraModel``),
            ``"hf-xlnet"`` (``XLNetModel``), or ``"hf"`` = the one that fits (XLNet with
            relative positions, ALBERT when layers are shared, ELECTRA when the embeddings
            are factorised, else BERT).
        extra_writers: callables given the directory being written, to add files in the
            same atomic step (``tokenizer.save``, a model card).
        tokenizer: the model's tokenizer, written beside the weights: as ptm saves it, or
            for a Hugging Face format as the files ``AutoTokenizer`` loads
            (:mod:`ptm_core.checkpoints_hf.tokenizer_files`).
        heads: the pre-training objectives (an ``ObjectiveMix``, or its tensors named as in
            ``heads.safetensors``): ``heads.safetensors`` for ``"ptm"``; for a Hugging Face
            format the heads go into the model file under that family's names
            (``BertForPreTraining``'s ``cls.predictions.*`` / ``cls.seq_relationship.*``,
            ``AlbertForPreTraining``, ``ElectraForPreTraining``, ``XLNetLMHeadModel``), so
            ``AutoModelForMaskedLM`` loads the trained MLM head. Without heads a Hugging Face
            folder is a bare ``...Model``.
    """
    formats = ("ptm", "hf", "hf-bert", "hf-albert", "hf-electra", "hf-xlnet")
    if format not in formats:
        raise ValueError(f"unknown checkpoint format {format!r}; valid: {', '.join(formats)}")
    config = encoder.config
    if format == "hf":
        format = _default_hf_format(config)
    if format in ("hf-bert", "hf-albert", "hf-electra"):
        _check_bert_layout(config, format)
    head_state = _own_head_tensors(heads, encoder)
    if format != "ptm" and (tokenizer is not None or head_state):
        from ptm_core.checkpoints_hf.export import write_hf_encoder

        if format == "hf-bert" and (
            config.factorised or config.share_layers != "none" or config.relative
        ):
            raise CheckpointError(
                "a BERT checkpoint has no factorised embeddings, layer sharing or relative "
                "positions; export this encoder with format='hf' or 'ptm'"
            )
        with atomic_directory(path) as tmp:
            write_hf_encoder(
                encoder,
                tmp,
                family=format.removeprefix("hf-"),
                heads=head_state,
                tokenizer=tokenizer,
            )
            for writer in extra_writers:
                writer(tmp)
        return Path(path)
    if format != "ptm" and not extra_writers:
        logger.warning(
            "%s: a bare %s without pre-training heads or tokenizer files (AutoModelForMaskedLM "
            "would start its head from random init, AutoTokenizer would not load); pass "
            "tokenizer= and heads= to save_encoder, or export a run's final/ with "
            "`ptm export --format hf`",
            path,
            format,
        )
    if format == "ptm":
        config_dict = {"ptm_format": PTM_ENCODER_FORMAT, **config.to_dict()}
        state = unique_state(encoder)
    elif format == "hf-bert":
        if config.factorised or config.share_layers != "none" or config.relative:
            raise CheckpointError(
                "a BERT checkpoint has no factorised embeddings, layer sharing or relative "
                "positions; export "
                "this encoder with format='hf-albert' / 'hf-electra' or 'ptm'"
            )
        config_dict = encoder_config_to_hf(config)
        state = ptm_to_hf_bert(encoder.state_dict(), config.num_layers)
    else:
        from ptm_core.checkpoints_hf import FAMILIES

        family = FAMILIES[format.removeprefix("hf-")]
        config_dict = family.config_to_hf(config)
        state = family.state_to_hf(encoder.state_dict(), config)
    with atomic_directory(path) as tmp:
        (tmp / "config.json").write_text(json.dumps(config_dict, indent=2) + "\n")
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        if tokenizer is not None:
            tokenizer.save(tmp)
        if head_state:
            save_file(head_state, str(tmp / "heads.safetensors"))
        for writer in extra_writers:
            writer(tmp)
    return Path(path)


def _own_head_tensors(
    heads: torch.nn.Module | Mapping[str, Tensor] | None, encoder: torch.nn.Module
) -> dict[str, Tensor]:
    """The objectives' own tensors (those tied to the encoder left out), by state-dict name."""
    if heads is None:
        return {}
    state = heads.state_dict() if isinstance(heads, torch.nn.Module) else dict(heads)
    shared = {p.data_ptr() for p in encoder.parameters()}
    return {
        name: tensor.detach().contiguous()
        for name, tensor in state.items()
        if tensor.data_ptr() not in shared
    }


def _check_bert_layout(config: EncoderConfig, format: str) -> None:
    """Raise unless ``config`` has BERT's layer layout (what BERT, ALBERT and ELECTRA share)."""
    defaults = EncoderConfig()
    switches = (
        "position_encoding",
        "segment_encoding",
        "memory_length",
        "embedding_layer_norm",
        "norm_type",
        "bias",
        "attention_scale",
        "gated_feed_forward",
        # Pruned heads (`ptm compress --method prune-heads`): layers of different widths.
        "heads_per_layer",
    )
    changed = [
        f"{name}={getattr(config, name)!r}"
        for name in switches
        if getattr(config, name) != getattr(defaults, name)
    ]
    if changed:
        raise CheckpointError(
            f"format={format!r} needs BERT's layer layout, but this encoder has "
            f"{', '.join(changed)}; save it with format='ptm'"
            + (" or 'hf-xlnet'" if config.relative else "")
        )


def _default_hf_format(config: EncoderConfig) -> str:
    if config.relative:
        return "hf-xlnet"
    if config.share_layers == "all":
        return "hf-albert"
    if config.share_layers != "none":
        raise CheckpointError(
            f"share_layers={config.share_layers!r} has no Hugging Face equivalent; save this "
            "encoder with format='ptm'"
        )
    return "hf-electra" if config.factorised else "hf-bert"
