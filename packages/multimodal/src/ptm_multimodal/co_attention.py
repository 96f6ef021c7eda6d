"""Co-attention: each stream's queries attend to the other stream (Lu et al., 2019)."""

from __future__ import annotations

from torch import Tensor, nn

from ptm_core.modules import FeedForward
from ptm_core.modules.attention import attend_heads
from ptm_core.modules.dropout import Dropout


class CrossAttention(nn.Module):
    """Multi-head attention with queries from one stream and keys/values from another.

    Rows whose context has no visible element (every region masked) get a zero output, so
    nothing of the masked stream leaks in and no softmax over an empty set makes NaN.

    Args:
        query_size: width of the query stream ``D_q``.
        context_size: width of the key/value stream ``D_c``.
        inner_size: attention width (ViLBERT's ``bi_hidden_size``).
        num_heads: heads; must divide ``inner_size``.
        dropout: attention-probability dropout.

    Shapes:
        query ``(B, Lq, D_q)``, context ``(B, Lc, D_c)``, context_mask ``(B, Lc)`` bool
        (True = visible) -> ``(B, Lq, D_q)``.
    """

    def __init__(
        self,
        query_size: int,
        context_size: int,
        inner_size: int,
        num_heads: int,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if inner_size % num_heads:
            raise ValueError(
                f"co-attention width {inner_size} is not divisible by {num_heads} heads"
            )
        self.num_heads = num_heads
        self.head_dim = inner_size // num_heads
        self.dropout = dropout
        self.query = nn.Linear(query_size, inner_size)
        self.key_value = nn.Linear(context_size, 2 * inner_size)
        self.out_proj = nn.Linear(inner_size, query_size)

    def forward(self, query: Tensor, context: Tensor, context_mask: Tensor | None = None) -> Tensor:
        batch, lq, _ = query.shape
        lc = context.shape[1]
        q = self.query(query).view(batch, lq, self.num_heads, self.head_dim).transpose(1, 2)
        kv = self.key_value(context).view(batch, lc, 2, self.num_heads, self.head_dim)
        k, v = kv.permute(2, 0, 3, 1, 4).unbind(0)  # 2 x (B, h, Lc, d)
        mask = None
        visible = None
        if context_mask is not None:
            keys = context_mask.bool()
            visible = keys.any(dim=-1)  # (B,)
            keys = keys | ~visible[:, None]  # a blind row may look anywhere; zeroed below
            mask = keys[:, None, None, :]
        ctx = attend_heads(q, k, v, mask, self.dropout if self.training else 0.0)  # (B, Lq, D)
        out = self.out_proj(ctx)
        if visible is not None:
            out = out * visible[:, None, None].to(out.dtype)
        return out


class CoAttentionLayer(nn.Module):
    """ViLBERT's co-attentional Transformer layer (Lu et al., 2019, Fig. 2b).

    Both streams read the other at once: ``t' = LN(t + CA(t, v))``, ``v' = LN(v + CA(v, t))``,
    then each applies its own feed-forward ``x'' = LN(x' + FFN(x'))`` (post-LN, as BERT).

    Args:
        text_size: text width ``D_t``.
        image_size: image width ``D_v``.
        inner_size: co-attention width.
        num_heads: co-attention heads.
        text_intermediate: text feed-forward width.
        image_intermediate: image feed-forward width.
        dropout: sub-layer output dropout.
        attention_dropout: attention-probability dropout.
        activation: feed-forward activation.
        layer_norm_eps: LayerNorm epsilon.

    Shapes:
        text ``(B, L, D_t)``, image ``(B, R, D_v)``, masks ``(B, L)``/``(B, R)`` bool ->
        the two updated streams.
    """

    def __init__(
        self,
        text_size: int,
        image_size: int,
        inner_size: int,
        num_heads: int,
        text_intermediate: int,
        image_intermediate: int,
        *,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        activation: str = "gelu",
        layer_norm_eps: float = 1e-12,
    ) -> None:
        super().__init__()
        self.text_attention = CrossAttention(
            text_size, image_size, inner_size, num_heads, attention_dropout
        )
        self.image_attention = CrossAttention(
            image_size, text_size, inner_size, num_heads, attention_dropout
        )
        self.text_attention_norm = nn.LayerNorm(text_size, eps=layer_norm_eps)
        self.image_attention_norm = nn.LayerNorm(image_size, eps=layer_norm_eps)
        self.text_feed_forward = FeedForward(text_size, text_intermediate, activation=activation)
        self.image_feed_forward = FeedForward(image_size, image_intermediate, activation=activation)
        self.text_ffn_norm = nn.LayerNorm(text_size, eps=layer_norm_eps)
        self.image_ffn_norm = nn.LayerNorm(image_size, eps=layer_norm_eps)
        self.dropout = Dropout(dropout)

    def forward(
        self, text: Tensor, image: Tensor, text_mask: Tensor | None, image_mask: Tensor | None
    ) -> tuple[Tensor, Tensor]:
        t = self.text_attention_norm(
            text + self.dropout(self.text_attention(text, image, image_mask))
        )
        v = self.image_attention_norm(
            image + self.dropout(self.image_attention(image, text, text_mask))
        )
        t = self.text_ffn_norm(t + self.dropout(self.text_feed_forward(t)))
        v = self.image_ffn_norm(v + self.dropout(self.image_feed_forward(v)))
        return t, v
