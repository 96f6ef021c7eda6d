"""``ptm predict`` on an ERNIE-THU fine-tuned ``final/``: rows linked to the model's KG.

The family's ``predictors`` hook (:class:`~ptm_core.families.spec.FamilySpec`). The input
file (any GLUE-style table format of :mod:`ptm_core.finetune.data.tables`) is linked
against the KG that ``task.json`` records, once and cached as in training
(:func:`~ptm_knowledge.ernie.task_links.task_links`), then scored in file order. Linking
needs the whole file, so the rows are linked up front; scoring and writing stream.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer
from ptm_core.finetune.predict import record_of
from ptm_core.finetune.predict_inputs import prediction_rows
from ptm_core.finetune.task_spec import TaskSpec
from ptm_knowledge.ernie.finetune import _linked_data
from ptm_knowledge.ernie.task_io import load_ernie_task_model


class ErniePredictions:
    """The records of ``ptm predict`` for an ERNIE-THU ``final/`` on one input file.

    Args:
        directory: the fine-tuned ``final/``.
        path: the rows to predict on (the task's columns).
        device: where to run.
        batch_size: rows per forward pass (default the task's ``eval_batch_size``).
    """

    def __init__(
        self, directory: Path, path: Path, *, device: str = "cpu", batch_size: int | None = None
    ) -> None:
        model, record = load_ernie_task_model(directory)
        self.model = model.to(device).eval()
        self.task = TaskSpec.from_mapping(record["task"])
        self.kind = self.task.kind
        self.path = Path(path)
        self.device = torch.device(device)
        self.batch_size = int(batch_size or self.task.eval_batch_size)
        self.names: list[str] = list(record.get("label_names") or [])
        index = {entity: i for i, entity in enumerate(record["entity_ids"])}
        self.data = _linked_data(
            self.task,
            "dev",
            load_task_tokenizer(directory),
            index,
            record["kg"],
            self.names or None,
            path=self.path,
            labelled=False,
            linker_options=record.get("linker"),
        )

    def records(self) -> Iterator[dict[str, Any]]:
        """One record per input row, in order: the row's values, ``prediction``, scores."""
        rows = self.data.rows
        values = prediction_rows(self.task, self.path)
        with torch.inference_mode():
            for start in range(0, len(rows), self.batch_size):
                part = [rows[i] for i in range(start, min(start + self.batch_size, len(rows)))]
                batch = self.data.featurizer.featurize(part)
                inputs = {k: v.to(self.device) for k, v in batch.items() if k != "labels"}
                logits = self.model(inputs).logits.float().cpu()
                for row in logits:
                    row_values, _example = next(values)
                    yield record_of(row_values, self._result(row))

    def _result(self, logits: torch.Tensor) -> dict[str, Any]:
        if self.kind == "regression":
            return {"prediction": float(logits.reshape(-1)[0])}
        p = logits.softmax(-1).tolist()
        best = max(range(len(p)), key=p.__getitem__)
        name = self.names[best] if best < len(self.names) else best
        scores = {self.names[i] if i < len(self.names) else i: round(x, 6) for i, x in enumerate(p)}
        return {"prediction": name, "score": round(p[best], 6), "scores": scores}


def predict_ernie_rows(
    directory: Path, path: Path, *, device: str = "cpu", batch_size: int | None = None
) -> ErniePredictions:
    """The ``predictors`` hook: :class:`ErniePredictions` for ``directory`` on ``path``."""
    return ErniePredictions(directory, path, device=device, batch_size=batch_size)


__all__ = ["ErniePredictions", "predict_ernie_rows"]
