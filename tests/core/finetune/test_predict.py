"""`predict_file` (what `ptm predict` runs) on every core task kind, from tiny fine-tuned
folders made here: one record per input row, in order, with the prediction and its scores,
the input's columns kept; bad inputs and outputs get one line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch
from task_tables import rows_of, write_as

from ptm_core.atomic import OutputExistsError
from ptm_core.data.errors import DataError
from ptm_core.encoders.presets import bert_encoder
from ptm_core.finetune.predict import PredictorError, TaskPredictor
from ptm_core.finetune.predict_output import predict_file
from ptm_core.finetune.recipe import finetune, predict
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig

REPO = Path(__file__).resolve().parents[3]
SPECS = REPO / "data_specs"


def _finetune(out: Path, **task: object) -> Path:
    tokenizer = WordPieceTokenizer.from_vocab(SPECS / "text_corpus/sample-vocab.txt")
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        intermediate_size=64,
    )
    spec = TaskSpec(name=out.name, max_length=64, eval_batch_size=4, **task)  # type: ignore[arg-type]
    trainer = TrainerConfig(output_dir=str(out), max_steps=1, progress=False, device="cpu")
    return finetune(spec, encoder=encoder, tokenizer=tokenizer, trainer=trainer).encoder_dir


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    glue = SPECS / "glue_classification"
    scores = root / "scores.tsv"
    lines = (glue / "train.tsv").read_text(encoding="utf-8").splitlines()
    scores.write_text(
        "sentence1\tsentence2\tscore\n"
        + "".join(
            f"{c[1]}\t{c[2]}\t{i % 5}.5\n" for i, c in enumerate(x.split("\t") for x in lines[1:])
        ),
        encoding="utf-8",
    )
    return {
        "classification": _finetune(
            root / "pair",
            kind="classification",
            train=str(glue / "train.tsv"),
            dev=str(glue / "dev.tsv"),
        ),
        "regression": _finetune(
            root / "sts", kind="regression", train=str(scores), dev=str(scores), label_field="score"
        ),
        "tagging": _finetune(
            root / "ner",
            kind="tagging",
            train=str(SPECS / "conll_tagging/train.txt"),
            dev=str(SPECS / "conll_tagging/dev.txt"),
        ),
        "qa": _finetune(
            root / "qa",
            kind="qa",
            train=str(SPECS / "squad_qa/train-v1.1.json"),
            dev=str(SPECS / "squad_qa/dev-v1.1.json"),
            doc_stride=16,
        ),
        "multiple_choice": _finetune(
            root / "swag",
            kind="multiple_choice",
            train=str(SPECS / "multiple_choice/train.csv"),
            dev=str(SPECS / "multiple_choice/dev.csv"),
        ),
    }


def _jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_classification_keeps_columns_and_agrees_with_the_recipe(
    models: dict[str, Path], tmp_path: Path
) -> None:
    source = SPECS / "glue_classification/dev.tsv"
    stats = predict_file(models["classification"], source, tmp_path / "out.jsonl", batch_size=3)
    records = _jsonl(tmp_path / "out.jsonl")
    rows = source.read_text(encoding="utf-8").splitlines()[1:]
    assert stats.examples == len(records) == len(rows) and stats.kind == "classification"
    assert [r["index"] for r in records] == [row.split("\t")[0] for row in rows]  # input order
    assert all(
        set(r) >= {"sentence1", "sentence2", "label", "prediction", "score", "scores"}
        for r in records
    )
    first = records[0]
    assert first["score"] == max(first["scores"].values())  # type: ignore[union-attr]
    assert sum(first["scores"].values()) == pytest.approx(1, abs=1e-4)  # type: ignore[union-attr]
    _, expected = predict(models["classification"], source)  # the unbatched recipe path
    assert [r["prediction"] for r in records] == expected


def test_regression_and_csv_output(models: dict[str, Path], tmp_path: Path) -> None:
    source = tmp_path / "rows.csv"
    source.write_text('id,sentence1,sentence2\n7,"A cat, sat.",A cat sat.\n8,Paris,Lyon\n')
    stats = predict_file(models["regression"], source, tmp_path / "out.csv")
    with (tmp_path / "out.csv").open(newline="", encoding="utf-8") as handle:
        table = list(csv.DictReader(handle))
    assert stats.examples == 2 and [r["id"] for r in table] == ["7", "8"]
    assert table[0]["sentence1"] == "A cat, sat." and float(table[0]["prediction"]) == float(
        table[0]["prediction"]
    )


def test_tagging_from_conll_and_from_a_table(models: dict[str, Path], tmp_path: Path) -> None:
    stats = predict_file(models["tagging"], SPECS / "conll_tagging/dev.txt", tmp_path / "a.jsonl")
    records = _jsonl(tmp_path / "a.jsonl")
    assert stats.examples == len(records) > 1
    for record in records:
        words, tags, scores = record["words"], record["prediction"], record["scores"]
        assert isinstance(words, list) and isinstance(tags, list) and isinstance(scores, list)
        assert len(words) == len(tags) and len(scores) <= len(words)
        assert all(0 <= s <= 1 for s in scores)
    assert records[0]["words"][:3] == ["For", "many", "years"]  # type: ignore[index]
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "s1", "tokens": ["Marie", "Curie", "lived"]}) + "\n")
    predict_file(models["tagging"], rows, tmp_path / "b.jsonl")
    (record,) = _jsonl(tmp_path / "b.jsonl")
    assert record["id"] == "s1" and len(record["prediction"]) == 3  # type: ignore[arg-type]


def test_qa_from_squad_and_from_rows(models: dict[str, Path], tmp_path: Path) -> None:
    squad = SPECS / "squad_qa/dev-v1.1.json"
    predict_file(models["qa"], squad, tmp_path / "a.jsonl")
    records = _jsonl(tmp_path / "a.jsonl")
    document = json.loads(squad.read_text(encoding="utf-8"))
    ids = [q["id"] for a in document["data"] for p in a["paragraphs"] for q in p["qas"]]
    assert [r["id"] for r in records] == ids
    _, expected = predict(models["qa"], squad)
    assert {r["id"]: r["prediction"] for r in records} == expected
    context = "Marie Curie was born in Warsaw in 1867."
    rows = tmp_path / "rows.csv"
    rows.write_text(f'id,question,context\nq1,Where was she born?,"{context}"\n')
    predict_file(models["qa"], rows, tmp_path / "b.jsonl")
    (record,) = _jsonl(tmp_path / "b.jsonl")
    answer = record["prediction"]
    assert record["id"] == "q1" and isinstance(answer, str)
    if answer:
        assert context[record["start"] : record["end"]] == answer  # type: ignore[misc]
        assert 0 < record["score"] <= 1  # type: ignore[operator]


def test_multiple_choice(models: dict[str, Path], tmp_path: Path) -> None:
    source = SPECS / "multiple_choice/dev.csv"
    stats = predict_file(models["multiple_choice"], source, tmp_path / "out.jsonl", batch_size=2)
    records = _jsonl(tmp_path / "out.jsonl")
    assert stats.examples == len(records)
    for record in records:
        scores = record["scores"]
        assert isinstance(scores, list) and len(scores) == 4
        assert scores[record["prediction"]] == max(scores) == record["score"]  # type: ignore[index]
    _, expected = predict(models["multiple_choice"], source)
    assert [r["prediction"] for r in records] == expected


def test_the_output_is_refused_or_replaced_as_asked(
    models: dict[str, Path], tmp_path: Path
) -> None:
    source = SPECS / "glue_classification/dev.tsv"
    out = tmp_path / "out.jsonl"
    out.write_text("keep me\n")
    with pytest.raises(OutputExistsError, match="already exists; pass --overwrite"):
        predict_file(models["classification"], source, out)
    assert out.read_text() == "keep me\n"
    predict_file(models["classification"], source, out, overwrite=True)
    assert out.read_text() != "keep me\n"
    with pytest.raises(OutputExistsError, match="is the input file"):
        predict_file(models["classification"], source, source, overwrite=True)


def test_a_bad_row_names_file_line_and_key_and_leaves_no_output(
    models: dict[str, Path], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_text("sentence1\tsentence2\nA\tB\nonly one column\n")
    out = tmp_path / "out.jsonl"
    with pytest.raises(DataError, match=r"bad.tsv:3: 1 tab-separated columns.*field 'columns'"):
        predict_file(models["classification"], bad, out)
    assert not out.exists() and not list(tmp_path.glob(".out.jsonl*"))
    nocol = tmp_path / "nocol.csv"
    nocol.write_text("body,label\nA,x\n")
    with pytest.raises(DataError, match=r"no text column.*task.text_fields"):
        predict_file(models["classification"], nocol, out)


def test_folders_without_a_predictor_say_so_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(PredictorError, match=r"has no task\.json"):
        TaskPredictor(tmp_path)
    (tmp_path / "task.json").write_text(json.dumps({"kind": "x"}))
    (tmp_path / "cogqa.json").write_text("{}")
    with pytest.raises(PredictorError, match=r"no predictor for CogQA"):
        predict_file(tmp_path, SPECS / "glue_classification/dev.tsv", tmp_path / "o.jsonl")
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "json", "parquet", "datasets"])
def test_every_input_format_predicts_as_the_tsv(
    models: dict[str, Path], tmp_path: Path, fmt: str
) -> None:
    source = SPECS / "glue_classification/dev.tsv"
    converted = write_as(rows_of(source), tmp_path / "in", fmt)
    predict_file(models["classification"], source, tmp_path / "tsv.jsonl")
    predict_file(models["classification"], converted, tmp_path / "other.jsonl")
    assert _jsonl(tmp_path / "other.jsonl") == _jsonl(tmp_path / "tsv.jsonl")


def test_bad_tagging_and_qa_rows_name_row_and_key(models: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    rows = write_as([{"tokens": ["a", "b"]}, {"tokens": None}], tmp_path / "t", "parquet")
    with pytest.raises(DataError, match=r"train.parquet row 2: expected a list of words.*'tokens'"):
        predict_file(models["tagging"], rows, out)
    nocol = tmp_path / "n.jsonl"
    nocol.write_text('{"body": "x"}\n')
    with pytest.raises(DataError, match=r"n.jsonl:1: the first object has no tokens, words, text"):
        predict_file(models["tagging"], nocol, out)
    qa = tmp_path / "q.csv"
    qa.write_text("id,question,context\nq1,Who?,\n")
    with pytest.raises(DataError, match=r"q.csv:2: expected a non-empty string.*'context'"):
        predict_file(models["qa"], qa, out)
    assert not out.exists()


def test_a_device_that_is_not_here_is_one_line(models: dict[str, Path], tmp_path: Path) -> None:
    if torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    with pytest.raises(PredictorError, match=r"--device cuda:7: no such CUDA device here"):
        predict_file(
            models["classification"],
            SPECS / "glue_classification/dev.tsv",
            tmp_path / "o.jsonl",
            device="cuda:7",
        )
