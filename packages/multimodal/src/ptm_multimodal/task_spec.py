"""One image-text task: what the ``multimodal_finetune.task`` block of an experiment names.

Torch-free, so the family's typed settings (:mod:`ptm_multimodal.settings`) can use it
without loading a model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

IMAGE_TEXT_KINDS = ("classification", "vqa")
DEFAULT_METRIC = {"classification": "accuracy", "vqa": "vqa_accuracy"}


@dataclass
class ImageTextTask:
    """One image-text task (the ``multimodal_finetune.task`` block of an experiment).

    Args:
        name: short name (reports).
        kind: ``classification`` or ``vqa``.
        train: the training JSONL.
        dev: the dev JSONL (scored after training and by :func:`predict_image_text`).
        features: the region-feature directory the files' ``image_id`` refer to
            (default: the training file's directory).
        max_length: text tokens, ``[CLS]``/``[SEP]`` included.
        batch_size: training examples per step.
        eval_batch_size: examples per scoring batch.
        metric: the headline metric (``accuracy`` / ``vqa_accuracy`` by default).
    """

    name: str
    kind: str
    train: str
    dev: str
    features: str | None = None
    max_length: int = 32
    batch_size: int = 32
    eval_batch_size: int = 64
    metric: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in IMAGE_TEXT_KINDS:
            raise ValueError(
                f"task {self.name}: unknown kind {self.kind!r}; valid: {', '.join(IMAGE_TEXT_KINDS)}"
            )
        self.metric = self.metric or DEFAULT_METRIC[self.kind]
        self.train, self.dev = str(self.train), str(self.dev)
        if self.features is None:
            self.features = str(Path(self.train).parent)
        self.features = str(self.features)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> ImageTextTask:
        """Build from a config mapping; an unknown key is an error listing the valid ones."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(mapping) - known)
        if unknown:
            raise ValueError(
                f"multimodal_finetune.task: unknown key(s) {', '.join(unknown)}; valid keys: "
                f"{', '.join(sorted(known))}"
            )
        return cls(**dict(mapping))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
