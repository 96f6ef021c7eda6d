"""Weight initialisations for any module tree: BERT's, and T5's (:func:`init_t5_weights`)."""

from __future__ import annotations

import functools

import torch
from torch import Tensor, nn

from ptm_core.modules.attention import MultiHeadSelfAttention
from ptm_core.modules.cross_attention import MultiHeadCrossAttention
from ptm_core.modules.feed_forward import FeedForward, GatedFeedForward
from ptm_core.modules.norms import RMSNorm
from ptm_core.modules.positions import RelativePositionBias


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
        if child.bias is not None:  # bias-free norms (ModernBERT)
            nn.init.zeros_(child.bias)


def init_t5_weights(module: nn.Module, hidden_size: int) -> None:
    """Re-initialise the layers below ``module`` as T5 does (Mesh TensorFlow, factor 1).

    Token tables and an untied ``lm_head`` get ``N(0, 1)``; attention queries
    ``N(0, (D d)^-1/2)`` (the ``1/sqrt(d)`` T5 leaves out of its logits), keys, values
    and outputs ``N(0, D^-1/2)``; feed-forward inputs ``N(0, D^-1/2)`` and outputs
    ``N(0, F^-1/2)``; position-bias tables ``N(0, D^-1/2)``; norms 1, biases 0. T5's
    unscaled attention and ``D^-1/2``-scaled tied LM head then start from unit-scale
    logits.

    Args:
        module: the model (or a part of it).
        hidden_size: ``D``.
    """
    for child in module.modules():
        if isinstance(child, MultiHeadSelfAttention | MultiHeadCrossAttention):
            width = child.num_heads * child.head_dim
            if isinstance(child, MultiHeadSelfAttention):
                query, key_value = child.qkv_proj, child.qkv_proj
            else:
                query, key_value = child.q_proj, child.kv_proj
            with torch.no_grad():
                query.weight[:width].normal_(0.0, (hidden_size * child.head_dim) ** -0.5)
                if key_value is query:
                    key_value.weight[width:].normal_(0.0, hidden_size**-0.5)
                else:
                    key_value.weight.normal_(0.0, hidden_size**-0.5)
                child.out_proj.weight.normal_(0.0, width**-0.5)
            linears = [query, key_value, child.out_proj]
        elif isinstance(child, FeedForward | GatedFeedForward):
            linears = [child.w_in, child.w_out]
            if isinstance(child, GatedFeedForward):
                linears.append(child.w_gate)
            for linear in linears:
                nn.init.normal_(linear.weight, 0.0, linear.in_features**-0.5)
        elif isinstance(child, RMSNorm | nn.LayerNorm):
            if child.weight is not None:
                nn.init.ones_(child.weight)
            norm_bias = getattr(child, "bias", None)
            if isinstance(norm_bias, Tensor):
                nn.init.zeros_(norm_bias)
            continue
        else:
            continue
        for linear in linears:
            if linear.bias is not None:
                nn.init.zeros_(linear.bias)
    position_tables = {
        id(child.embedding) for child in module.modules() if isinstance(child, RelativePositionBias)
    }
    for child in module.modules():
        if isinstance(child, nn.Embedding):
            std = hidden_size**-0.5 if id(child) in position_tables else 1.0
            nn.init.normal_(child.weight, 0.0, std)
    head = getattr(module, "lm_head", None)
    if isinstance(head, nn.Linear):
        # Tied: the token table just drawn; untied (T5 v1.1): its own N(0, 1).
        tables = [child.weight for child in module.modules() if isinstance(child, nn.Embedding)]
        if all(head.weight is not table for table in tables):
            nn.init.normal_(head.weight, 0.0, 1.0)
