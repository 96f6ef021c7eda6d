"""One direction of ELMo's biLM: stacked LSTMs with projections (LSTMP) and residuals.

LSTMP (Sak et al., 2014, "Long short-term memory recurrent neural network architectures
for large scale acoustic modeling"): a large memory cell (ELMo: 4096) whose hidden state
is projected down (ELMo: 512) before it is fed back and passed on. torch's ``nn.LSTM``
has it as ``proj_size``. ELMo also clips the cell and the projected state to [-3, 3]
(``cell_clip``/``proj_clip`` in ``bilm-tf``); cuDNN cannot, so a clipped layer runs the
same weights through a step-by-step loop.
"""

from __future__ import annotations

from typing import cast

import torch
from torch import Tensor, nn


def reverse_padded(x: Tensor, lengths: Tensor) -> Tensor:
    """Reverse each sequence of a right-padded batch within its own length.

    Args:
        x: ``(B, T, ...)``.
        lengths: ``(B,)`` real lengths.

    Returns:
        ``(B, T, ...)``: position ``t < length`` holds ``x[length - 1 - t]``; padding stays put.
    """
    steps = torch.arange(x.shape[1], device=x.device).unsqueeze(0)  # (1, T)
    lengths = lengths.to(x.device).unsqueeze(1)
    index = torch.where(steps < lengths, lengths - 1 - steps, steps)  # (B, T)
    index = index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, index)


class LstmpLayer(nn.Module):
    """One LSTM layer with a projection, run left to right over ``(B, T, input_dim)``.

    Args:
        input_dim: input size.
        cell_size: memory cell size.
        projection_dim: size of the projected hidden state (the output).
        cell_clip: clip the cell to ``[-cell_clip, cell_clip]`` (``None``: no clipping).
        proj_clip: clip the projected state likewise.

    Shapes:
        ``(B, T, input_dim)`` -> ``(B, T, projection_dim)``.
    """

    def __init__(
        self,
        input_dim: int,
        cell_size: int,
        projection_dim: int,
        *,
        cell_clip: float | None = None,
        proj_clip: float | None = None,
    ) -> None:
        super().__init__()
        if projection_dim >= cell_size:
            raise ValueError(
                f"projection_dim ({projection_dim}) must be smaller than cell_size ({cell_size})"
            )
        self.lstm = nn.LSTM(input_dim, cell_size, batch_first=True, proj_size=projection_dim)
        self.cell_clip = cell_clip
        self.proj_clip = proj_clip

    def forward(self, x: Tensor) -> Tensor:
        if self.cell_clip is None and self.proj_clip is None:
            return self.lstm(x)[0]
        return self.clipped(x)

    def clipped(self, x: Tensor) -> Tensor:
        """The same recurrence step by step, with the clipping (and no cuDNN)."""
        w_ih, w_hh, w_hr, b_ih, b_hh = (
            cast(Tensor, getattr(self.lstm, name))
            for name in ("weight_ih_l0", "weight_hh_l0", "weight_hr_l0", "bias_ih_l0", "bias_hh_l0")
        )
        bias = b_ih + b_hh
        batch, steps, _ = x.shape
        inputs = torch.nn.functional.linear(x, w_ih, bias)  # (B, T, 4H)
        h = x.new_zeros(batch, w_hr.shape[0])
        c = x.new_zeros(batch, w_hr.shape[1])
        outputs = []
        for t in range(steps):
            gates = inputs[:, t] + h @ w_hh.t()
            i, f, g, o = gates.chunk(4, dim=-1)  # torch's gate order
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            if self.cell_clip is not None:
                c = c.clamp(-self.cell_clip, self.cell_clip)
            h = (torch.sigmoid(o) * torch.tanh(c)) @ w_hr.t()
            if self.proj_clip is not None:
                h = h.clamp(-self.proj_clip, self.proj_clip)
            outputs.append(h)
        return torch.stack(outputs, dim=1)


class LstmpStack(nn.Module):
    """One direction of the biLM: ``num_layers`` LSTMP layers, dropout between them and a
    residual connection around every layer after the first (ELMo, Sec. 3.4 / ``bilm-tf``).

    Args:
        num_layers: layers.
        projection_dim: input size (the token representation) and output size.
        cell_size: memory cell size.
        cell_clip: see :class:`LstmpLayer`.
        proj_clip: see :class:`LstmpLayer`.
        dropout: dropout on every layer's input.

    Shapes:
        ``(B, T, projection_dim)`` -> ``num_layers`` tensors ``(B, T, projection_dim)``.
    """

    def __init__(
        self,
        num_layers: int,
        projection_dim: int,
        cell_size: int,
        *,
        cell_clip: float | None = None,
        proj_clip: float | None = None,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            LstmpLayer(
                projection_dim, cell_size, projection_dim, cell_clip=cell_clip, proj_clip=proj_clip
            )
            for _ in range(num_layers)
        )
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> list[Tensor]:
        outputs = []
        for index, layer in enumerate(self.layers):
            h = layer(self.dropout(x))
            if index > 0:
                h = h + x
            outputs.append(h)
            x = h
        return outputs


__all__ = ["LstmpLayer", "LstmpStack", "reverse_padded"]
