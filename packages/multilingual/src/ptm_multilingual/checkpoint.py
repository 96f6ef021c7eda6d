"""XLM checkpoints in ptm's format: what ``XLMEncoder.save_pretrained``/``from_pretrained``
dispatch to through :mod:`ptm_core.checkpoints.registry` (the ``xlm`` family's
``load``/``save``, :mod:`ptm_multilingual.families`).

``config.json`` holds ``"ptm_model": "xlm"`` (absent in directories written before #17,
which still load), ``ptm_format``, the languages and the encoder fields. A Hugging Face
XLM directory (``model_type`` ``"xlm"``) goes to :func:`ptm_multilingual.hf_xlm.load_hf_xlm`.
This module sits above the model: the model never imports it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ptm_core.checkpoints.io import (
    CheckpointError,
    atomic_directory,
    check_state,
    read_weights,
    write_json,
    write_weights,
)
from ptm_core.encoders import EncoderConfig
from ptm_core.encoders.factory import encoder_from_config
from ptm_core.model_kinds import with_kind
from ptm_multilingual.kinds import XLM
from ptm_multilingual.model import PTM_XLM_FORMAT, XLMEncoder


def save_xlm(
    model: XLMEncoder, path: str | Path, *, extra_writers: Sequence[Callable[[Path], object]] = ()
) -> Path:
    """Write ``config.json`` (encoder fields + languages) and ``model.safetensors``."""
    config = with_kind(
        {
            "ptm_format": PTM_XLM_FORMAT,
            "languages": model.languages,
            "encoder": model.encoder.config.to_dict(),
        },
        XLM,
    )
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    with atomic_directory(path) as tmp:
        write_json(tmp / "config.json", config)
        write_weights(state, tmp / "model.safetensors", metadata={"format": "pt"})
        for writer in extra_writers:
            writer(tmp)
    return Path(path)


def load_xlm(path: str | Path, **overrides: Any) -> XLMEncoder:
    """Load what :func:`save_xlm` wrote, or a Hugging Face XLM directory.

    Args:
        path: checkpoint directory.
        **overrides: encoder config fields to change (``dropout=0.0``).
    """
    directory = Path(path)
    config_path = directory / "config.json"
    if not config_path.is_file():
        raise CheckpointError(f"{config_path}: missing; pass an XLM checkpoint directory")
    raw = json.loads(config_path.read_text(encoding="utf-8"))
    if raw.get("model_type") == "xlm":
        from ptm_multilingual.hf_xlm import load_hf_xlm

        return load_hf_xlm(directory, **overrides).encoder
    if raw.get("ptm_format") != PTM_XLM_FORMAT:
        raise CheckpointError(
            f"{config_path}: not an XLM checkpoint (ptm_format {raw.get('ptm_format')!r}, "
            f"expected {PTM_XLM_FORMAT!r} or a Hugging Face config with model_type 'xlm')"
        )
    config = EncoderConfig.from_dict({**raw["encoder"], **overrides}, source=str(config_path))
    model = XLMEncoder(encoder_from_config(config), raw["languages"])
    weights, weights_path = read_weights(directory)
    check_state(model, weights, source=str(weights_path))
    return model
