"""ELMo's scalar mix of layer representations."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn


class ScalarMix(nn.Module):
    """Task-specific weighting of all layers (Peters et al., 2018, "ELMo", Eq. 1).

    .. math::
        \\mathrm{mix} = \\gamma \\sum_{j=0}^{N-1} \\mathrm{softmax}(s)_j \\, h_j

    with learned scalars ``s`` (one per layer, initialised equal, so the start is the
    plain layer average) and a learned scale ``gamma`` (initialised to 1).

    Args:
        num_layers: ``N``, the number of representations mixed (for an encoder with
            ``output_hidden_states=True``: embeddings + one per layer).
        initial_scalars: starting ``s`` (default all zero).
        trainable: learn ``s`` and ``gamma`` (False keeps the fixed average).

    Shapes:
        a sequence of ``N`` tensors ``(..., D)`` -> ``(..., D)``.
    """

    def __init__(
        self,
        num_layers: int,
        *,
        initial_scalars: Sequence[float] | None = None,
        trainable: bool = True,
    ) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        scalars = list(initial_scalars) if initial_scalars is not None else [0.0] * num_layers
        if len(scalars) != num_layers:
            raise ValueError(
                f"initial_scalars has {len(scalars)} values but num_layers is {num_layers}"
            )
        self.num_layers = num_layers
        self.scalars = nn.Parameter(torch.tensor(scalars), requires_grad=trainable)
        self.gamma = nn.Parameter(torch.ones(()), requires_grad=trainable)

    def weights(self) -> Tensor:
        """``softmax(s)``, shape ``(N,)``."""
        return torch.softmax(self.scalars, dim=0)

    def forward(self, hidden_states: Sequence[Tensor]) -> Tensor:
        if len(hidden_states) != self.num_layers:
            raise ValueError(
                f"ScalarMix was built for {self.num_layers} layers but got "
                f"{len(hidden_states)} hidden states"
            )
        stacked = torch.stack(list(hidden_states), dim=0)  # (N, ..., D)
        w = self.weights().to(stacked.dtype).view(-1, *([1] * (stacked.dim() - 1)))
        return self.gamma.to(stacked.dtype) * (w * stacked).sum(dim=0)
