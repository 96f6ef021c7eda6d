"""Masked region modelling (ViLBERT's masked multimodal learning, image half)."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.objectives import Objective, ObjectiveOutput
from ptm_core.objectives.base import Batch
from ptm_core.tokenization import VocabInfo

RegionTarget = Literal["auto", "classes", "features"]


def mask_regions(
    features: Tensor,
    region_mask: Tensor,
    generator: torch.Generator,
    *,
    mask_prob: float = 0.15,
    zero_prob: float = 0.9,
) -> tuple[Tensor, Tensor, Tensor]:
    """ViLBERT's region corruption (Lu et al., 2019, §3.2).

    Each real region is selected independently with probability ``mask_prob`` (so a row
    may have none selected, as in the original); of the selected, ``zero_prob`` have their
    feature zeroed and the rest are kept unchanged (they still must be predicted).

    Args:
        features: ``(B, R, D)`` (not modified).
        region_mask: ``(B, R)`` bool, True at real regions (padding is never selected).
        generator: the seeded source of randomness.
        mask_prob: selection rate.
        zero_prob: fraction of the selected that are zeroed.

    Returns:
        ``(corrupted, selected, zeroed)``: ``(B, R, D)`` features and two ``(B, R)`` bool.
    """
    draw = torch.rand(region_mask.shape, generator=generator)
    selected = region_mask.bool() & (draw < mask_prob)
    zeroed = selected & (torch.rand(region_mask.shape, generator=generator) < zero_prob)
    corrupted = features.masked_fill(zeroed[..., None], 0.0)
    return corrupted, selected, zeroed


class RegionPredictionHead(nn.Module):
    """``W_o LN(gelu(W x))``: region states to class logits or features (ViLBERT).

    Shapes:
        ``(..., D_v) -> (..., out_size)``.
    """

    def __init__(self, hidden_size: int, out_size: int, layer_norm_eps: float = 1e-12) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.norm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.out = nn.Linear(hidden_size, out_size)
        for linear in (self.dense, self.out):
            nn.init.normal_(linear.weight, std=0.02)
            nn.init.zeros_(linear.bias)

    def forward(self, hidden: Tensor) -> Tensor:
        return self.out(self.norm(F.gelu(self.dense(hidden))))


class MaskedRegionObjective(Objective):
    """Masked region modelling (Lu et al., 2019).

    Data side (:meth:`collate`): :func:`mask_regions` on ``visual_features``; the original
    features are kept as ``region_target_features``. Loss side: the image-stream states at
    the selected regions go through :class:`RegionPredictionHead`; with ``target="classes"``
    the loss is ``KL(p_detector || softmax(logits))`` (summed over classes, averaged over
    selected regions), with ``"features"`` the mean squared error to the original
    features; ``"auto"`` uses classes when the batch has ``visual_classes``. Swapped-caption
    rows are ignored (their caption is not grounded in the image). When no region is
    selected the loss is an exact 0 that still has a graph (never NaN).

    Args:
        encoder: the :class:`~ptm_multimodal.vilbert.VilbertModel` (for its widths).
        vocab: unused (uniform objective factory signature).
        num_classes: detector classes (required unless ``target="features"``).
        mask_prob: region selection rate.
        zero_prob: fraction of selected regions zeroed.
        target: ``"auto"``, ``"classes"`` or ``"features"``.

    Batch keys: reads ``visual_features``, ``visual_mask``, optional ``visual_classes``,
    ``match_label``; writes ``visual_features`` (corrupted), ``region_selected``,
    ``region_target_features``.
    """

    name = "mrm"
    batch_keys = ("region_selected", "region_target_features")

    def __init__(
        self,
        encoder,
        vocab: VocabInfo | None = None,
        *,
        num_classes: int | None = None,
        mask_prob: float = 0.15,
        zero_prob: float = 0.9,
        target: RegionTarget = "auto",
    ) -> None:
        super().__init__()
        if target not in ("auto", "classes", "features"):
            raise ValueError(f"target must be 'auto', 'classes' or 'features', got {target!r}")
        if target != "features" and num_classes is None:
            spec = getattr(encoder, "feature_spec", None)
            num_classes = None if spec is None else spec.num_classes
        if target == "classes" and num_classes is None:
            raise ValueError("target='classes' needs num_classes (the detector's class count)")
        self.mask_prob = mask_prob
        self.zero_prob = zero_prob
        self.target = target
        hidden = encoder.image_hidden_size
        self.class_head = RegionPredictionHead(hidden, num_classes) if num_classes else None
        self.feature_head = (
            RegionPredictionHead(hidden, encoder.feature_size) if target != "classes" else None
        )

    def collate(self, batch: Batch, generator: torch.Generator) -> Batch:
        corrupted, selected, _ = mask_regions(
            batch["visual_features"],
            batch["visual_mask"],
            generator,
            mask_prob=self.mask_prob,
            zero_prob=self.zero_prob,
        )
        return {
            **batch,
            "visual_features": corrupted,
            "region_selected": selected,
            "region_target_features": batch["visual_features"],
        }

    def forward(self, encoder_output, batch: Batch) -> ObjectiveOutput:
        hidden = encoder_output.image_hidden_state[:, 1:]  # (B, R, D_v), global token dropped
        selected = batch["region_selected"].bool()
        if "match_label" in batch:
            selected = selected & (batch["match_label"][:, None] == 1)
        count = selected.sum()
        states = hidden[selected]  # (N, D_v)
        use_classes = self.target == "classes" or (
            self.target == "auto" and "visual_classes" in batch and self.class_head is not None
        )
        if use_classes:
            if self.class_head is None:
                raise ValueError("this objective was built without num_classes")
            log_q = F.log_softmax(self.class_head(states).float(), dim=-1)
            p = batch["visual_classes"][selected].float()
            total = F.kl_div(log_q, p, reduction="sum")
        else:
            if self.feature_head is None:
                raise ValueError("target='classes' but the batch has no visual_classes")
            pred = self.feature_head(states).float()
            target = batch["region_target_features"][selected].float()
            total = ((pred - target) ** 2).mean(dim=-1).sum()
        # sum / max(n, 1): exactly 0 (with a graph) when nothing is selected, never 0/0.
        loss = total / count.clamp(min=1).to(total.dtype)
        return ObjectiveOutput(loss=loss, metrics={"regions": count.detach().float()})
