"""Checkpoints as a layer: I/O at the bottom, formats above it, a registry for models.

- :mod:`ptm_core.checkpoints.io`: weights files, JSON configs, state checks, shared
  tensors, atomic writes. Imports no model.
- :mod:`ptm_core.checkpoints.hf`: one module per Hugging Face format (names and configs).
- :mod:`ptm_core.checkpoints.encoder`: ptm's encoder format (``load_encoder``,
  ``save_encoder``); :mod:`ptm_core.checkpoints.seq2seq` (BART, T5, MASS: ptm, BART and
  T5 formats, with ptm's own in :mod:`ptm_core.checkpoints.seq2seq_ptm`).
- :mod:`ptm_core.checkpoints.registry`: model kind -> loader/saver, so that model classes'
  ``from_pretrained``/``save_pretrained`` never import checkpoint code.

The names below stay importable from ``ptm_core.checkpoints``; those outside ``io`` load
on first use, so importing this package pulls in no model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ptm_core._lazy import lazy_exports
from ptm_core.checkpoints.io import (
    CheckpointError,
    check_finite,
    check_state,
    fill_shared_tensors,
    read_json_object,
    read_weights,
    shared_tensor_groups,
    unique_state,
    write_weights,
)

_EXPORTS = {
    "PTM_ENCODER_FORMAT": "ptm_core.checkpoints.encoder",
    "load_encoder": "ptm_core.checkpoints.encoder",
    "save_encoder": "ptm_core.checkpoints.encoder",
    "HF_BERT_CONFIG_KEYS": "ptm_core.checkpoints.hf.bert",
    "encoder_config_to_hf": "ptm_core.checkpoints.hf.bert",
    "hf_bert_to_ptm": "ptm_core.checkpoints.hf.bert",
    "hf_config_to_encoder_config": "ptm_core.checkpoints.hf.bert",
    "is_hf_bert_config": "ptm_core.checkpoints.hf.bert",
    "ptm_to_hf_bert": "ptm_core.checkpoints.hf.bert",
}

if TYPE_CHECKING:
    from ptm_core.checkpoints.encoder import PTM_ENCODER_FORMAT, load_encoder, save_encoder
    from ptm_core.checkpoints.hf.bert import (
        HF_BERT_CONFIG_KEYS,
        encoder_config_to_hf,
        hf_bert_to_ptm,
        hf_config_to_encoder_config,
        is_hf_bert_config,
        ptm_to_hf_bert,
    )

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)

__all__ = [
    "HF_BERT_CONFIG_KEYS",
    "PTM_ENCODER_FORMAT",
    "CheckpointError",
    "check_finite",
    "check_state",
    "encoder_config_to_hf",
    "fill_shared_tensors",
    "hf_bert_to_ptm",
    "hf_config_to_encoder_config",
    "is_hf_bert_config",
    "load_encoder",
    "ptm_to_hf_bert",
    "read_json_object",
    "read_weights",
    "save_encoder",
    "shared_tensor_groups",
    "unique_state",
    "write_weights",
]
