"""Task rows written in the formats users have (shared by the table-format and predict tests)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq


def rows_of(path: Path) -> list[dict[str, object]]:
    """The rows of a GLUE-style TSV (no quoting), as dicts."""
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


def write_as(rows: list[dict[str, object]], folder: Path, fmt: str) -> Path:
    """``rows`` written in ``fmt`` (the way a user would: csv, pandas-like, datasets)."""
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        path = folder / "train.csv"
        with path.open("w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    elif fmt == "jsonl":
        path = folder / "train.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    elif fmt == "json":
        path = folder / "train.json"
        path.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    elif fmt == "parquet":
        path = folder / "train.parquet"
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        path = folder / "train_ds"
        datasets.Dataset.from_list(rows).save_to_disk(str(path))
    return path
