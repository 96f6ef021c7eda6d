"""InfoWord's critic ``g_ω``: scores every (masked sentence, n-gram) pair of a batch."""

from __future__ import annotations

from torch import Tensor, nn


class InfoWordScoreHead(nn.Module):
    """The critic of InfoWord's DIM term (Kong et al., 2020, Sec. 4).

    ``g_ω(x̂, y) = (W_g h(x̂))ᵀ (W_l h(y))``: each view's encoder summary goes through its
    own linear map, and the score is their dot product, a learned bilinear form of rank at
    most ``projection_size``. The head scores pairs; the loss is the objective's.

    Args:
        hidden_size: width of the encoder states.
        projection_size: width both views are projected to (default ``hidden_size``).

    Shapes:
        ``forward(global_states (N, D), local_states (M, D)) -> scores (N, M)``.
    """

    def __init__(self, hidden_size: int, projection_size: int | None = None) -> None:
        super().__init__()
        width = projection_size or hidden_size
        self.global_projection = nn.Linear(hidden_size, width)
        self.local_projection = nn.Linear(hidden_size, width)

    def forward(self, global_states: Tensor, local_states: Tensor) -> Tensor:
        return self.global_projection(global_states) @ self.local_projection(local_states).T
