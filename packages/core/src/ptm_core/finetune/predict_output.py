"""Writing predictions as they come: JSONL or CSV, atomically, and the whole file run.

:func:`predict_file` is ``ptm predict``: it checks the output path before any model is
loaded, streams the input through a :class:`~ptm_core.finetune.predict.TaskPredictor` and
writes each chunk's records as soon as they are scored, under a temporary name that
becomes the output only when every row is written (:func:`ptm_core.atomic.atomic_file`):
an interrupted run leaves no half file and the old one, if any, untouched.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ptm_core.atomic import OutputExistsError, atomic_file

OUTPUT_FORMATS = ("jsonl", "csv")


@dataclass
class PredictionStats:
    """What a :func:`predict_file` run did.

    Attributes:
        output: the file written.
        examples: rows predicted.
        seconds: wall time from the first row read to the file in place (model loading
            excluded).
        examples_per_second: ``examples / seconds``.
        kind: the task kind.
    """

    output: Path
    examples: int
    seconds: float
    examples_per_second: float
    kind: str


def output_format(output: str | Path, format: str | None = None) -> str:
    """``format``, or the output's suffix (``.csv`` is CSV, anything else JSONL)."""
    if format is not None:
        if format not in OUTPUT_FORMATS:
            raise ValueError(f"--format {format!r}; use one of {', '.join(OUTPUT_FORMATS)}")
        return format
    return "csv" if Path(output).suffix.lower() == ".csv" else "jsonl"


def default_output(input_path: str | Path, format: str | None = None) -> Path:
    """``<input stem>.predictions.<jsonl|csv>`` beside the input."""
    path = Path(input_path)
    suffix = format or "jsonl"
    return path.parent / f"{path.name if path.is_dir() else path.stem}.predictions.{suffix}"


def check_output_file(output: str | Path, input_path: str | Path, overwrite: bool) -> Path:
    """Refuse an output that is a folder, the input itself, or an existing file without
    ``overwrite`` (one line naming the path and the fix)."""
    output, source = Path(output), Path(input_path)
    if output.exists() and source.exists() and output.resolve() == source.resolve():
        raise OutputExistsError(f"{output}: is the input file; give another --output")
    if output.is_dir():
        raise OutputExistsError(f"{output}: is a folder; give a file name for --output")
    if output.exists() and not overwrite:
        raise OutputExistsError(
            f"{output}: already exists; pass --overwrite to replace it, or give another --output"
        )
    return output


class PredictionWriter:
    """Writes records to an open text file as JSON Lines or CSV.

    CSV columns are the first record's keys (every record of a file has the same ones);
    a list or mapping (``scores``, ``words``) is written as JSON in its cell.
    """

    def __init__(self, handle: IO[str], format: str) -> None:
        self.handle, self.format = handle, format
        self.csv: Any = None
        self.columns: list[str] = []

    def write(self, records: Iterable[dict[str, Any]]) -> int:
        """Write ``records``; returns how many."""
        count = 0
        for record in records:
            count += 1
            if self.format == "jsonl":
                self.handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
                continue
            if self.csv is None:
                self.columns = list(record)
                self.csv = csv.writer(self.handle, lineterminator="\n")
                self.csv.writerow(self.columns)
            self.csv.writerow([_cell(record.get(column)) for column in self.columns])
        return count


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, list | dict | tuple):
        return json.dumps(value, ensure_ascii=False, default=str)
    return value


def predict_file(
    model_dir: str | Path,
    input_path: str | Path,
    output: str | Path | None = None,
    *,
    format: str | None = None,
    batch_size: int | None = None,
    device: str = "cpu",
    bf16: bool = False,
    overwrite: bool = False,
    chunk_rows: int = 0,
    progress: Callable[[int, float], None] | None = None,
) -> PredictionStats:
    """Predict on every row of ``input_path`` and write one record per row to ``output``.

    Args:
        model_dir: a fine-tuned ``final/``.
        input_path: rows of the model's task (any format of
            :mod:`ptm_core.finetune.predict_inputs`).
        output: the file to write (default ``<input>.predictions.jsonl`` beside it).
        format: ``jsonl`` or ``csv`` (default from the output's suffix).
        batch_size: rows per forward pass (default the task's ``eval_batch_size``).
        device: where to run.
        bf16: bf16 autocast.
        overwrite: replace an existing output file.
        chunk_rows: rows read, sorted by length and scored at a time (default 16 batches).
        progress: called as ``progress(rows so far, seconds so far)`` after each chunk.

    Returns:
        :class:`PredictionStats`.

    Raises:
        OutputExistsError: the output exists (without ``overwrite``), is a folder or is
            the input.
        PredictorError: the folder is not a fine-tuned model, or its kind has none.
        DataError: a bad input row (file, line or row, column).
    """
    from ptm_core.finetune.predict import check_device, check_predictable
    from ptm_core.finetune.task_loaders import family_predictor

    if not Path(input_path).exists():
        raise FileNotFoundError(f"{input_path}: input file not found")
    fmt = output_format(output or "", format) if output is not None else (format or "jsonl")
    target = check_output_file(
        output if output is not None else default_output(input_path, fmt), input_path, overwrite
    )
    record = check_predictable(model_dir)
    check_device(device)
    hook = family_predictor(record)
    if hook is not None:  # an extension's model that reads more than text (ERNIE-THU)
        source = hook(Path(model_dir), Path(input_path), device=device, batch_size=batch_size)
        kind, chunks = str(source.kind), _chunks(source.records(), chunk_rows or 1024)
    else:
        kind, chunks = _task_chunks(model_dir, input_path, device, batch_size, bf16, chunk_rows)
    start = time.perf_counter()
    count = 0
    with atomic_file(target) as tmp, tmp.open("w", encoding="utf-8", newline="") as handle:
        writer = PredictionWriter(handle, fmt)
        for records in chunks:
            count += writer.write(records)
            if progress is not None:
                progress(count, time.perf_counter() - start)
        if count == 0:
            raise ValueError(f"{input_path}: no rows to predict on; give a file with rows")
    seconds = time.perf_counter() - start
    return PredictionStats(
        output=target,
        examples=count,
        seconds=seconds,
        examples_per_second=count / seconds if seconds > 0 else float("inf"),
        kind=kind,
    )


def _task_chunks(
    model_dir: str | Path,
    input_path: str | Path,
    device: str,
    batch_size: int | None,
    bf16: bool,
    chunk_rows: int,
) -> tuple[str, Iterator[list[dict[str, Any]]]]:
    """The task kind, and the records of ``input_path`` chunk by chunk (model loaded now)."""
    from ptm_core.finetune.predict import TaskPredictor

    predictor = TaskPredictor(model_dir, device=device, batch_size=batch_size, bf16=bf16)
    size = chunk_rows or predictor.batch_size * 16

    def chunks() -> Iterator[list[dict[str, Any]]]:
        buffer = []
        for row in predictor.rows(input_path):
            buffer.append(row)
            if len(buffer) >= size:
                yield predictor.predict(buffer)
                buffer = []
        if buffer:
            yield predictor.predict(buffer)

    return predictor.kind, chunks()


def _chunks(records: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    buffer: list[dict[str, Any]] = []
    for record in records:
        buffer.append(record)
        if len(buffer) >= size:
            yield buffer
            buffer = []
    if buffer:
        yield buffer


__all__ = [
    "OUTPUT_FORMATS",
    "PredictionStats",
    "PredictionWriter",
    "check_output_file",
    "default_output",
    "output_format",
    "predict_file",
]
