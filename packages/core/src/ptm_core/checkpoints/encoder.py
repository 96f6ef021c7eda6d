"""ptm-format encoder checkpoints: ``load_encoder`` and ``save_encoder``.

ptm format: ``config.json`` (the :class:`EncoderConfig` fields plus ``ptm_format``) and
``model.safetensors`` with ptm's parameter names. Hugging Face directories are read and
written through the family modules in :mod:`ptm_core.checkpoints.hf`, which only
translate names and configs. The encoder is built by
:func:`ptm_core.encoders.factory.encoder_from_config`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from ptm_core.checkpoints import registry
from ptm_core.checkpoints.hf.bert import check_bert_layout
from ptm_core.checkpoints.hf.formats import default_hf_format
from ptm_core.checkpoints.hf.task_heads import task_head_tensors
from ptm_core.checkpoints.io import (
    PTM_ENCODER_FORMAT,
    CheckpointError,
    atomic_directory,
    check_state,
    fill_shared_tensors,
    read_json_object,
    read_weights,
    unique_state,
    write_json,
    write_weights,
)
from ptm_core.compress.pruned import encoder_config_from_dict
from ptm_core.encoders.config import EncoderConfig
from ptm_core.encoders.factory import encoder_class, encoder_from_config
from ptm_core.model_kinds import ENCODER, KIND_KEY, XLNET, with_kind

if TYPE_CHECKING:
    from ptm_core.encoders.transformer import TransformerEncoder
    from ptm_core.tokenization import WordPieceTokenizer

logger = logging.getLogger(__name__)


def load_encoder(path: str | Path, *, strict: bool = True, **overrides: Any) -> TransformerEncoder:
    """Load a ptm or Hugging Face (BERT, ALBERT, ELECTRA, XLNet) directory into an encoder.

    A ptm ``config.json`` may carry ``"ptm_model"`` (written since #17) or not (older
    checkpoints); the key is not a config field and is ignored here.
    """
    directory = Path(path)
    if not directory.is_dir():
        raise CheckpointError(
            f"{directory}: not a directory; pass the folder that holds config.json and the weights"
        )
    config_path = directory / "config.json"
    raw = read_json_object(config_path)
    weights, weights_path = read_weights(directory)
    family = hf_family(raw)
    if family is not None:
        config = family.config_from_hf(raw, source=str(config_path))
        config = _apply_overrides(config, overrides, source=str(config_path))
        state, _, missing, unknown = family.state_from_hf(weights, config)
        task = task_head_tensors(raw)
        if task is not None:  # a ...For<Task> folder: the encoder without its task head
            unknown = [name for name in unknown if name not in task[1]]
            logger.info("%s: the encoder of %s, without its task head", directory, task[0])
    else:
        fields = {k: v for k, v in raw.items() if k != KIND_KEY}
        try:
            config = encoder_config_from_dict(fields, source=str(config_path))
        except (TypeError, ValueError) as exc:
            raise CheckpointError(str(exc)) from None
        config = _apply_overrides(config, overrides, source=str(config_path))
        state, missing, unknown = weights, [], []
    encoder = encoder_from_config(config)
    check_state(
        encoder,
        fill_shared_tensors(encoder, state),
        source=str(weights_path),
        strict=strict,
        unknown=unknown,
        missing_source_names=missing or None,
    )
    return encoder


def hf_family(raw: dict[str, Any]) -> Any:
    """The registered Hugging Face family module for a config.json, else ``None`` (ptm).

    A config without ``model_type`` but with ``num_hidden_layers`` is an old BERT one.
    """
    if "ptm_format" in raw or KIND_KEY in raw:
        return None
    model_type = raw.get("model_type")
    if model_type is None and "num_hidden_layers" in raw:
        model_type = "bert"
    if model_type is None:
        return None
    family = registry.hf_encoder_family(str(model_type))
    if family is None and "num_hidden_layers" in raw:
        # Raises the "model_type ... is not supported" error naming the file.
        family = registry.hf_encoder_family("bert")
    return family


def _apply_overrides(
    config: EncoderConfig, overrides: dict[str, Any], *, source: str
) -> EncoderConfig:
    if not overrides:
        return config
    return encoder_config_from_dict({**config.to_dict(), **overrides}, source=source)


def save_encoder(
    encoder: TransformerEncoder,
    path: str | Path,
    *,
    format: str = "ptm",
    extra_writers: Sequence[Callable[[Path], object]] = (),
    tokenizer: WordPieceTokenizer | None = None,
    heads: torch.nn.Module | Mapping[str, Tensor] | None = None,
    kind: str | None = None,
) -> Path:
    """Write an encoder checkpoint directory atomically.

    Args:
        encoder: the model.
        path: target directory.
        format: ``"ptm"``, or a Hugging Face layout: ``"hf-bert"`` (``BertModel``),
            ``"hf-albert"`` (``AlbertModel``), ``"hf-electra"`` (``ElectraModel``),
            ``"hf-xlnet"`` (``XLNetModel``), ``"hf-roberta"``, ``"hf-xlm-roberta"``,
            ``"hf-distilbert"``, or ``"hf"`` = the one that fits (the model type an
            imported encoder came from, XLNet with relative positions, ALBERT when layers
            are shared, ELECTRA when the embeddings are factorised, else BERT).
        extra_writers: callables given the directory being written, to add files in the
            same atomic step (``tokenizer.save``, a model card).
        tokenizer: the model's tokenizer, written beside the weights: as ptm saves it, or
            for a Hugging Face format as the files ``AutoTokenizer`` loads
            (:mod:`ptm_core.checkpoints.hf.tokenizer_files`).
        heads: the pre-training objectives (an ``ObjectiveMix``, or its tensors named as in
            ``heads.safetensors``): ``heads.safetensors`` for ``"ptm"``; for a Hugging Face
            format the heads go into the model file under that family's names
            (``BertForPreTraining``'s ``cls.predictions.*`` / ``cls.seq_relationship.*``,
            ``AlbertForPreTraining``, ``ElectraForPreTraining``, ``XLNetLMHeadModel``), so
            ``AutoModelForMaskedLM`` loads the trained MLM head. Without heads a Hugging Face
            folder is a bare ``...Model``.
        kind: the ``"ptm_model"`` written into a ptm-format ``config.json``
            (:mod:`ptm_core.model_kinds`); default ``"xlnet"`` for an encoder with relative
            positions, else ``"encoder"``. A model that wraps the encoder and adds files
            (ERNIE-THU) names its own kind.
    """
    formats = ("ptm", "hf", *(f"hf-{name}" for name in registry.hf_encoder_families()))
    if format not in formats:
        raise ValueError(f"unknown checkpoint format {format!r}; valid: {', '.join(formats)}")
    config = encoder.config
    check_rebuilds(encoder)
    if format == "hf":
        format = default_hf_format(config)
    family = None if format == "ptm" else registry.hf_encoder_family(format.removeprefix("hf-"))
    if family is not None and format not in ("hf-xlnet", "hf-modernbert"):
        check_bert_layout(config, format)
    head_state = _own_head_tensors(heads, encoder)
    if family is not None and (tokenizer is not None or head_state):
        from ptm_core.checkpoints.hf.export import write_hf_encoder

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
    if family is not None and not extra_writers:
        logger.warning(
            "%s: a bare %s without pre-training heads or tokenizer files (AutoModelForMaskedLM "
            "would start its head from random init, AutoTokenizer would not load); pass "
            "tokenizer= and heads= to save_encoder, or export a run's final/ with "
            "`ptm export --format hf`",
            path,
            format,
        )
    if family is None:
        config_dict: dict[str, Any] = with_kind(
            {"ptm_format": PTM_ENCODER_FORMAT, **config.to_dict()},
            kind or encoder_kind(config),
        )
        state = unique_state(encoder)
    else:
        if hasattr(family, "check_exportable"):
            family.check_exportable(config)
        config_dict = family.config_to_hf(config)
        state = family.state_to_hf(encoder.state_dict(), config)
    with atomic_directory(path) as tmp:
        write_json(tmp / "config.json", config_dict)
        write_weights(state, tmp / "model.safetensors", metadata={"format": "pt"})
        if tokenizer is not None:
            tokenizer.save(tmp)
        if head_state:
            write_weights(head_state, tmp / "heads.safetensors")
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


# The parts of the stack whose blocks a builder may pass in (attention=, feed_forward=,
# norm=, position_bias=); inserted modules are the wrapping model's to save.
_BLOCK_PREFIXES = ("layers.", "final_norm", "relative_position_bias")


def _blocks(encoder: torch.nn.Module) -> list[tuple[str, str, object]]:
    return [
        (name, type(module).__qualname__, getattr(module, "scale", None))
        for name, module in encoder.named_modules()
        if name.startswith(_BLOCK_PREFIXES)
    ] + [
        (name, "parameter", tuple(tensor.shape))
        for name, tensor in encoder.named_parameters()
        if name.startswith(_BLOCK_PREFIXES)
    ]


def check_rebuilds(encoder: TransformerEncoder) -> None:
    """Raise unless ``encoder``'s blocks are what its ``config.json`` rebuilds.

    A config holds the shape; blocks passed in by a family that the config does not
    record (the T5 encoder half of an encoder-decoder: RMS norms, unscaled bias-free
    attention) would load back as BERT blocks, so such an encoder is saved by the model
    that owns it, never alone.
    """
    if type(encoder) is not encoder_class(encoder.config):
        return
    with torch.random.fork_rng(devices=[]), torch.device("meta"):
        reference = encoder_from_config(encoder.config)
    if _blocks(reference) != _blocks(encoder):
        raise CheckpointError(
            "this encoder's blocks (attention, feed-forward, norms) were passed in by the "
            "model that built it (e.g. T5's, by EncoderDecoderModel) and its config.json "
            "would rebuild other ones; save the owning model instead"
        )


def encoder_kind(config: EncoderConfig) -> str:
    """The ``"ptm_model"`` of a plain encoder: ``"xlnet"`` with relative positions, the
    kind a family config names (``ptm_kind``, ModernBERT's), else ``"encoder"``."""
    own = getattr(config, "ptm_kind", None)
    if own is not None:
        return str(own)
    return XLNET if config.relative else ENCODER
