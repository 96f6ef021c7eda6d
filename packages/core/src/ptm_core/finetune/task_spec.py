"""What a downstream task is: its kind, its data files and format, and how it is scored."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TASK_FORMATS = ("glue", "conll", "squad", "swag")
# The format each kind reads, when a preset does not say.
DEFAULT_FORMAT = {
    "classification": "glue",
    "regression": "glue",
    "tagging": "conll",
    "qa": "squad",
    "multiple_choice": "swag",
}
# The metric that picks the better model (sweeps, retrain gating) when a preset does not say.
DEFAULT_METRIC = {
    "classification": "accuracy",
    "regression": "pearson",
    "tagging": "f1",
    "qa": "f1",
    "multiple_choice": "accuracy",
}


@dataclass
class TaskSpec:
    """One downstream task: ``configs/task/<name>.yaml`` holds these keys.

    Args:
        name: short name (run folders, reports).
        kind: ``classification``, ``regression``, ``tagging``, ``qa`` or
            ``multiple_choice``.
        train: the training file.
        dev: the evaluation file (scored after training, and by ``ptm evaluate``).
        format: ``glue`` (columns by name, in a TSV, CSV, JSONL, JSON, Parquet file or a
            ``datasets`` folder), ``conll`` (CoNLL-2003 columns), ``squad`` (SQuAD
            v1.1/v2.0 JSON) or ``swag`` (SWAG columns, CSV or any table format above);
            default from ``kind``.
        text_fields: GLUE columns holding the text (one, or two for a pair); ``None`` =
            the first known pair/single column set the file has.
        label_field: GLUE label column.
        max_length: longest input in word pieces, specials included.
        doc_stride: QA: word pieces shared by consecutive windows of a long context.
        batch_size: training rows per optimizer step.
        eval_batch_size: rows per evaluation batch.
        metric: the headline metric (``dev/<metric>``), default from ``kind``.
        n_best: QA: span candidates per window considered in post-processing.
        max_answer_length: QA: longest answer in word pieces.
        null_threshold: SQuAD v2.0: predict "no answer" when the null score beats the best
            span by more than this.
    """

    name: str
    kind: str
    train: str
    dev: str
    format: str | None = None
    text_fields: list[str] | None = None
    label_field: str = "label"
    max_length: int = 128
    doc_stride: int = 64
    batch_size: int = 16
    eval_batch_size: int = 64
    metric: str | None = None
    n_best: int = 20
    max_answer_length: int = 30
    null_threshold: float = 0.0

    def __post_init__(self) -> None:
        from ptm_core.finetune.model import check_kind

        check_kind(self.kind)
        if self.format is None:
            self.format = DEFAULT_FORMAT[self.kind]
        if self.format not in TASK_FORMATS:
            raise ValueError(
                f"task {self.name}: unknown format {self.format!r}; valid: "
                f"{', '.join(TASK_FORMATS)}"
            )
        if self.metric is None:
            self.metric = DEFAULT_METRIC[self.kind]
        for name in ("max_length", "batch_size", "eval_batch_size", "n_best"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"task {self.name}: {name} must be an integer >= 1, got {value!r}")
        if self.kind == "qa" and not 0 <= self.doc_stride < self.max_length:
            raise ValueError(
                f"task {self.name}: doc_stride must be in [0, max_length={self.max_length}), "
                f"got {self.doc_stride}"
            )
        if self.text_fields is not None:
            self.text_fields = [str(f) for f in self.text_fields]
        self.train, self.dev = str(self.train), str(self.dev)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any]) -> TaskSpec:
        """Build from a config mapping; an unknown key is an error listing the valid ones."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(mapping) - known)
        if unknown:
            raise ValueError(
                f"task: unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(sorted(known))}"
            )
        missing = [k for k in ("name", "kind", "train", "dev") if mapping.get(k) in (None, "")]
        if missing:
            raise ValueError(f"task: missing {', '.join(missing)} (see configs/task/*.yaml)")
        return cls(**dict(mapping))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready settings (what ``task.json`` records under ``"task"``)."""
        return dataclasses.asdict(self)

    def check_files(self) -> None:
        """Fail before any model is built when a data file is missing."""
        for split in ("train", "dev"):
            path = Path(getattr(self, split))
            if not path.is_file() and not (path.is_dir() and self.format in ("glue", "swag")):
                raise FileNotFoundError(
                    f"task {self.name}: {split} file {path} not found; set task.{split}=<file> "
                    "(a .tsv, .csv, .jsonl, .json, .parquet file or a datasets folder)"
                )
