"""Image-text fine-tuning data: task files, VQA soft scores and accuracy, the featurizer.

A task file is JSONL whose ``image_id`` values refer to a region-feature directory
(``data_specs/image_text/README.md``, "Fine-tuning tasks"):

- ``classification``: ``{"id", "image_id", "text", "label"}`` (a statement true/false, a
  caption category, ...);
- ``vqa``: ``{"id", "image_id", "question", "answers": [...]}`` (every annotator's answer,
  VQA v2 has ten) or ``"answer": "..."``.

VQA scoring follows VQA v2 (Antol et al., 2015; Goyal et al., 2017): an answer's soft
score is ``min(#annotators who gave it / 3, 1)`` (:func:`answer_scores`, the training
target) and the accuracy of a prediction is that score averaged over the ten leave-one-out
subsets of nine annotators (:func:`vqa_accuracy`, the official evaluation).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ptm_core.data.errors import DataError
from ptm_core.data.lines import iter_lines
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer
from ptm_multimodal.boxes import encode_boxes
from ptm_multimodal.region_features import RegionFeatureSet, stack_regions

TEXT_FIELD = {"classification": "text", "vqa": "question"}


class ImageTextTaskError(DataError):
    """A task file does not follow ``data_specs/image_text`` ("Fine-tuning tasks")."""


@dataclass
class ImageTextExample:
    """One task line: ``label`` indexes the label names (classification), ``answers`` are
    the annotators' answers (vqa); both ``None`` in an unlabelled file."""

    id: str
    image_id: str
    text: str
    line: int
    label: int | None = None
    answers: list[str] | None = None


def _error(path: Path, line: int | None, field: str, problem: str, fix: str) -> ImageTextTaskError:
    return ImageTextTaskError(path, line, field, problem, fix)


def normalize_answer(answer: str) -> str:
    """Lowercase and strip (the synthetic answers need no more of VQA's normalisation)."""
    return " ".join(answer.lower().split())


def read_image_text_task(
    path: str | Path,
    kind: str,
    features: RegionFeatureSet,
    *,
    label_names: Sequence[str] | None = None,
    require_labels: bool = True,
    features_path: str | Path = "features.json",
) -> tuple[list[ImageTextExample], list[str]]:
    """Read a task JSONL and check every line against the region features.

    Args:
        path: the file.
        kind: ``classification`` (fields ``image_id``, ``text``, ``label``) or ``vqa``
            (``image_id``, ``question``, ``answers`` list or ``answer`` string); ``id`` is
            optional everywhere.
        features: the regions the ``image_id`` values refer to.
        label_names: the training file's labels / answer vocabulary (for a dev file); an
            unseen classification label is an error, an unseen VQA answer is kept (it scores
            0, as in VQA).
        require_labels: False for a file to predict on (labels optional).
        features_path: named in the unknown-image error.

    Returns:
        ``(examples, label_names)``: the names are sorted when built from this file.

    Raises:
        ImageTextTaskError: ``file:line`` and the field: invalid JSON, a missing or empty
            field, an ``image_id`` without features, a bad ``answers`` list, an unknown label.
    """
    path = Path(path)
    if not path.is_file():
        raise _error(path, None, "path", "no such file", "give a task .jsonl file")
    text_field = TEXT_FIELD[kind]
    rows: list[tuple[int, dict[str, Any]]] = []
    for number, line in iter_lines(path, _error):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _error(
                path, number, "json", f"invalid JSON ({exc.msg})", "one object per line"
            ) from None
        if not isinstance(row, dict):
            raise _error(path, number, "json", "not a JSON object", "one object per line")
        for key in ("image_id", text_field):
            if not isinstance(row.get(key), str) or not row[key].strip():
                raise _error(path, number, key, "missing or empty", f"give {key!r} as a string")
        if row["image_id"] not in features.images:
            raise _error(
                path,
                number,
                "image_id",
                f"{row['image_id']!r} has no regions in {features_path}",
                "extract its features or fix the id",
            )
        rows.append((number, row))
    if not rows:
        raise _error(path, None, "examples", "no examples", "add one JSON object per line")
    gold: list[Any] = []
    for number, row in rows:
        if kind == "classification":
            label = row.get("label")
            if label is None or isinstance(label, (dict, list)) or str(label).strip() == "":
                if require_labels:
                    raise _error(path, number, "label", "missing or empty", "give a label")
                gold.append(None)
                continue
            gold.append(str(label).lower() if isinstance(label, bool) else str(label))
        else:
            answers = row.get("answers", [row["answer"]] if "answer" in row else None)
            if answers is None:
                if require_labels:
                    raise _error(
                        path, number, "answers", "missing", 'give "answers": [...] or "answer"'
                    )
                gold.append(None)
                continue
            if (
                not isinstance(answers, list)
                or not answers
                or not all(isinstance(a, str) and a.strip() for a in answers)
            ):
                raise _error(
                    path,
                    number,
                    "answers",
                    f"{answers!r} is not a list of non-empty strings",
                    "give the annotators' answers as strings",
                )
            gold.append([normalize_answer(a) for a in answers])
    if label_names is None:
        seen = (
            {g for g in gold if g is not None}
            if kind == "classification"
            else {a for g in gold if g is not None for a in g}
        )
        label_names = sorted(seen)
    names = list(label_names)
    index = {name: i for i, name in enumerate(names)}
    examples: list[ImageTextExample] = []
    for (number, row), value in zip(rows, gold, strict=True):
        example = ImageTextExample(
            str(row.get("id", number)), row["image_id"], row[text_field], number
        )
        if kind == "classification" and value is not None:
            if value not in index:
                raise _error(
                    path, number, "label", f"unknown label {value!r}", f"use one of {names}"
                )
            example.label = index[value]
        elif value is not None:
            example.answers = value
        examples.append(example)
    return examples, names


