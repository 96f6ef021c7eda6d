"""Grid features from any timm backbone: one region (and one box) per feature-map cell."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from ptm_multimodal.boxes import grid_boxes
from ptm_multimodal.feature_spec import FeatureSpec, hash_module
from ptm_multimodal.region_features import ImageRegions, RegionFeatureSet
from ptm_multimodal.visual_features import VisualFeatures


class GridFeatureExtractor(nn.Module):
    """Grid features of a timm backbone (Jiang et al., 2020, "In Defense of Grid Features").

    The backbone is created by name with ``pretrained=False`` by default, so nothing is
    ever downloaded; give ``weights`` (a local ``.pth``/``.safetensors`` file) to load
    trained weights through timm's ``pretrained_cfg_overlay=dict(file=...)``. The last
    feature map ``(B, D, h, w)`` becomes ``h * w`` regions with one box per cell.

    Args:
        backbone: any ``timm.list_models()`` name (``"resnet10t"``, ``"test_vit"``, ...).
        weights: optional local weights file.
        pool: optional ``(h, w)`` to adaptive-average-pool the map to (fixes the region
            count across input sizes).
        **timm_kwargs: passed to ``timm.create_model`` (``in_chans``, ...).

    Shapes:
        images ``(B, 3, H, W)`` -> :class:`VisualFeatures` with ``R = h * w``.
    """

    def __init__(
        self,
        backbone: str,
        *,
        weights: str | Path | None = None,
        pool: tuple[int, int] | None = None,
        **timm_kwargs: Any,
    ) -> None:
        super().__init__()
        import timm

        if backbone not in timm.list_models():
            close = [n for n in timm.list_models() if backbone.split("_")[0] in n][:10]
            raise ValueError(
                f"unknown timm backbone {backbone!r}; similar names: {close or 'none'} "
                "(see timm.list_models())"
            )
        if weights is not None:
            path = Path(weights)
            if not path.is_file():
                raise FileNotFoundError(
                    f"backbone weights file {path} does not exist; give a local .pth or "
                    ".safetensors file, or weights=None for random initialisation"
                )
            self.backbone = timm.create_model(
                backbone,
                pretrained=True,
                pretrained_cfg_overlay={"file": str(path)},
                **timm_kwargs,
            )
        else:
            self.backbone = timm.create_model(backbone, pretrained=False, **timm_kwargs)
        self.name = backbone
        self.pool = pool
        self.feature_size = int(self.backbone.num_features)  # type: ignore[arg-type]

    def feature_spec(self) -> FeatureSpec:
        """The :class:`FeatureSpec` of these features (name, width and a weights hash)."""
        pool = "" if self.pool is None else f":pool{self.pool[0]}x{self.pool[1]}"
        return FeatureSpec(
            extractor=f"timm:{self.name}:grid{pool}",
            feature_size=self.feature_size,
            extractor_hash=hash_module(self.backbone),
        )

    def feature_map(self, images: Tensor) -> Tensor:
        """``(B, 3, H, W)`` -> ``(B, D, h, w)``, whatever layout the backbone uses."""
        out = self.backbone.forward_features(images)  # type: ignore[operator]
        if out.dim() == 3:
            # Vision Transformers: (B, T, D) tokens; drop prefix tokens, fold the patches.
            prefix = int(getattr(self.backbone, "num_prefix_tokens", 0))
            patches = out[:, prefix:]
            side = round(patches.shape[1] ** 0.5)
            if side * side != patches.shape[1]:
                raise ValueError(
                    f"backbone {self.name!r} returned {patches.shape[1]} patch tokens, not a "
                    "square grid; use a convolutional backbone or square images"
                )
            out = patches.transpose(1, 2).reshape(out.shape[0], -1, side, side)
        elif (
            out.dim() == 4
            and out.shape[1] != self.feature_size
            and out.shape[-1] == self.feature_size
        ):
            out = out.permute(0, 3, 1, 2)  # NHWC backbones
        if self.pool is not None:
            out = nn.functional.adaptive_avg_pool2d(out, self.pool)
        return out

    def forward(self, images: Tensor) -> VisualFeatures:
        fmap = self.feature_map(images)  # (B, D, h, w)
        batch, _, gh, gw = fmap.shape
        height, width = images.shape[-2:]
        features = fmap.flatten(2).transpose(1, 2)  # (B, h*w, D)
        boxes = grid_boxes(gh, gw, height, width).to(features)  # (h*w, 4)
        return VisualFeatures(
            features=features,
            boxes=boxes.expand(batch, -1, -1),
            image_sizes=torch.tensor([[width, height]] * batch, dtype=torch.float32),
            mask=torch.ones(batch, gh * gw, dtype=torch.bool),
        )


@torch.no_grad()
def grid_feature_set(
    images: dict[str, Tensor], extractor: GridFeatureExtractor, *, batch_size: int = 32
):
    """Run ``extractor`` over images and keep the result as a region-feature set.

    Grid cells become regions (one box per cell), so grid and detector features share one
    on-disk format (:func:`~ptm_multimodal.region_features.write_region_features`).

    Args:
        images: ``image_id -> (3, H, W)`` uint8 (0..255) or float (0..1) tensors, one size.
        extractor: the backbone wrapper.
        batch_size: images per forward pass.

    Returns:
        :class:`~ptm_multimodal.region_features.RegionFeatureSet` with the extractor's spec.
    """
    extractor.eval()
    ids = list(images)
    out: dict[str, ImageRegions] = {}
    for start in range(0, len(ids), batch_size):
        chunk = ids[start : start + batch_size]
        pixels = torch.stack([images[i] for i in chunk])
        if pixels.dtype == torch.uint8:
            pixels = pixels.float() / 255.0
        feats = extractor(pixels)
        for row, image_id in enumerate(chunk):
            w, h = feats.image_sizes[row].tolist()
            out[image_id] = ImageRegions(
                features=feats.features[row].float().cpu(),
                boxes=feats.boxes[row].float().cpu(),
                width=int(w),
                height=int(h),
            )
    return RegionFeatureSet(spec=extractor.feature_spec(), images=out)
