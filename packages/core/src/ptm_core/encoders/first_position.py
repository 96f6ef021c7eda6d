"""Run an encoder for a head that reads only the first token: the last layer on one row.

A sequence-level task head with BERT's pooling (classification, regression, multiple
choice: ``pool="first"``) reads the last layer's output at ``[CLS]`` and nothing else.
The layers below need every position (each is a key and value of the next layer's
attention), but the last layer only has to give its keys and values; its query, output
projection, residuals, norms and feed-forward network are needed at the first position
alone. :func:`encode_first` runs the stack so: every layer but the last as usual
(unpadded when the batch is padded), then the last layer with one query per sequence.
That removes about ``9/12`` of one layer's matrix products per token (the key/value
projection stays) and most of its elementwise work: a quarter of the layer work of a
4-layer BERT-mini, a twelfth of a 12-layer base. It is the fine-tuning counterpart of
pre-training's masked-only MLM head (the output at a position nobody reads is not
computed). The first position's output equals the full stack's to float rounding (a
test checks it); with dropout in training the random draws differ from the full path's
because fewer elements are drawn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from torch import Tensor

from ptm_core.encoders.layers import TransformerLayer
from ptm_core.modules.attention import MultiHeadSelfAttention
from ptm_core.modules.attention_masks import to_sdpa_mask
from ptm_core.modules.attention_structure import AttentionStructure

if TYPE_CHECKING:
    from ptm_core.encoders.transformer import TransformerEncoder


def can_encode_first(encoder: TransformerEncoder, attention_mask: object) -> bool:
    """Whether :func:`encode_first` can run ``encoder`` on a batch with ``attention_mask``.

    It can for the plain stack (not a subclass with its own forward, such as XLNet), with
    no bucketed position bias (T5), no module inserted before or after the last layer,
    the last layer a :class:`~ptm_core.encoders.layers.TransformerLayer` whose attention
    is exactly :class:`~ptm_core.modules.MultiHeadSelfAttention`, and a ``[B, L]``
    padding mask or none (a visibility matrix, a per-layer list or an
    :class:`~ptm_core.modules.attention_structure.AttentionStructure` take the full path).
    """
    from ptm_core.encoders.transformer import TransformerEncoder

    cls = type(encoder)
    if any(
        getattr(cls, name, None) is not getattr(TransformerEncoder, name)
        for name in ("forward", "start", "run_layers", "finish")
    ):
        return False
    if encoder.relative_position_bias is not None or not len(encoder.layers):
        return False
    last = len(encoder.layers) - 1
    if str(last) in encoder.inserted or str(last + 1) in encoder.inserted:
        return False
    layer = encoder.layers[last]
    if type(layer) is not TransformerLayer or type(layer.attention) is not MultiHeadSelfAttention:
        return False
    if attention_mask is None:
        return True
    return (
        isinstance(attention_mask, Tensor)
        and not isinstance(attention_mask, AttentionStructure)
        and attention_mask.dim() == 2
    )


def encode_first(
    encoder: TransformerEncoder,
    input_ids: Tensor | None = None,
    attention_mask: Tensor | None = None,
    position_ids: Tensor | None = None,
    token_type_ids: Tensor | None = None,
    *,
    extra_embeds: Tensor | None = None,
) -> Tensor:
    """The last layer's output (after the final norm) at each sequence's first position.

    Takes :meth:`TransformerEncoder.forward`'s arguments; check
    :func:`can_encode_first` first.

    Returns:
        ``(B, 1, D)``: what ``encoder(...).last_hidden_state[:, :1]`` holds.
    """
    state = encoder.start(
        input_ids, attention_mask, position_ids, token_type_ids, extra_embeds=extra_embeds
    )
    last = len(encoder.layers) - 1
    encoder.run_layers(state, stop=last)
    layer = cast(TransformerLayer, encoder.layers[last])
    hidden = layer.forward_first(
        state.hidden, to_sdpa_mask(attention_mask, state.length), state.layout
    )
    if encoder.final_norm is not None:
        hidden = encoder.final_norm(hidden)
    return hidden


__all__ = ["can_encode_first", "encode_first"]
