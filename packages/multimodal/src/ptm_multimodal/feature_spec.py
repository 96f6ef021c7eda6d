"""Which visual features a dataset holds and a model expects, and the check between them.

Models trained on one feature extractor silently accept features of another with the same
width (or crash deep inside a matmul with a different one). ptm records a
:class:`FeatureSpec` in every region-feature dataset (``features.json``) and in every
multimodal checkpoint (``config.json``), and :meth:`FeatureSpec.check_compatible` refuses
a mismatch with :class:`FeatureMismatchError` before any tensor meets a weight.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn


class FeatureMismatchError(ValueError):
    """Visual features do not match what the model was built or trained for.

    Raised when the feature width, the extractor name or the extractor hash of a dataset
    differ from the model's :class:`FeatureSpec`. Fix: re-extract the features with the
    model's extractor (named in the message), or build/train a model for the dataset's
    features.
    """


@dataclass(frozen=True)
class FeatureSpec:
    """Identity of a visual feature extractor.

    Args:
        extractor: a readable name, e.g. ``"timm:resnet10t:grid"`` or
            ``"synthetic-detector-v1"``.
        feature_size: width ``D`` of one region/cell feature.
        extractor_hash: a digest of the extractor's weights/configuration
            (:func:`hash_module` or :func:`hash_text`); two extractors with one name but
            different weights differ here.
        num_classes: size of the detector's class distribution, or ``None`` if the
            features come without one.
    """

    extractor: str
    feature_size: int
    extractor_hash: str
    num_classes: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.feature_size, int) or self.feature_size <= 0:
            raise ValueError(
                f"FeatureSpec.feature_size must be a positive int, got {self.feature_size!r}"
            )
        if not self.extractor:
            raise ValueError("FeatureSpec.extractor must be a non-empty name")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "feature spec") -> FeatureSpec:
        """Build from ``to_dict`` output; missing fields name ``source`` and the field."""
        for key in ("extractor", "feature_size", "extractor_hash"):
            if key not in data:
                raise ValueError(f"{source}: field {key!r} is missing; add it to the feature spec")
        return cls(
            extractor=str(data["extractor"]),
            feature_size=int(data["feature_size"]),
            extractor_hash=str(data["extractor_hash"]),
            num_classes=None if data.get("num_classes") is None else int(data["num_classes"]),
        )

    def check_compatible(self, features: FeatureSpec, *, source: str = "the dataset") -> None:
        """Raise :class:`FeatureMismatchError` unless ``features`` are this model's features.

        Args:
            features: the spec of the data about to be fed (``self`` is the model's).
            source: where ``features`` came from (a path), for the message.
        """
        problems = []
        if features.feature_size != self.feature_size:
            problems.append(
                f"feature_size {features.feature_size} in {source} but the model expects "
                f"{self.feature_size}"
            )
        if features.extractor != self.extractor:
            problems.append(
                f"extractor {features.extractor!r} in {source} but the model was built for "
                f"{self.extractor!r}"
            )
        elif features.extractor_hash != self.extractor_hash:
            problems.append(
                f"extractor_hash {features.extractor_hash} in {source} but the model's is "
                f"{self.extractor_hash} (same name, different weights or settings)"
            )
        if problems:
            raise FeatureMismatchError(
                "visual features do not match the model: "
                + "; ".join(problems)
                + f". Re-extract the features with {self.extractor!r} "
                "(see ptm_multimodal.features), or build/train a model for these features."
            )


def hash_text(text: str) -> str:
    """A short, stable digest of a configuration string."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def hash_module(module: nn.Module) -> str:
    """A short digest of a module's parameter and buffer names, shapes and values."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(name.encode("utf-8"))
        digest.update(str(tuple(tensor.shape)).encode("utf-8"))
        data = tensor.detach().to("cpu").contiguous()
        if data.dtype == torch.bfloat16:
            data = data.float()
        digest.update(data.numpy().tobytes())
    return digest.hexdigest()[:16]


def check_model_features(
    model_spec: FeatureSpec | None, feature_size: int, spec: FeatureSpec, *, source: str
) -> None:
    """Raise :class:`FeatureMismatchError` when ``spec`` does not fit a model.

    A model trained on known features checks the whole spec (size, extractor, hash); a
    model built without one only knows its input width, so only the size is checked.
    """
    expected = model_spec or FeatureSpec(
        extractor=spec.extractor, feature_size=feature_size, extractor_hash=spec.extractor_hash
    )
    expected.check_compatible(spec, source=source)


def check_feature_width(features: torch.Tensor, width: int, spec: FeatureSpec | None) -> None:
    """Refuse a batch of ``(..., D_v)`` features whose width is not the model's ``width``.

    Raises:
        FeatureMismatchError: the widths differ (the message names the model's features).
    """
    if features.shape[-1] != width:
        raise FeatureMismatchError(
            f"visual features are {features.shape[-1]}-d but this model takes "
            f"{width}-d features ({spec or 'no spec'}); "
            "re-extract with the model's extractor or build a model for these features"
        )
