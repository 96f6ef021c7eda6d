"""Self-attentive span pooling (Lee et al., 2017), as KnowBERT pools its mention spans."""

from __future__ import annotations

import torch
from torch import Tensor, nn

#: The logit given to the positions of a span's window that lie outside the span: the
#: value AllenNLP's ``masked_softmax(..., memory_efficient=True, mask_fill_value=-1000)``
#: fills in, so a padded span (all positions masked) gets uniform, finite weights.
OUTSIDE_SPAN_LOGIT = -1000.0


class SelfAttentiveSpanExtractor(nn.Module):
    """Pool each span ``[start, end]`` (end inclusive) of a sequence by attention.

    One global attention logit per position, ``a_t = w . x_t + b``, is normalised over the
    positions of each span only; the span representation is ``sum_t softmax(a)_t x_t``
    (Lee et al., 2017, "End-to-end Neural Coreference Resolution"; KnowBERT, Peters et
    al., 2019, pools the projected contextual states of each candidate mention this way).
    Spans padded with ``(-1, -1)`` give zeros.

    Args:
        input_dim: width ``D`` of the pooled states.

    Shapes:
        sequence ``(B, L, D)``, spans ``(B, S, 2)`` long (inclusive ends, ``-1`` padding)
        -> ``(B, S, D)``.
    """

    def __init__(self, input_dim: int) -> None:
        super().__init__()
        self.global_attention = nn.Linear(input_dim, 1)

    def forward(self, sequence: Tensor, spans: Tensor) -> Tensor:
        if spans.shape[1] == 0:
            return sequence.new_zeros(sequence.shape[0], 0, sequence.shape[-1])
        starts, ends = spans.split(1, dim=-1)  # (B, S, 1) each
        widths = ends - starts  # one less than the length (inclusive ends)
        window = int(widths.max().item()) + 1
        offsets = torch.arange(window, device=spans.device).view(1, 1, -1)  # (1, 1, W)
        # Position end - w for w in 0..W-1: inside the span while w <= width and >= 0.
        positions = ends - offsets  # (B, S, W)
        inside = (offsets <= widths) & (positions >= 0)
        positions = positions.clamp(min=0)
        batch = torch.arange(sequence.shape[0], device=spans.device).view(-1, 1, 1)
        states = sequence[batch, positions]  # (B, S, W, D)
        logits = self.global_attention(sequence).squeeze(-1)[batch, positions]  # (B, S, W)
        weights = torch.softmax(logits.masked_fill(~inside, OUTSIDE_SPAN_LOGIT), dim=-1)
        pooled = (weights.unsqueeze(-1) * states).sum(dim=2)  # (B, S, D)
        real = (spans[..., 0] > -1).to(pooled.dtype)  # (B, S)
        return pooled * real.unsqueeze(-1)


__all__ = ["OUTSIDE_SPAN_LOGIT", "SelfAttentiveSpanExtractor"]
