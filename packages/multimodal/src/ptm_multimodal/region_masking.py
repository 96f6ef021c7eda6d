"""Masked region modelling (ViLBERT's masked multimodal learning, image half)."""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ptm_core.objectives import Objective, ObjectiveOutput
from ptm_core.objectives.base import Batch
from ptm_core.tokenization import VocabInfo

RegionTarget = Literal["auto", "classes", "features", "both"]
ClassLoss = Literal["distribution", "label"]


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
    """Masked region modelling (Lu et al., 2019; Su et al., 2020; Qi et al., 2020).

    Data side (:meth:`collate`): :func:`mask_regions` on ``visual_features``; the original
    features are kept as ``region_target_features``. Loss side: the states of the selected
    regions (the output's ``region_hidden_state``, ``(B, R, D_v)``) go through a
    :class:`RegionPredictionHead` per target:

    * classes (masked object classification): with ``class_loss="distribution"`` the loss
      is ``KL(p_detector || softmax(logits))`` (summed over classes; ViLBERT, VL-BERT),
      with ``"label"`` the cross-entropy to the detector's most likely class (ImageBERT's
      MOC);
    * features (masked region feature regression): the mean squared error to the original
      features (ImageBERT's MRFR);

    each averaged over selected regions. ``target="auto"`` uses classes when the batch has
    ``visual_classes``, ``"both"`` sums the two losses (ImageBERT: MOC and MRFR on the same
    masked regions, each logged as a metric, ``moc`` and ``mrfr``). Swapped-caption rows
    are ignored (their caption is not grounded in the image). When no region is selected
    the loss is an exact 0 that still has a graph (never NaN).

    Args:
        encoder: the network (its ``image_hidden_size``, ``feature_size``, ``feature_spec``).
        vocab: unused (uniform objective factory signature).
        num_classes: detector classes (required unless ``target="features"``).
        mask_prob: region selection rate.
        zero_prob: fraction of selected regions zeroed.
        target: ``"auto"``, ``"classes"``, ``"features"`` or ``"both"``.
        class_loss: ``"distribution"`` (KL to the detector's distribution) or ``"label"``
            (cross-entropy to its arg-max class).

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
        class_loss: ClassLoss = "distribution",
    ) -> None:
        super().__init__()
        if target not in ("auto", "classes", "features", "both"):
            raise ValueError(
                f"target must be 'auto', 'classes', 'features' or 'both', got {target!r}"
            )
        if class_loss not in ("distribution", "label"):
            raise ValueError(f"class_loss must be 'distribution' or 'label', got {class_loss!r}")
        if target != "features" and num_classes is None:
            spec = getattr(encoder, "feature_spec", None)
            num_classes = None if spec is None else spec.num_classes
        if target in ("classes", "both") and num_classes is None:
            raise ValueError(
                f"target={target!r} needs num_classes (the detector's class count); features "
                "without classes can only be regressed (target='features')"
            )
        self.mask_prob = mask_prob
        self.zero_prob = zero_prob
        self.target = target
        self.class_loss = class_loss
        hidden = encoder.image_hidden_size
        self.class_head = RegionPredictionHead(hidden, num_classes) if num_classes else None
        self.feature_head = (
            RegionPredictionHead(hidden, encoder.feature_size) if target != "classes" else None
        )

    def checkpoint_settings(self) -> dict[str, object]:
        """What ``config.json`` keeps so that a reloaded objective scores as trained."""
        return {
            "mask_prob": self.mask_prob,
            "zero_prob": self.zero_prob,
            "target": self.target,
            "class_loss": self.class_loss,
        }

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

    def class_loss_sum(self, states: Tensor, classes: Tensor) -> Tensor:
        """Summed masked-object-classification loss of ``states`` ``(N, D_v)`` against the
        detector's distributions ``classes`` ``(N, C)``."""
        if self.class_head is None:
            raise ValueError("this objective was built without num_classes")
        logits = self.class_head(states).float()
        if self.class_loss == "label":
            return F.cross_entropy(logits, classes.argmax(-1), reduction="sum")
        return F.kl_div(F.log_softmax(logits, dim=-1), classes.float(), reduction="sum")

    def feature_loss_sum(self, states: Tensor, targets: Tensor) -> Tensor:
        """Summed masked-region-feature-regression loss (mean squared error per region)."""
        if self.feature_head is None:
            raise ValueError("target='classes' but the batch has no visual_classes")
        pred = self.feature_head(states).float()
        return ((pred - targets.float()) ** 2).mean(dim=-1).sum()

    def forward(self, encoder_output, batch: Batch) -> ObjectiveOutput:
        hidden = encoder_output.region_hidden_state  # (B, R, D_v)
        selected = batch["region_selected"].bool()
        if "match_label" in batch:
            selected = selected & (batch["match_label"][:, None] == 1)
        count = selected.sum()
        states = hidden[selected]  # (N, D_v)
        # sum / max(n, 1): exactly 0 (with a graph) when nothing is selected, never 0/0.
        scale = count.clamp(min=1)
        metrics: dict[str, Tensor] = {"regions": count.detach().float()}
        if self.target == "both":
            if "visual_classes" not in batch:
                raise ValueError(
                    "target='both' classifies masked objects: the batch needs visual_classes "
                    "(region features with the detector's classes)"
                )
            moc = self.class_loss_sum(states, batch["visual_classes"][selected]) / scale
            mrfr = self.feature_loss_sum(states, batch["region_target_features"][selected]) / scale
            metrics.update(moc=moc.detach(), mrfr=mrfr.detach())
            return ObjectiveOutput(loss=moc + mrfr, metrics=metrics)
        use_classes = self.target == "classes" or (
            self.target == "auto" and "visual_classes" in batch and self.class_head is not None
        )
        if use_classes:
            total = self.class_loss_sum(states, batch["visual_classes"][selected])
        else:
            total = self.feature_loss_sum(states, batch["region_target_features"][selected])
        loss = total / scale.to(total.dtype)
        return ObjectiveOutput(loss=loss, metrics=metrics)
