"""Memory levers on a model: which modules are its Transformer layers, and activation
checkpointing of each of them.

Activation checkpointing (Chen et al., 2016, "Training Deep Nets with Sublinear Memory
Cost") keeps only a layer's inputs during the forward pass and recomputes the layer inside
backward. ptm uses :func:`torch.utils.checkpoint.checkpoint` with ``use_reentrant=False``:
it stashes the CPU and CUDA RNG states before the forward and restores them for the
recomputation, so dropout draws the same masks twice and the gradients equal those of the
plain run; the global RNG stream after backward is also unchanged.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def transformer_units(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The modules of ``model`` that are one Transformer layer's work, in model order.

    Every distinct :class:`~ptm_core.encoders.TransformerLayer` and
    :class:`~ptm_core.encoders.decoder.DecoderLayer` (encoder stacks, decoders,
    encoder-decoders, and the extension models built from those layers). An
    :class:`~ptm_core.encoders.XLNetEncoder` never calls its layers as a whole (it runs the
    content and query streams through each layer's ``attention`` and ``after_attention``),
    so there the units are each layer's ``attention`` and ``feed_forward``. A layer that
    appears several times (ALBERT's ``share_layers="all"``) is listed once.

    Args:
        model: any module.

    Returns:
        ``(qualified name, module)`` pairs; empty when the model has no Transformer layer.
    """
    from ptm_core.encoders.decoder import DecoderLayer
    from ptm_core.encoders.transformer import TransformerLayer
    from ptm_core.encoders.xlnet import XLNetEncoder

    piecewise = {
        id(layer)
        for module in model.modules()
        if isinstance(module, XLNetEncoder)
        for layer in module.layers
    }
    units: list[tuple[str, nn.Module]] = []
    seen: set[int] = set()
    for name, module in model.named_modules():
        if not isinstance(module, TransformerLayer | DecoderLayer):
            continue
        if id(module) in piecewise:
            parts = [
                (f"{name}.attention", cast(nn.Module, module.attention)),
                (f"{name}.feed_forward", cast(nn.Module, module.feed_forward)),
            ]
        else:
            parts = [(name, module)]
        for part_name, part in parts:
            if id(part) not in seen:
                seen.add(id(part))
                units.append((part_name, part))
    return units


class CheckpointedForward:
    """A module's ``forward`` run under :func:`torch.utils.checkpoint.checkpoint`.

    Installed as the instance's ``forward``, so names, state dicts, hooks (FSDP's
    included) and ``isinstance`` checks see the module unchanged. Without autograd
    (``torch.no_grad``, evaluation) the plain forward runs: there is nothing to save.

    Args:
        forward: the module's bound ``forward``.
    """

    def __init__(self, forward: Any) -> None:
        self.forward = forward

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():
            return self.forward(*args, **kwargs)
        return checkpoint(self.forward, *args, use_reentrant=False, **kwargs)


def enable_activation_checkpointing(model: nn.Module) -> list[str]:
    """Recompute every Transformer layer of ``model`` in backward instead of storing it.

    Activation memory drops from every intermediate tensor of every layer to one input per
    layer, for about one more forward pass of compute. The maths is unchanged: the
    gradients equal those without checkpointing (dropout included, see the module notes).
    Calling it again is a no-op.

    Args:
        model: a model holding Transformer layers (see :func:`transformer_units`).

    Returns:
        The names of the checkpointed modules.

    Raises:
        ValueError: ``model`` has no Transformer layer to checkpoint.
    """
    units = transformer_units(model)
    if not units:
        raise ValueError(
            f"trainer.activation_checkpointing=true, but {type(model).__name__} has no "
            "Transformer layer to checkpoint (no TransformerLayer or DecoderLayer inside); "
            "set trainer.activation_checkpointing=false for this model."
        )
    for _, module in units:
        if not isinstance(module.__dict__.get("forward"), CheckpointedForward):
            # An instance attribute, so the class (and every other instance) is untouched.
            object.__setattr__(module, "forward", CheckpointedForward(module.forward))
    return [name for name, _ in units]
