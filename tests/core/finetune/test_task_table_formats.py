"""Task data in the formats users have: a CSV, a JSON Lines file, a JSON array, a Parquet file
and a `datasets` folder each give the same training batches (and the same fine-tuned head)
as the TSV they were written from; bad rows get one line naming file, line or row, and key."""

from __future__ import annotations

import csv
from pathlib import Path

import datasets
import pytest
import torch
from safetensors.torch import load_file
from task_tables import rows_of, write_as

from ptm_core.data.errors import DataError
from ptm_core.encoders.presets import bert_encoder
from ptm_core.finetune.data.glue import read_glue
from ptm_core.finetune.data.swag import read_swag
from ptm_core.finetune.data.task_batches import TaskBatches
from ptm_core.finetune.recipe import finetune
from ptm_core.finetune.task_data import read_task
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig

SPECS = Path(__file__).resolve().parents[3] / "data_specs"
TSV = SPECS / "glue_classification/train.tsv"
DEV = SPECS / "glue_classification/dev.tsv"
FORMATS = ("csv", "jsonl", "json", "parquet", "datasets")


def _task(train: Path) -> TaskSpec:
    return TaskSpec(
        name="pairs", kind="classification", train=str(train), dev=str(DEV), max_length=48
    )


def _tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(SPECS / "text_corpus/sample-vocab.txt")


def _batches(train: Path) -> list[dict[str, torch.Tensor]]:
    data = read_task(_task(train), "train", _tokenizer())
    return list(TaskBatches(data.rows, data.featurizer, 8, seed=3).iter_batches(0))


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_gives_the_tsv_batches(tmp_path: Path, fmt: str) -> None:
    source = write_as(rows_of(TSV), tmp_path, fmt)
    expected, got = _batches(TSV), _batches(source)
    assert len(got) == len(expected) > 3
    for a, b in zip(expected, got, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            assert torch.equal(a[key], b[key]), (fmt, key)
    assert read_glue(source).label_names == read_glue(TSV).label_names


def test_json_values_that_are_not_strings_still_read(tmp_path: Path) -> None:
    rows = [{"id": i, "sentence": f"row {i}", "label": i % 2} for i in range(4)]
    for fmt in ("parquet", "datasets", "jsonl"):
        examples = read_glue(write_as(rows, tmp_path / fmt, fmt))
        assert examples.label_names == ["0", "1"] and [e.id for e in examples] == [
            "0",
            "1",
            "2",
            "3",
        ]


@pytest.mark.parametrize("fmt", ("csv", "parquet", "datasets"))
def test_fine_tuning_from_the_format_trains_the_same_head(tmp_path: Path, fmt: str) -> None:
    def head(train: Path, out: Path) -> dict[str, torch.Tensor]:
        tokenizer = _tokenizer()
        torch.manual_seed(0)
        encoder = bert_encoder(
            vocab_size=tokenizer.vocab_size, hidden_size=16, num_layers=1, num_heads=2
        )
        trainer = TrainerConfig(
            output_dir=str(out), max_steps=2, progress=False, device="cpu", seed=1
        )
        result = finetune(
            _task(train), encoder=encoder, tokenizer=tokenizer, trainer=trainer, seed=1
        )
        return load_file(str(result.encoder_dir / "task_head.safetensors"))

    source = write_as(rows_of(TSV), tmp_path / "data", fmt)
    expected, got = head(TSV, tmp_path / "tsv"), head(source, tmp_path / fmt)
    for name in expected:
        assert torch.equal(expected[name], got[name]), name


def test_swag_columns_in_parquet_read_as_the_csv(tmp_path: Path) -> None:
    source = SPECS / "multiple_choice/dev.csv"
    with source.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    parquet = write_as(rows, tmp_path, "parquet")
    assert list(read_swag(parquet)) == [
        type(e)(**{**e.__dict__, "line": i + 1}) for i, e in enumerate(read_swag(source))
    ]


def fails(match: str, call, *args, **kwargs) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(DataError, match=match) as info:
        call(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message.split("; ")[0]
    return message


def test_a_csv_is_read_as_csv_and_errors_quote_the_real_keys(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text('text,label\n"a, b",pos\nc,neg\n')
    assert [e.text for e in read_glue(path)] == ["a, b", "c"]  # not "header has ['text,label']"
    path.write_text("body,label\nx,pos\n")
    message = fails(
        r"t.csv:1: the header row has no text column \(it has \['body', 'label'\]\)",
        read_glue,
        path,
    )
    assert "task.text_fields=[body,label]" in message
    message = fails("has no column 'review'", read_glue, path, text_fields=["review"])
    assert "set task.text_fields" in message and "text_fields=" not in message.replace(
        "task.text_fields", ""
    )
    fails(
        r"has no label column 'stars'.*set task.label_field",
        read_glue,
        path,
        text_fields=["body"],
        label_field="stars",
    )


def test_bad_rows_name_file_line_or_row_and_key(tmp_path: Path) -> None:
    csv_path = tmp_path / "t.csv"
    csv_path.write_text('sentence,label\n"multi\nline",pos\nonly one field\n')
    fails(r"t.csv:4: 1 fields, but the header has 2 .*field 'columns'", read_glue, csv_path)
    csv_path.write_text('sentence,label\n"never closed,pos\n')
    fails(r"t.csv:2: .*field 'csv'", read_glue, csv_path)
    rows = [{"sentence": "fine", "score": 1.5}, {"sentence": None, "score": 2.0}]
    parquet = write_as(rows, tmp_path / "p", "parquet")
    fails(
        r"train.parquet row 2: expected a string, got NoneType \(field 'sentence'\)",
        read_glue,
        parquet,
        kind="regression",
        label_field="score",
    )
    rows = [{"sentence": "fine", "score": "1.5"}, {"sentence": "ok", "score": "high"}]
    folder = write_as(rows, tmp_path / "d", "datasets")
    fails(
        r"train_ds row 2: regression label 'high' is not a number \(field 'score'\)",
        read_glue,
        folder,
        kind="regression",
        label_field="score",
    )
    dev = write_as([{"sentence": "a", "label": "maybe"}], tmp_path / "j", "json")
    fails(
        r"train.json row 1: label 'maybe' is not one of the 2 train labels",
        read_glue,
        dev,
        label_names=["neg", "pos"],
    )


def test_a_dataset_dict_folder_names_its_splits(tmp_path: Path) -> None:
    splits = datasets.DatasetDict(
        {"train": datasets.Dataset.from_list([{"sentence": "a", "label": "x"}])}
    )
    splits.save_to_disk(str(tmp_path / "dd"))
    fails(
        r"dd: a DatasetDict folder \(splits \['train'\]\), not one split .*dd/train",
        read_glue,
        tmp_path / "dd",
    )
