"""The folder formats of ptm-classic's kinds: the ``load``/``save`` hooks of the awd_lstm
and elmo family specs (``from_pretrained``/``save_pretrained`` and the checkpoint registry
call these by kind)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ptm_classic.recurrent.awd_lstm import AWDLSTMLanguageModel
from ptm_classic.recurrent.bilm import BiLM, load_bilm, read_vocabulary, save_bilm


def load_awd_lstm(path: str | Path, **options: Any) -> AWDLSTMLanguageModel:
    """An AWD-LSTM language model ``final/`` (``ptm pretrain experiment=awd_lstm_tiny``)."""
    return AWDLSTMLanguageModel.from_pretrained(path)


def save_awd_lstm(model: AWDLSTMLanguageModel, path: str | Path, **options: Any) -> Path:
    """Write ``model`` as an AWD-LSTM ``final/`` (``options``: ``extra_writers``)."""
    return model.save_pretrained(path, **options)


def load_elmo(path: str | Path, **options: Any) -> BiLM:
    """An ELMo biLM ``final/``; its output vocabulary rides along (``vocabulary``) so that
    :func:`save_elmo` can write the folder back whole."""
    bilm = load_bilm(path)
    # A plain attribute (nn.Module.__setattr__ is typed for tensors and modules only).
    bilm.__dict__["vocabulary"] = read_vocabulary(path)
    return bilm


def save_elmo(
    model: BiLM, path: str | Path, *, vocabulary: Sequence[str] | None = None, **options: Any
) -> Path:
    """Write ``model`` as an ELMo ``final/``.

    Args:
        model: the biLM.
        path: the folder (replaced as a whole).
        vocabulary: its output words in id order (default: those :func:`load_elmo` read).

    Raises:
        ValueError: no vocabulary given and the model was not loaded from a folder.
    """
    words = vocabulary if vocabulary is not None else getattr(model, "vocabulary", None)
    if words is None:
        raise ValueError(
            "save_elmo: give vocabulary= (the biLM's output words, in id order); only a "
            "biLM read by load_elmo carries its own"
        )
    return save_bilm(model, path, words)
