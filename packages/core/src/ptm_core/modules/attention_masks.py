"""Attention masks: every visibility pattern in ptm is one boolean tensor.

The encoder accepts two user-facing forms, both with ``True`` = may attend:

* ``[B, L]`` key padding (``1``/``True`` = real token), as in BERT;
* ``[B, L, L]`` visibility (row ``i`` may attend column ``j``), as K-BERT, UniLM prefix
  masks, XLNet permutation masks (:func:`permutation_masks`) and packed sequences need.

:func:`to_sdpa_mask` turns either into the broadcastable boolean form that
:func:`torch.nn.functional.scaled_dot_product_attention` takes.
"""

from __future__ import annotations

import torch
from torch import Tensor


def to_sdpa_mask(attention_mask: Tensor | None, seq_len: int) -> Tensor | None:
    """Normalise a user mask into a boolean SDPA mask.

    Rows that may attend to nothing (padding rows of a visibility matrix, or a sequence
    that is all padding) are allowed to see themselves only: a fully masked softmax row is
    NaN, and NaN values leak into every other row through ``0 * NaN`` in the value product.
    Those rows' outputs carry no information and must be ignored by the caller.

    Args:
        attention_mask: ``None``, ``[B, L]`` (bool or 0/1 integers) or ``[B, L, L]`` bool.
        seq_len: ``L``, the sequence length of the queries and keys.

    Returns:
        ``None`` (attend everywhere), ``[B, 1, 1, L]`` or ``[B, 1, L, L]`` bool.

    Raises:
        ValueError: the mask has the wrong rank or length.
    """
    if attention_mask is None:
        return None
    if attention_mask.dim() == 2:
        if attention_mask.shape[1] != seq_len:
            raise ValueError(
                f"attention_mask has length {attention_mask.shape[1]} but the input has "
                f"{seq_len} tokens; pass a [B, L] padding mask matching input_ids"
            )
        keys = attention_mask.bool()
        if torch.compiler.is_compiling():
            # No data-dependent branch (a graph break per call): a sequence that is all
            # padding sees every key instead of itself only; its outputs are ignored alike.
            return (keys | ~keys.any(dim=-1, keepdim=True))[:, None, None, :]
        if bool(keys.all()):
            return None
        if bool(keys.any(dim=-1).all()):
            return keys[:, None, None, :]  # (B, 1, 1, L)
        visibility = keys[:, None, :].expand(-1, seq_len, -1)
    elif attention_mask.dim() == 3:
        if attention_mask.shape[1:] != (seq_len, seq_len):
            raise ValueError(
                f"attention_mask has shape {tuple(attention_mask.shape)} but a visibility "
                f"matrix for {seq_len} tokens must be [B, {seq_len}, {seq_len}]"
            )
        if attention_mask.dtype != torch.bool:
            raise ValueError(
                "a [B, L, L] attention_mask must be bool (True = row may attend column); "
                f"got {attention_mask.dtype}. Convert it with mask.bool()"
            )
        visibility = attention_mask
    else:
        raise ValueError(
            f"attention_mask must be [B, L] padding or [B, L, L] visibility, got "
            f"{attention_mask.dim()} dimensions"
        )
    blind_rows = ~visibility.any(dim=-1, keepdim=True)  # (B, L, 1)
    if torch.compiler.is_compiling() or bool(blind_rows.any()):
        eye = torch.eye(seq_len, dtype=torch.bool, device=visibility.device)
        visibility = visibility | (blind_rows & eye)
    return visibility[:, None, :, :]  # (B, 1, L, L)


def padding_to_visibility(padding_mask: Tensor) -> Tensor:
    """Expand a ``[B, L]`` padding mask to the ``[B, L, L]`` matrix it means.

    Every row sees every real token; the result is what the encoder applies for the
    padding mask, so both forms give identical outputs.
    """
    keys = padding_mask.bool()
    return keys[:, None, :].expand(-1, keys.shape[1], -1).clone()


def causal_mask(seq_len: int, device: torch.device | None = None) -> Tensor:
    """``[L, L]`` lower-triangular visibility: token ``i`` sees tokens ``<= i``."""
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()


def block_diagonal_mask(segment_ids: Tensor) -> Tensor:
    """Visibility for packed sequences: a token sees only tokens of its own document.

    Args:
        segment_ids: ``[B, L]`` integer document index per token; ``-1`` marks padding,
            which sees nothing and is seen by nothing.

    Returns:
        ``[B, L, L]`` bool.
    """
    same = segment_ids[:, :, None] == segment_ids[:, None, :]
    real = segment_ids >= 0
    return same & real[:, :, None] & real[:, None, :]


