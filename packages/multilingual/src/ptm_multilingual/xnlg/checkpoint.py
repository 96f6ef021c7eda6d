"""XNLG folders: ``config.json`` (``"ptm_model": "xnlg"``, languages, encoder and decoder
numbers) + ``model.safetensors`` (the ``xnlg`` family's ``load``/``save``). The tied output
projection is stored once, under the decoder's token table."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ptm_core.checkpoints.io import (
    CheckpointError,
    atomic_directory,
    check_state,
    fill_shared_tensors,
    read_weights,
    unique_state,
    write_json,
    write_weights,
)
from ptm_core.encoders import EncoderConfig
from ptm_core.encoders.factory import encoder_from_config
from ptm_core.model_kinds import with_kind
from ptm_multilingual.kinds import XNLG
from ptm_multilingual.model import XLMEncoder
from ptm_multilingual.xnlg.model import (
    PTM_XNLG_FORMAT,
    XNLGDecoderConfig,
    XNLGModel,
    xnlg_decoder,
)


def save_xnlg(
    model: XNLGModel, path: str | Path, *, extra_writers: Sequence[Callable[[Path], object]] = ()
) -> Path:
    """Write ``config.json`` and ``model.safetensors`` in one atomic step.

    Args:
        model: the model.
        path: the folder (replaced as a whole).
        extra_writers: callables given the temporary folder (the tokenizer's ``save``).
    """
    config = with_kind(model.checkpoint_config(), XNLG)
    with atomic_directory(path) as tmp:
        write_json(tmp / "config.json", config)
        write_weights(unique_state(model), tmp / "model.safetensors", metadata={"format": "pt"})
        for writer in extra_writers:
            writer(tmp)
    return Path(path)


def load_xnlg(path: str | Path, **overrides: Any) -> XNLGModel:
    """Load what :func:`save_xnlg` wrote.

    Args:
        path: the folder.
        **overrides: encoder config fields to change (``dropout=0.0``); the decoder takes
            the same numbers.

    Raises:
        CheckpointError: no ``config.json``, another format, or weights that do not fit.
    """
    directory = Path(path)
    config_path = directory / "config.json"
    if not config_path.is_file():
        raise CheckpointError(f"{config_path}: missing; pass an XNLG folder (a stage-2 final/)")
    raw = json.loads(config_path.read_text(encoding="utf-8"))
    if raw.get("ptm_format") != PTM_XNLG_FORMAT:
        raise CheckpointError(
            f"{config_path}: not an XNLG folder (ptm_format {raw.get('ptm_format')!r}, "
            f"expected {PTM_XNLG_FORMAT!r}); stage 2 (`ptm pretrain experiment=xnlg_tiny`) "
            "writes one"
        )
    config = EncoderConfig.from_dict({**raw["encoder"], **overrides}, source=str(config_path))
    encoder = XLMEncoder(encoder_from_config(config), raw["languages"])
    decoder_config = XNLGDecoderConfig(**raw["decoder"])
    model = XNLGModel(
        encoder,
        xnlg_decoder(encoder, decoder_config.num_layers, decoder_config.pad_id),
        decoder_config,
    )
    weights, weights_path = read_weights(directory)
    weights = fill_shared_tensors(model, weights)
    check_state(model, weights, source=str(weights_path))
    return model


__all__ = ["load_xnlg", "save_xnlg"]
