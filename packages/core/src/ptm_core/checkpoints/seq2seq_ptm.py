"""ptm's own encoder-decoder format: ``config.json`` (:class:`Seq2SeqConfig` fields and
``"ptm_model": "encoder_decoder"``) + ``model.safetensors`` (ptm names, shared tensors
once).

This module sits above the model (:mod:`ptm_core.encoders.encoder_decoder`); the model
never imports it. The Hugging Face formats (:mod:`ptm_core.checkpoints.hf.bart`,
:mod:`ptm_core.checkpoints.hf.t5`) translate names and configs and build the model
through :func:`build_seq2seq_model`; :mod:`ptm_core.checkpoints.seq2seq` picks the
format of a directory.

Directories written before every save carried ``"ptm_model"`` load too: a config with no
``"ptm_model"`` and no ``"model_type"`` whose keys are all :class:`Seq2SeqConfig` fields
(or ``ptm_*``) is read as this format.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from safetensors.torch import save_file
from torch import Tensor

from ptm_core.atomic import atomic_directory
from ptm_core.checkpoints.io import (
    CheckpointError,
    check_state,
    fill_shared_tensors,
    read_weights,
    unique_state,
)
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel
from ptm_core.encoders.encoder_decoder_config import Seq2SeqConfig
from ptm_core.model_kinds import ENCODER_DECODER, KIND_KEY, with_kind


def ptm_config_json(config: Seq2SeqConfig) -> dict[str, Any]:
    """The ``config.json`` object of a ptm-format encoder-decoder (with its ``"ptm_model"``)."""
    return with_kind(config.to_dict(), ENCODER_DECODER)


def write_config_json(directory: Path, config: Seq2SeqConfig) -> None:
    """Write ``directory/config.json`` for ``config`` (sorted keys, as every ptm save)."""
    text = json.dumps(ptm_config_json(config), indent=2, sort_keys=True) + "\n"
    (directory / "config.json").write_text(text)


def is_ptm_seq2seq_config(config: dict[str, Any]) -> bool:
    """Whether a ``config.json`` object is ptm's encoder-decoder format: ``"ptm_model":
    "encoder_decoder"``, or (written before that key) no ``"ptm_model"``, no
    ``"model_type"`` and only :class:`Seq2SeqConfig` fields and ``ptm_*`` keys."""
    kind = config.get(KIND_KEY)
    if kind is not None:
        return bool(kind == ENCODER_DECODER)
    if not config or "model_type" in config:
        return False
    names = {f.name for f in dataclasses.fields(Seq2SeqConfig)}
    return all(key in names or key.startswith("ptm_") for key in config)


def with_overrides(
    config: Seq2SeqConfig, overrides: dict[str, Any], *, source: str
) -> Seq2SeqConfig:
    """``config`` with some fields changed, re-validated; unknown fields raise naming them."""
    if not overrides:
        return config
    return Seq2SeqConfig.from_dict({**config.to_dict(), **overrides}, source=source)


def build_seq2seq_model(
    config: Seq2SeqConfig, state: dict[str, Tensor], *, source: str
) -> EncoderDecoderModel:
    """An :class:`EncoderDecoderModel` for ``config`` holding ``state`` (ptm names).

    Shared tensors may be given once; every missing, unknown or mis-shaped tensor is
    listed in one :class:`~ptm_core.checkpoints.CheckpointError` (see
    :func:`~ptm_core.checkpoints.check_state`).
    """
    model = EncoderDecoderModel(config)
    check_state(model, fill_shared_tensors(model, state), source=source)
    return model


def load_ptm_seq2seq(directory: Path, raw: dict[str, Any], **overrides: Any) -> EncoderDecoderModel:
    """Load a ptm-format encoder-decoder whose ``config.json`` object is ``raw``.

    Raises:
        CheckpointError: ``raw`` is not this format, or missing/unknown tensors or shape
            mismatches; the message names the file and the tensors.
    """
    config_path = directory / "config.json"
    if not is_ptm_seq2seq_config(raw):
        raise CheckpointError(
            f"{config_path}: neither a ptm encoder-decoder (ptm_model: encoder_decoder) nor a "
            f"BART config (model_type={raw.get('model_type')!r})"
        )
    config = Seq2SeqConfig.from_dict(raw, source=str(config_path))
    state, weights_path = read_weights(directory)
    return build_seq2seq_model(
        with_overrides(config, overrides, source=str(config_path)), state, source=str(weights_path)
    )


def save_ptm_seq2seq(model: EncoderDecoderModel, path: str | Path) -> Path:
    """Write ``config.json`` (with ``"ptm_model": "encoder_decoder"``) + ``model.safetensors``
    (ptm names, shared tensors once) atomically."""
    with atomic_directory(Path(path)) as tmp:
        write_config_json(tmp, model.config)
        save_file(unique_state(model), str(tmp / "model.safetensors"))
    return Path(path)
