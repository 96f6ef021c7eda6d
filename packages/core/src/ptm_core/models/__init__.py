"""Composed models: an encoder plus the heads of its objectives."""

from ptm_core.models.pretraining import (
    PretrainingModel,
    PretrainingOutput,
    ProvidesMemory,
    RewritesInputs,
)

__all__ = [
    "PretrainingModel",
    "PretrainingOutput",
    "ProvidesMemory",
    "RewritesInputs",
]
