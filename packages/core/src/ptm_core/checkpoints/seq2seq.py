"""Where :meth:`EncoderDecoderModel.save_pretrained
<ptm_core.encoders.EncoderDecoderModel.save_pretrained>` and ``from_pretrained`` go.

The model resolves this module by name (``importlib``), so it imports no checkpoint
code. It picks the format: ptm's own (:mod:`ptm_core.checkpoints.seq2seq_ptm`), Hugging
Face BART (:mod:`ptm_core.checkpoints.hf.bart`) or T5 (:mod:`ptm_core.checkpoints.hf.t5`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ptm_core.checkpoints.hf import bart, t5
from ptm_core.checkpoints.io import CheckpointError
from ptm_core.checkpoints.seq2seq_ptm import load_ptm_seq2seq, save_ptm_seq2seq
from ptm_core.encoders.encoder_decoder import EncoderDecoderModel

#: ``format`` values of :func:`save_seq2seq`.
FORMATS = ("ptm", "hf", "hf-bart", "hf-t5")


def load_seq2seq(path: str | Path, **overrides: Any) -> EncoderDecoderModel:
    """Load a ptm encoder-decoder directory, or a Hugging Face BART (``model_type: bart``)
    or T5 (``model_type: t5``) one.

    Args:
        path: the directory.
        **overrides: :class:`~ptm_core.encoders.Seq2SeqConfig` fields to change.

    Raises:
        CheckpointError: no config, unknown model type, missing/unknown tensors or shape
            mismatches; the message names the file and the tensors.
    """
    directory = Path(path)
    config_path = directory / "config.json"
    if not config_path.exists():
        raise CheckpointError(f"{directory}: no config.json; is this a checkpoint directory?")
    raw = json.loads(config_path.read_text())
    if t5.is_hf_t5_config(raw):
        return t5.load_t5(directory, **overrides)
    if bart.is_hf_bart_config(raw):
        return bart.load_bart(directory, **overrides)
    return load_ptm_seq2seq(directory, raw, **overrides)


def save_seq2seq(model: EncoderDecoderModel, path: str | Path, *, format: str = "ptm") -> Path:
    """Write ``model`` as ``format`` (see :data:`FORMATS` and
    :meth:`~ptm_core.encoders.EncoderDecoderModel.save_pretrained`) atomically."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")
    if format == "ptm":
        return save_ptm_seq2seq(model, path)
    if format == "hf-t5" or (format == "hf" and model.config.bucketed):
        return t5.save_t5(model, path)
    return bart.save_bart(model, path)
