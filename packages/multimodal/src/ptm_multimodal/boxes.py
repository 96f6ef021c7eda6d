"""Box encoding shared by every visual input: grid cells and detector regions."""

from __future__ import annotations

import torch
from torch import Tensor


def encode_boxes(boxes: Tensor, width: float | Tensor, height: float | Tensor) -> Tensor:
    """Encode pixel boxes as ViLBERT's 5-d position (Lu et al., 2019).

    ``[x1 / W, y1 / H, x2 / W, y2 / H, (x2 - x1) * (y2 - y1) / (W * H)]``.

    Args:
        boxes: ``(..., 4)`` pixel boxes ``[x1, y1, x2, y2]``.
        width: image width ``W`` in pixels (a number or a tensor broadcastable to
            ``boxes[..., 0]``, e.g. ``(B, 1)`` for per-image sizes).
        height: image height ``H`` in pixels.

    Returns:
        ``(..., 5)`` float tensor.
    """
    boxes = boxes.float()
    w = torch.as_tensor(width, dtype=boxes.dtype, device=boxes.device)
    h = torch.as_tensor(height, dtype=boxes.dtype, device=boxes.device)
    x1, y1, x2, y2 = boxes.unbind(-1)
    area = (x2 - x1).clamp(min=0) * (y2 - y1).clamp(min=0) / (w * h)
    return torch.stack([x1 / w, y1 / h, x2 / w, y2 / h, area], dim=-1)


def grid_boxes(grid_height: int, grid_width: int, image_height: int, image_width: int) -> Tensor:
    """Pixel boxes of the cells of a ``grid_height x grid_width`` feature map, row-major.

    Args:
        grid_height: feature-map rows.
        grid_width: feature-map columns.
        image_height: image height in pixels.
        image_width: image width in pixels.

    Returns:
        ``(grid_height * grid_width, 4)`` boxes ``[x1, y1, x2, y2]`` in pixels.
    """
    ys = torch.linspace(0, image_height, grid_height + 1)
    xs = torch.linspace(0, image_width, grid_width + 1)
    y1, x1 = torch.meshgrid(ys[:-1], xs[:-1], indexing="ij")
    y2, x2 = torch.meshgrid(ys[1:], xs[1:], indexing="ij")
    return torch.stack([x1, y1, x2, y2], dim=-1).reshape(-1, 4)