# --------------------------------------------------------------------------- UniLM / GPT
# Every builder below takes the ``[B, L]`` padding mask and returns ``[B, L, L]`` bool with
# padding rows and columns hidden (a padding query sees nothing, a padding key is seen by
# nothing; :func:`to_sdpa_mask` lets blind rows see themselves only).

UNILM_MASK_KINDS: tuple[str, ...] = (
    "bidirectional",
    "left_to_right",
    "right_to_left",
    "seq2seq",
)


def _real_pairs(padding_mask: Tensor) -> Tensor:
    keys = padding_mask.bool()  # (B, L)
    return keys[:, :, None] & keys[:, None, :]  # (B, L, L)


def bidirectional_mask(padding_mask: Tensor) -> Tensor:
    """Cloze (BERT, UniLM bidirectional LM): every real token sees every real token.

    Args:
        padding_mask: ``[B, L]`` 1/True at real tokens.

    Returns:
        ``[B, L, L]`` bool; padding rows and columns are all False.
    """
    return _real_pairs(padding_mask)


def sliding_window_mask(padding_mask: Tensor, window: int) -> Tensor:
    """Local attention (Longformer, Beltagy et al., 2020; ModernBERT's local layers): a
    real token sees the real tokens at most ``window`` positions away on either side.

    Args:
        padding_mask: ``[B, L]`` 1/True at real tokens.
        window: how far a token sees to each side (``>= 0``).

    Returns:
        ``[B, L, L]`` bool; padding rows and columns are all False.
    """
    if window < 0:
        raise ValueError(f"sliding_window_mask: window must be >= 0, got {window}")
    length = padding_mask.shape[1]
    position = torch.arange(length, device=padding_mask.device)
    near = (position[:, None] - position[None, :]).abs() <= window  # (L, L)
    return _real_pairs(padding_mask) & near


def left_to_right_mask(padding_mask: Tensor) -> Tensor:
    """Unidirectional left-to-right LM (GPT; UniLM): token ``i`` sees real tokens ``j <= i``.

    Args:
        padding_mask: ``[B, L]`` 1/True at real tokens.

    Returns:
        ``[B, L, L]`` bool.
    """
    seq_len = padding_mask.shape[1]
    return _real_pairs(padding_mask) & causal_mask(seq_len, padding_mask.device)


def right_to_left_mask(padding_mask: Tensor) -> Tensor:
    """Unidirectional right-to-left LM (UniLM): token ``i`` sees real tokens ``j >= i``.

    Args:
        padding_mask: ``[B, L]`` 1/True at real tokens.

    Returns:
        ``[B, L, L]`` bool.
    """
    seq_len = padding_mask.shape[1]
    return _real_pairs(padding_mask) & causal_mask(seq_len, padding_mask.device).T


def seq2seq_mask(token_type_ids: Tensor, padding_mask: Tensor) -> Tensor:
    """Sequence-to-sequence LM (UniLM, Dong et al., 2019; prefix LM).

    The source segment (``token_type_ids == 0``: ``[CLS] S1 [SEP]``) is bidirectional:
    a source token sees every source token and no target token. A target token
    (``token_type_ids == 1``: ``S2 [SEP]``) sees the whole source and the target tokens
    up to and including itself.

    Args:
        token_type_ids: ``[B, L]`` 0 = source, 1 = target (padding may hold either).
        padding_mask: ``[B, L]`` 1/True at real tokens.

    Returns:
        ``[B, L, L]`` bool.
    """
    seq_len = token_type_ids.shape[1]
    is_source = token_type_ids == 0  # (B, L)
    source_cols = is_source[:, None, :].expand(-1, seq_len, -1)  # every row sees the source
    target_rows = ~is_source[:, :, None]
    causal = causal_mask(seq_len, token_type_ids.device)
    visible = source_cols | (target_rows & causal)
    return visible & _real_pairs(padding_mask)


def unilm_mask(kind: str, padding_mask: Tensor, token_type_ids: Tensor | None = None) -> Tensor:
    """One of UniLM's four self-attention masks by name (see :data:`UNILM_MASK_KINDS`).

    Args:
        kind: ``"bidirectional"``, ``"left_to_right"``, ``"right_to_left"`` or ``"seq2seq"``.
        padding_mask: ``[B, L]`` 1/True at real tokens.
        token_type_ids: ``[B, L]`` segment ids; required for ``"seq2seq"``.

    Returns:
        ``[B, L, L]`` bool.

    Raises:
        ValueError: unknown kind (the message lists the valid ones), or ``seq2seq`` without
            segment ids.
    """
    if kind == "bidirectional":
        return bidirectional_mask(padding_mask)
    if kind == "left_to_right":
        return left_to_right_mask(padding_mask)
    if kind == "right_to_left":
        return right_to_left_mask(padding_mask)
    if kind == "seq2seq":
        if token_type_ids is None:
            raise ValueError("a seq2seq mask needs token_type_ids (0 = source, 1 = target)")
        return seq2seq_mask(token_type_ids, padding_mask)
    raise ValueError(f"unknown mask kind {kind!r}; valid kinds: {', '.join(UNILM_MASK_KINDS)}")


