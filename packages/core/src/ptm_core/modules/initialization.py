"""BERT's weight initialisation, for any module tree."""

from __future__ import annotations

import functools

import torch
from torch import nn


def init_bert_weights(module: nn.Module, std: float = 0.02) -> None:
    """Re-initialise every Linear, Embedding and LayerNorm below ``module`` as BERT does.

    Linear and Embedding weights ~ N(0, std) (padding rows zero), biases 0, LayerNorm
    weight 1 and bias 0. Buffers (e.g. a frozen entity table) are left alone. This is the
    "same model from random init" baseline of evaluations, and what
    :class:`~ptm_core.encoders.TransformerEncoder` applies when it is built.
    """
    # apply() visits children before parents, the order the encoder has always used, so
    # a seed gives the same weights as before.
    module.apply(functools.partial(_init_one, std=std))


def _init_one(child: nn.Module, std: float) -> None:
    if isinstance(child, nn.Linear):
        nn.init.normal_(child.weight, mean=0.0, std=std)
        if child.bias is not None:
            nn.init.zeros_(child.bias)
    elif isinstance(child, nn.Embedding):
        nn.init.normal_(child.weight, mean=0.0, std=std)
        if child.padding_idx is not None:
            with torch.no_grad():
                child.weight[child.padding_idx].zero_()
    elif isinstance(child, nn.LayerNorm) and child.elementwise_affine:
        nn.init.ones_(child.weight)
        nn.init.zeros_(child.bias)
