"""Import and export of Hugging Face XLM checkpoints (``XLMModel``, ``XLMWithLMHeadModel``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import Tensor

from ptm_core.atomic import atomic_directory
from ptm_core.checkpoints import CheckpointError, check_state, read_weights
from ptm_core.encoders import EncoderConfig, TransformerEncoder
from ptm_multilingual.model import XLMEncoder, XLMForMaskedLM

_HF_PREFIX = "transformer."
# Per-layer names: HF module list -> ptm layer sub-module.
_LAYER_MAP = {
    "attentions.{i}.out_lin": "attention.out_proj",
    "layer_norm1.{i}": "attention_norm",
    "ffns.{i}.lin1": "feed_forward.w_in",
    "ffns.{i}.lin2": "feed_forward.w_out",
    "layer_norm2.{i}": "ffn_norm",
}
# Names are those of XLMForMaskedLM: encoder (XLMEncoder) -> encoder (TransformerEncoder).
_TOP_MAP = {
    "embeddings.weight": "encoder.encoder.embeddings.word.weight",
    "position_embeddings.weight": "encoder.encoder.embeddings.position.weight",
    "layer_norm_emb.weight": "encoder.encoder.embeddings.norm.weight",
    "layer_norm_emb.bias": "encoder.encoder.embeddings.norm.bias",
    "lang_embeddings.weight": "encoder.lang_embeddings.weight",
}


def hf_config_to_xlm(config: dict[str, Any], *, source: str) -> tuple[EncoderConfig, list[str]]:
    """Encoder config and language list of a Hugging Face ``XLMConfig`` dict.

    Raises:
        CheckpointError: a variant ptm does not implement (causal, adaptive softmax).
    """
    for key, bad in (("causal", True), ("asm", True), ("is_encoder", False)):
        if config.get(key, not bad) == bad:
            raise CheckpointError(
                f"{source}: XLM with {key}={bad} is not supported (ptm implements the "
                "bidirectional encoder with a plain softmax output)"
            )
    dim = int(config.get("emb_dim", 2048))
    n_langs = int(config.get("n_langs", 1))
    id2lang = config.get("id2lang") or {}
    languages = [str(id2lang.get(str(i), id2lang.get(i, f"lang{i}"))) for i in range(n_langs)]
    encoder_config = EncoderConfig(
        vocab_size=int(config.get("vocab_size", 30145)),
        hidden_size=dim,
        num_layers=int(config.get("n_layers", 12)),
        num_heads=int(config.get("n_heads", 16)),
        intermediate_size=4 * dim,  # fixed in XLM
        max_positions=int(config.get("max_position_embeddings", 512)),
        type_vocab_size=0,
        dropout=float(config.get("dropout", 0.1)),
        attention_dropout=float(config.get("attention_dropout", 0.1)),
        activation="gelu" if config.get("gelu_activation", True) else "relu",
        layer_norm_eps=float(config.get("layer_norm_eps", 1e-12)),
        norm_position="post",
        pad_token_id=int(config.get("pad_index", 2)),
        initializer_range=float(config.get("init_std", 0.02)),
    )
    return encoder_config, languages


def hf_xlm_to_ptm(state: dict[str, Tensor], num_layers: int) -> tuple[dict[str, Tensor], list[str]]:
    """Rename HF XLM tensors to :class:`XLMForMaskedLM` names.

    Returns:
        ``(state, unknown)``: mapped tensors, and source names that map to nothing.
    """
    out: dict[str, Tensor] = {}
    unknown: list[str] = []
    state = {k.removeprefix(_HF_PREFIX): v for k, v in state.items()}
    for name, tensor in state.items():
        if name in _TOP_MAP:
            out[_TOP_MAP[name]] = tensor
        elif name == "pred_layer.proj.bias":
            out["head.proj.bias"] = tensor
        elif name in ("pred_layer.proj.weight", "position_ids"):
            continue  # tied to the token table / a buffer
    for i in range(num_layers):
        for hf, ours in _LAYER_MAP.items():
            for kind in ("weight", "bias"):
                key = f"{hf.format(i=i)}.{kind}"
                if key in state:
                    out[f"encoder.encoder.layers.{i}.{ours}.{kind}"] = state[key]
        for kind in ("weight", "bias"):
            parts = [state.get(f"attentions.{i}.{p}_lin.{kind}") for p in ("q", "k", "v")]
            if all(p is not None for p in parts):
                out[f"encoder.encoder.layers.{i}.attention.qkv_proj.{kind}"] = torch.cat(
                    [p for p in parts if p is not None], dim=0
                )
    known = set(_TOP_MAP) | {"pred_layer.proj.bias", "pred_layer.proj.weight", "position_ids"}
    for name in state:
        base = name.split(".")
        if name in known:
            continue
        if base[0] in ("attentions", "layer_norm1", "layer_norm2", "ffns") and (
            len(base) > 1 and base[1].isdigit() and int(base[1]) < num_layers
        ):
            continue
        unknown.append(name)
    return out, unknown


def ptm_to_hf_xlm(state: dict[str, Tensor], num_layers: int) -> dict[str, Tensor]:
    """Inverse of :func:`hf_xlm_to_ptm` (``XLMWithLMHeadModel`` names, ``transformer.`` prefix)."""
    out: dict[str, Tensor] = {}
    for hf, ours in _TOP_MAP.items():
        if ours in state:
            out[_HF_PREFIX + hf] = state[ours]
    for i in range(num_layers):
        prefix = f"encoder.encoder.layers.{i}."
        for hf, ours in _LAYER_MAP.items():
            for kind in ("weight", "bias"):
                out[f"{_HF_PREFIX}{hf.format(i=i)}.{kind}"] = state[f"{prefix}{ours}.{kind}"]
        for kind in ("weight", "bias"):
            q, k, v = state[f"{prefix}attention.qkv_proj.{kind}"].chunk(3, dim=0)
            for name, part in zip("qkv", (q, k, v), strict=True):
                out[f"{_HF_PREFIX}attentions.{i}.{name}_lin.{kind}"] = part
    if "head.proj.bias" in state:
        out["pred_layer.proj.weight"] = state["encoder.encoder.embeddings.word.weight"]
        out["pred_layer.proj.bias"] = state["head.proj.bias"]
    return {k: v.detach().clone().contiguous() for k, v in out.items()}


def load_hf_xlm(path: str | Path, *, strict: bool = True, **overrides: Any) -> XLMForMaskedLM:
    """Load a Hugging Face ``XLMModel`` / ``XLMWithLMHeadModel`` directory.

    The output bias is zero when the checkpoint has no LM head. Language ids keep the
    checkpoint's numbering (``id2lang``).

    Args:
        path: directory with ``config.json`` (``model_type`` ``"xlm"``) and weights.
        strict: raise on missing or unknown tensors.
        **overrides: encoder config fields to change (``dropout=0.0``).

    Raises:
        CheckpointError: unsupported variant, unreadable weights, or tensors that do not fit.
    """
    directory = Path(path)
    config_path = directory / "config.json"
    raw = json.loads(config_path.read_text(encoding="utf-8"))
    config, languages = hf_config_to_xlm(raw, source=str(config_path))
    if overrides:
        config = EncoderConfig.from_dict({**config.to_dict(), **overrides}, source=str(config_path))
    weights, weights_path = read_weights(directory)
    use_lang = bool(raw.get("use_lang_emb", True)) and len(languages) > 1
    model = XLMForMaskedLM(XLMEncoder(TransformerEncoder(config), languages))
    state, unknown = hf_xlm_to_ptm(weights, config.num_layers)
    if not use_lang:
        # No table in the checkpoint: a zero table adds nothing, exactly as XLM.
        state["encoder.lang_embeddings.weight"] = torch.zeros_like(
            model.encoder.lang_embeddings.weight
        )
    if "head.proj.bias" not in state:
        state["head.proj.bias"] = torch.zeros(config.vocab_size)
    if "encoder.encoder.embeddings.word.weight" in state:
        # The projection is tied to the token table (as in XLM); load one tensor into both.
        state["head.proj.weight"] = state["encoder.encoder.embeddings.word.weight"]
    check_state(model, state, source=str(weights_path), strict=strict, unknown=unknown)
    return model


def save_hf_xlm(
    model: XLMForMaskedLM | XLMEncoder,
    path: str | Path,
    *,
    bos_index: int = 0,
    eos_index: int = 1,
    pad_index: int | None = None,
    unk_index: int = 3,
    mask_index: int = 4,
) -> Path:
    """Write a directory that ``transformers.XLMWithLMHeadModel`` / ``XLMModel`` loads.

    Args:
        model: the model; a bare encoder is written as an ``XLMModel`` (no output layer).
        path: target directory (written atomically).
        bos_index, eos_index, pad_index, unk_index, mask_index: special ids recorded in the
            config (defaults: :data:`ptm_multilingual.tokenizer.SPECIAL_TOKENS` order).

    Raises:
        ValueError: a configuration XLM cannot express (pre-LN, FFN width != 4 D, segment
            embeddings, activation other than gelu/relu).
    """
    full = model if isinstance(model, XLMForMaskedLM) else XLMForMaskedLM(model)
    config = full.encoder.text_config
    problems = []
    if config.norm_position != "post":
        problems.append("norm_position must be 'post'")
    if config.intermediate_size != 4 * config.hidden_size:
        problems.append("intermediate_size must be 4 * hidden_size")
    if config.type_vocab_size:
        problems.append("type_vocab_size must be 0")
    if config.activation not in ("gelu", "relu"):
        problems.append("activation must be gelu or relu")
    if problems:
        raise ValueError("cannot export to Hugging Face XLM: " + "; ".join(problems))
    languages = full.encoder.languages
    hf_config = {
        "model_type": "xlm",
        "architectures": ["XLMWithLMHeadModel"],
        "vocab_size": config.vocab_size,
        "emb_dim": config.hidden_size,
        "n_layers": config.num_layers,
        "n_heads": config.num_heads,
        "dropout": config.dropout,
        "attention_dropout": config.attention_dropout,
        "gelu_activation": config.activation == "gelu",
        "sinusoidal_embeddings": False,
        "causal": False,
        "asm": False,
        "n_langs": len(languages),
        "use_lang_emb": True,
        "max_position_embeddings": config.max_positions,
        "layer_norm_eps": config.layer_norm_eps,
        "init_std": config.initializer_range,
        "bos_index": bos_index,
        "eos_index": eos_index,
        "pad_index": config.pad_token_id if pad_index is None else pad_index,
        "pad_token_id": config.pad_token_id if pad_index is None else pad_index,
        "unk_index": unk_index,
        "mask_index": mask_index,
        "is_encoder": True,
        "tie_word_embeddings": True,
        "lang2id": {lang: i for i, lang in enumerate(languages)},
        "id2lang": {str(i): lang for i, lang in enumerate(languages)},
    }
    state = ptm_to_hf_xlm(dict(full.state_dict()), config.num_layers)
    if not isinstance(model, XLMForMaskedLM):
        # A bare encoder is an XLMModel: no output layer, no "transformer." prefix.
        hf_config["architectures"] = ["XLMModel"]
        state = {
            k.removeprefix(_HF_PREFIX): v for k, v in state.items() if not k.startswith("pred_")
        }
    with atomic_directory(path, kind="export") as tmp:
        (tmp / "config.json").write_text(json.dumps(hf_config, indent=2) + "\n")
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    return Path(path)