def answer_scores(answers: Sequence[str], answer_names: Sequence[str]) -> list[float]:
    """VQA soft targets: ``min(count / 3, 1)`` per answer (``count / n`` when ``n < 3``).

    Shapes: ``n`` answers -> ``(K,)`` with ``K = len(answer_names)``.
    """
    counts = Counter(answers)
    denominator = min(3, len(answers))
    return [min(counts.get(name, 0) / denominator, 1.0) for name in answer_names]


def vqa_accuracy(prediction: str, answers: Sequence[str]) -> float:
    """The official VQA accuracy of one prediction.

    ``mean over the n leave-one-out subsets of min(#matches among the other n - 1 / 3, 1)``
    (Antol et al., 2015; the VQA evaluation script); exact match when ``n = 1``.
    """
    if len(answers) == 1:
        return float(prediction == answers[0])
    matches = sum(a == prediction for a in answers)
    total = 0.0
    for answer in answers:
        total += min((matches - (answer == prediction)) / 3, 1.0)
    return total / len(answers)


class ImageTextFeaturizer:
    """Task rows -> a batch for VisualBERT/ViLBERT.

    Returns (``featurize``): ``input_ids``, ``attention_mask``, ``token_type_ids`` ``(B, L)``;
    ``visual_features`` ``(B, R, D)``, ``visual_boxes`` ``(B, R, 5)``, ``visual_mask``
    ``(B, R)``; ``labels (B,)`` (classification) or ``answer_scores (B, K)`` (vqa) when
    every row is labelled. With ``answer_slot`` a ``[MASK]`` is appended to the text
    (before the final ``[SEP]``) and ``answer_positions (B,)`` gives its index (the
    cloze answer head reads the hidden state there).
    """

    def __init__(
        self,
        tokenizer: TaskTokenizer,
        features: RegionFeatureSet,
        kind: str,
        label_names: Sequence[str],
        max_length: int = 32,
        answer_slot: bool = False,
    ) -> None:
        self.tokenizer = tokenizer
        self.answer_slot = answer_slot
        self.features = features
        self.kind = kind
        self.label_names = list(label_names)
        self.max_length = max_length

    def featurize(self, rows: Sequence[ImageTextExample]) -> dict[str, Tensor]:
        budget = self.max_length - 1 if self.answer_slot else self.max_length
        encoded = self.tokenizer.encode_batch([r.text for r in rows], max_length=budget)
        texts = [
            (list(t.input_ids), list(t.attention_mask), list(t.token_type_ids)) for t in encoded
        ]
        positions: list[int] = []
        if self.answer_slot:  # [CLS] question [MASK] [SEP]
            mask_id = self.tokenizer.vocab_info.mask_id
            for ids, att, types in texts:
                positions.append(len(ids) - 1)
                ids.insert(len(ids) - 1, mask_id)
                att.insert(len(att) - 1, 1)
                types.insert(len(types) - 1, types[-1])
        length = max(len(t[0]) for t in texts)
        pad = self.tokenizer.vocab_info.pad_id

        def padded(values: Sequence[int], fill: int) -> list[int]:
            return list(values) + [fill] * (length - len(values))

        visual = stack_regions([self.features[r.image_id] for r in rows], with_classes=False)
        batch = {
            "input_ids": torch.tensor([padded(t[0], pad) for t in texts]),
            "attention_mask": torch.tensor([padded(t[1], 0) for t in texts]),
            "token_type_ids": torch.tensor([padded(t[2], 0) for t in texts]),
            "visual_features": visual.features,
            "visual_boxes": encode_boxes(
                visual.boxes, visual.image_sizes[:, None, 0], visual.image_sizes[:, None, 1]
            ),
            "visual_mask": visual.mask,
        }
        if self.answer_slot:
            batch["answer_positions"] = torch.tensor(positions)
        if self.kind == "classification" and all(r.label is not None for r in rows):
            batch["labels"] = torch.tensor([r.label for r in rows])
        elif self.kind == "vqa" and all(r.answers is not None for r in rows):
            batch["answer_scores"] = torch.tensor(
                [answer_scores(r.answers or [], self.label_names) for r in rows]
            )
        return batch
