"""How a model runs, apart from what it is: attention backend, unpadding, dropout kernel.

These settings change no weight and no checkpoint, only which kernels compute the same
function (to float rounding; the dropout kernel changes the random stream, not its
distribution). They are given when a stack is built (``TransformerEncoder(config,
settings=ExecutionSettings(...))``, or a builder's ``settings=``), or once when a run
starts: the Trainer calls :func:`apply_execution_settings`, which calls the model's own
:meth:`ExecutionConfigurable.apply_execution_settings`. Each stack passes the settings to
the modules it built, by name; nothing walks a model setting attributes it guesses at, and
there is no process-wide switch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from torch import nn

from ptm_core.modules.attention_backends import ATTENTION_BACKENDS, check_backend
from ptm_core.modules.dropout import DROPOUT_KERNELS, check_dropout_kernel

UNPADDING_MODES = ("auto", "on", "off")


def check_unpadding_mode(mode: str) -> str:
    """Return ``mode`` if it is one of :data:`UNPADDING_MODES`, else raise ``ValueError``."""
    if mode not in UNPADDING_MODES:
        raise ValueError(
            f"unpadding mode must be one of {', '.join(UNPADDING_MODES)}; got {mode!r}"
        )
    return mode


@dataclass(frozen=True)
class ExecutionSettings:
    """The kernels a Transformer stack runs with.

    Args:
        attention_backend: one of ``"auto"``, ``"flex"``, ``"sdpa"``, ``"dense"``
            (:mod:`ptm_core.modules.attention_backends`); routes
            :class:`~ptm_core.modules.attention_structure.AttentionStructure` masks, plain
            tensor masks always take SDPA.
        unpadding: ``"auto"``, ``"on"`` or ``"off"`` (:mod:`ptm_core.encoders.unpadding`).
        dropout_kernel: ``"auto"`` or ``"torch"`` (:mod:`ptm_core.modules.dropout`);
            ``None`` = when building, :func:`~ptm_core.modules.dropout.default_dropout_kernel`;
            when applied to a built model, each module keeps the kernel it was built with
            (the Trainer has no dropout-kernel setting, so a run does not reset it).

    Raises:
        ValueError: an unknown value, naming the valid ones.
    """

    attention_backend: str = "auto"
    unpadding: str = "auto"
    dropout_kernel: str | None = None

    def __post_init__(self) -> None:
        check_backend(self.attention_backend)
        check_unpadding_mode(self.unpadding)
        if self.dropout_kernel is not None:
            check_dropout_kernel(self.dropout_kernel)


__all__ = [
    "ATTENTION_BACKENDS",
    "DROPOUT_KERNELS",
    "UNPADDING_MODES",
    "ExecutionConfigurable",
    "ExecutionSettings",
    "apply_execution_settings",
    "check_unpadding_mode",
]


@runtime_checkable
class ExecutionConfigurable(Protocol):
    """A module that takes :class:`ExecutionSettings` after it was built and passes them on
    to the modules it built (a Transformer stack, an attention block, a layer)."""

    def apply_execution_settings(self, settings: ExecutionSettings) -> None: ...


def apply_execution_settings(model: nn.Module, settings: ExecutionSettings) -> None:
    """Give ``model`` the settings of a run, through its own method.

    A model that defines :meth:`ExecutionConfigurable.apply_execution_settings` gets one
    call. A container that does not (a task model, a pre-training model holding an encoder
    and heads) has each of its children handled the same way, so the outermost stacks it
    holds get the call and each stack configures what it built; heads and losses without
    attention or a stack are left as built.
    """
    if isinstance(model, ExecutionConfigurable):
        model.apply_execution_settings(settings)
        return
    for child in model.children():
        apply_execution_settings(child, settings)
