"""Multi-head attention whose queries and keys/values come from different sequences."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import Tensor, nn

from ptm_core.modules.attention_backends import attend_heads, head_size
from ptm_core.modules.dropout import check_dropout_kernel, default_dropout_kernel

if TYPE_CHECKING:
    from ptm_core.modules.execution import ExecutionSettings


class MultiHeadCrossAttention(nn.Module):
    """Encoder-decoder ("cross") attention (Vaswani et al., 2017, section 3.2.3).

    Queries come from the decoder states, keys and values from the encoder output
    (``memory``). Keys and values are one fused projection ``kv_proj`` (one GEMM, as the
    fused ``qkv_proj`` of :class:`~ptm_core.modules.MultiHeadSelfAttention`); the kernel
    is :func:`torch.nn.functional.scaled_dot_product_attention`.

    Args:
        hidden_size: model width ``D``.
        num_heads: number of heads ``h``; ``D`` must be divisible by ``h``.
        dropout: dropout on the attention probabilities (training only).
        bias: whether the projections have biases (T5: no).
        dropout_kernel: the attention-dropout kernel (:mod:`ptm_core.modules.dropout`);
            ``None`` = the default.
        scale: whether ``QK^T`` is divided by ``sqrt(d)`` (T5: no).

    Shapes:
        hidden_states ``(B, Lq, D)``; memory ``(B, Lk, D)``; mask ``None`` or bool
        ``(B, 1, 1, Lk)`` / ``(B, 1, Lq, Lk)`` (True = may attend); output ``(B, Lq, D)``.

    For generation the memory's keys and values do not change from one step to the next:
    :meth:`project_memory` computes them once and :meth:`attend` reuses them;
    ``forward(h, memory, mask)`` is ``attend(h, *project_memory(memory), mask)``.
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        scale: bool = True,
        *,
        dropout_kernel: str | None = None,
    ) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = head_size(hidden_size, num_heads)
        self.dropout = dropout
        self.dropout_kernel = (
            default_dropout_kernel()
            if dropout_kernel is None
            else check_dropout_kernel(dropout_kernel)
        )
        # None = SDPA's default 1 / sqrt(d).
        self.scale: float | None = None if scale else 1.0
        self.q_proj = nn.Linear(hidden_size, hidden_size, bias=bias)
        self.kv_proj = nn.Linear(hidden_size, 2 * hidden_size, bias=bias)
        self.out_proj = nn.Linear(hidden_size, hidden_size, bias=bias)

    def apply_execution_settings(self, settings: ExecutionSettings) -> None:
        """Take ``settings``' dropout kernel, when it names one (no structure masks here)."""
        if settings.dropout_kernel is not None:
            self.dropout_kernel = settings.dropout_kernel

    def forward(self, hidden_states: Tensor, memory: Tensor, mask: Tensor | None = None) -> Tensor:
        key, value = self.project_memory(memory)
        return self.attend(hidden_states, key, value, mask)

    def project_memory(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of the memory, each ``(B, h, Lk, d)``, for :meth:`attend`."""
        batch, k_len, _ = memory.shape
        kv = self.kv_proj(memory).view(batch, k_len, 2, self.num_heads, self.head_dim)
        key, value = kv.permute(2, 0, 3, 1, 4).unbind(0)  # 2 x (B, h, Lk, d)
        return key, value

    def attend(
        self, hidden_states: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None
    ) -> Tensor:
        """Attend ``hidden_states`` over keys/values from :meth:`project_memory`.

        Args:
            hidden_states: ``(B, Lq, D)`` queries' states.
            key: ``(B, h, Lk, d)``, or ``(1, h, Lk, d)`` shared by every row (the beams
                of one source in beam search).
            value: same shape as ``key``.
            mask: ``None`` or bool ``(B or 1, 1, 1 or Lq, Lk)`` (True = may attend).

        Returns:
            ``(B, Lq, D)``.
        """
        batch, q_len, _ = hidden_states.shape
        if key.shape[0] not in (1, batch):
            raise ValueError(
                f"cross-attention keys have batch {key.shape[0]} but the queries {batch}; "
                "pass keys of batch 1 (shared) or one per row (reorder the cache with the beams)"
            )
        if key.shape[0] != batch:
            key = key.expand(batch, -1, -1, -1)
            value = value.expand(batch, -1, -1, -1)
        query = (
            self.q_proj(hidden_states).view(batch, q_len, self.num_heads, self.head_dim)
        ).transpose(1, 2)  # (B, h, Lq, d)
        context = attend_heads(
            query,
            key,
            value,
            mask,
            self.dropout if self.training else 0.0,
            self.scale,
            dropout_kernel=self.dropout_kernel,
        )
        return self.out_proj(context)  # (B, Lq, D)


def memory_mask(attention_mask: Tensor | None) -> Tensor | None:
    """Turn an encoder padding mask ``(B, Lk)`` (1 = real) into a cross-attention mask.

    Returns:
        ``None`` when every key is real, else bool ``(B, 1, 1, Lk)``.
    """
    if attention_mask is None:
        return None
    keys = attention_mask.bool()
    if bool(keys.all()):
        return None
    return keys[:, None, None, :]
