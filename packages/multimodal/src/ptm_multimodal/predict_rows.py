"""``ptm predict`` on a fine-tuned VisualBERT/ViLBERT: each row's text with its image regions.

The families' ``predictors`` hook (:class:`~ptm_core.families.spec.FamilySpec`). The input is
the task's JSONL (``image_id`` + ``text`` for classification, ``image_id`` + ``question``
for VQA; :func:`~ptm_multimodal.task_data.read_image_text_task`, which reads and checks the
whole file against the region features the task recorded); scoring and writing stream in
batches. Each record adds ``prediction`` (label or answer), ``score`` and ``scores`` (the
five most probable labels or answers: a softmax over labels, a sigmoid per VQA answer).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from ptm_core.finetune.data.tables import TableFile
from ptm_core.finetune.predict import record_of
from ptm_multimodal.region_features import read_region_features
from ptm_multimodal.task_data import ImageTextFeaturizer, read_image_text_task
from ptm_multimodal.task_io import load_image_text_task_model

TOP = 5


class ImageTextPredictions:
    """The records of ``ptm predict`` for a fine-tuned image-text ``final/`` on one file.

    Args:
        directory: the fine-tuned ``final/``.
        path: the task JSONL to predict on.
        device: where to run.
        batch_size: rows per forward pass (default the task's ``eval_batch_size``).
    """

    def __init__(
        self, directory: Path, path: Path, *, device: str = "cpu", batch_size: int | None = None
    ) -> None:
        model, tokenizer, task, _record = load_image_text_task_model(directory)
        features_dir = Path(task.features or Path(task.train).parent)
        features = read_region_features(features_dir)
        model.encoder.check_features(features.spec, source=str(features_dir / "features.json"))  # type: ignore[operator]
        self.examples, names = read_image_text_task(
            path,
            task.kind,
            features,
            label_names=model.label_names,
            require_labels=False,
            features_path=features_dir / "features.json",
        )
        self.featurizer = ImageTextFeaturizer(
            tokenizer,
            features,
            task.kind,
            names,
            task.max_length,
            answer_slot=model.answer_head == "cloze",
        )
        self.model = model.to(device).eval()
        self.names = list(model.label_names)
        self.kind = task.kind
        self.device = torch.device(device)
        self.batch_size = int(batch_size or task.eval_batch_size)
        self.table = TableFile(path, "jsonl")

    def records(self) -> Iterator[dict[str, Any]]:
        """One record per input row, in order: the row's values, ``prediction``, scores."""
        values = (row for _key, _number, row in self.table.scan())
        for start in range(0, len(self.examples), self.batch_size):
            part = self.examples[start : start + self.batch_size]
            batch = self.featurizer.featurize(part)
            inputs = {
                k: v.to(self.device)
                for k, v in batch.items()
                if k not in ("labels", "answer_scores")
            }
            with torch.inference_mode():
                logits = self.model(inputs).logits.float().cpu()
            # VQA scores each answer on its own (soft targets, BCE): a sigmoid per answer.
            probabilities = logits.sigmoid() if self.kind == "vqa" else logits.softmax(-1)
            for row in probabilities:
                top = row.topk(min(TOP, row.numel()))
                best = int(top.indices[0])
                yield record_of(
                    next(values),
                    {
                        "prediction": self.names[best],
                        "score": round(float(top.values[0]), 6),
                        "scores": {
                            self.names[int(i)]: round(float(p), 6)
                            for p, i in zip(top.values, top.indices, strict=True)
                        },
                    },
                )


def predict_image_text_rows(
    directory: Path, path: Path, *, device: str = "cpu", batch_size: int | None = None
) -> ImageTextPredictions:
    """The ``predictors`` hook: :class:`ImageTextPredictions` for ``directory`` on ``path``."""
    return ImageTextPredictions(directory, path, device=device, batch_size=batch_size)


__all__ = ["ImageTextPredictions", "predict_image_text_rows"]
