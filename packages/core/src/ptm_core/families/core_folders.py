"""Which folders without a ``"ptm_model"`` kind belong to ptm-core's families.

For folders written before ``config.json`` carried the kind, and for Hugging Face folders
(``model_type`` instead): the families' ``recognizes`` hooks. Reads JSON only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ptm_core.families.core_specs import ENCODER

_SEQ2SEQ_MODEL_TYPES = ("bart", "t5")


def _unkinded_config(path: str | Path) -> dict[str, Any] | None:
    config = Path(path) / "config.json"
    try:
        raw = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(raw, dict) or "ptm_model" in raw:
        return None
    return raw


def is_encoder_folder(path: str | Path) -> bool:
    """A ptm encoder saved before kinds (absolute positions), or a Hugging Face BERT,
    ALBERT or ELECTRA folder (``...For<Task>`` task folders included)."""
    raw = _unkinded_config(path)
    if raw is None:
        return False
    if "ptm_format" in raw:
        return not raw.get("relative", False) and "decoder_layers" not in raw
    return raw.get("model_type") in ENCODER.hf_model_types


def is_xlnet_folder(path: str | Path) -> bool:
    """A ptm XLNet saved before kinds (relative positions), or a Hugging Face XLNet."""
    raw = _unkinded_config(path)
    if raw is None:
        return False
    if "ptm_format" in raw:
        return bool(raw.get("relative", False))
    return raw.get("model_type") == "xlnet"


def is_seq2seq_folder(path: str | Path) -> bool:
    """A Hugging Face BART or T5 folder."""
    raw = _unkinded_config(path)
    return raw is not None and raw.get("model_type") in _SEQ2SEQ_MODEL_TYPES
