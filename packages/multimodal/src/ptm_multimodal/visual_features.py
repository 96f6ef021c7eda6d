"""The batch of visual regions that every multimodal model in ptm reads."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass
class VisualFeatures:
    """A batch of visual regions, as every multimodal model in ptm takes them.

    Attributes:
        features: ``(B, R, D)`` region features (padded).
        boxes: ``(B, R, 4)`` pixel boxes ``[x1, y1, x2, y2]``.
        image_sizes: ``(B, 2)`` ``[width, height]`` in pixels.
        mask: ``(B, R)`` bool, True at real regions.
        classes: ``(B, R, C)`` detector class distributions, or ``None``.
    """

    features: Tensor
    boxes: Tensor
    image_sizes: Tensor
    mask: Tensor
    classes: Tensor | None = None
