"""Composed models: an encoder plus the heads of its objectives."""

from ptm_core.models.pretraining import (
    PretrainingModel,
    PretrainingOutput,
    ProvidesMemory,
    RewritesInputs,
)
from ptm_core.models.seq2seq import Seq2SeqPretrainingModel, Seq2SeqPretrainingOutput

__all__ = [
    "PretrainingModel",
    "PretrainingOutput",
    "ProvidesMemory",
    "RewritesInputs",
    "Seq2SeqPretrainingModel",
    "Seq2SeqPretrainingOutput",
]