# --------------------------------------------------------------------------- XLNet
def permutation_masks(order_ranks: Tensor, padding_mask: Tensor) -> tuple[Tensor, Tensor]:
    """XLNet's two-stream visibility for a factorisation order (Yang et al., 2019).

    ``order_ranks[b, i]`` is token ``i``'s place in the sampled factorisation order
    ``z`` (``0`` = first predicted). The content stream ``h_{z_t}`` encodes
    ``x_{z_<=t}``: it sees tokens up to and including itself in the order. The query
    stream ``g_{z_t}`` may use the position ``z_t`` but not the content ``x_{z_t}``: it
    sees tokens strictly before itself. Tokens given the same rank see each other in the
    content stream (XLNet's released code puts every non-target token at one rank, so
    the context is encoded bidirectionally).

    Args:
        order_ranks: ``[B, L]`` integer rank of every token in its row's order.
        padding_mask: ``[B, L]`` 1/True at real tokens; padding is hidden from both
            streams (a padding row sees nothing).

    Returns:
        ``(content, query)``, each ``[B, L, L]`` bool (True = row may attend column). The
        content mask has a True diagonal at every real token; the query mask's diagonal
        is all False.
    """
    if order_ranks.shape != padding_mask.shape:
        raise ValueError(
            f"order_ranks {tuple(order_ranks.shape)} and padding_mask "
            f"{tuple(padding_mask.shape)} must have the same [B, L] shape"
        )
    real = _real_pairs(padding_mask)
    before_or_same = order_ranks[:, None, :] <= order_ranks[:, :, None]  # [b, i, j]: z_j <= z_i
    content = before_or_same & real
    strictly_before = order_ranks[:, None, :] < order_ranks[:, :, None]
    return content, strictly_before & real


def memory_visibility(
    attention_mask: Tensor | None,
    batch: int,
    length: int,
    memory_length: int,
    memory_mask: Tensor | None = None,
) -> Tensor | None:
    """Transformer-XL / XLNet content visibility over ``M`` memory + ``L`` current keys.

    Accepts the encoder's two mask forms (``[B, L]`` padding, ``[B, L, L]`` visibility).
    Memory is visible (Transformer-XL) except where ``memory_mask`` marks padding, and a
    token always sees its own content (XLNet's content stream), so no row is empty.

    Args:
        attention_mask: ``None``, ``[B, L]`` padding or ``[B, L, L]`` bool visibility.
        batch: ``B``.
        length: ``L``.
        memory_length: ``M`` (0 = no memory).
        memory_mask: ``[B, M]`` bool, True at real memory positions; ``None`` = all.

    Returns:
        ``[B, L, M + L]`` bool, or ``None`` when every token may see every key.
    """
    if attention_mask is None:
        if memory_mask is None:
            return None
        attention_mask = torch.ones(batch, length, dtype=torch.bool, device=memory_mask.device)
    if attention_mask.dim() == 2:
        if attention_mask.shape != (batch, length):
            raise ValueError(
                f"attention_mask has shape {tuple(attention_mask.shape)} but the input is "
                f"({batch}, {length}); pass a [B, L] padding mask matching input_ids"
            )
        visible = attention_mask.bool()[:, None, :].expand(batch, length, length)
    elif attention_mask.dim() == 3:
        if attention_mask.shape[1:] != (length, length) or attention_mask.dtype != torch.bool:
            raise ValueError(
                f"a visibility attention_mask must be bool [B, {length}, {length}], got "
                f"{attention_mask.dtype} {tuple(attention_mask.shape)}"
            )
        visible = attention_mask.expand(batch, length, length)
    else:
        raise ValueError(
            f"attention_mask must be [B, L] padding or [B, L, L] visibility, got "
            f"{attention_mask.dim()} dimensions"
        )
    visible = visible | torch.eye(length, dtype=torch.bool, device=visible.device)
    if memory_length:
        seen = (
            memory_mask[:, None, :].expand(batch, length, memory_length)
            if memory_mask is not None
            else visible.new_ones(batch, length, memory_length)
        )
        visible = torch.cat([seen, visible], dim=2)
    return visible
