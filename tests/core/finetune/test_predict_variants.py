"""`ptm predict` on the fine-tuned folders that are not a plain TaskModel: an encoder-decoder
with a classification head (BART), T5's text-to-text classifier, and TagLM's feature-based
BiLSTM-CRF tagger; and the CLI's one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from flows.cli import main
from ptm_core.encoders import build_encoder_decoder
from ptm_core.encoders.presets import bert_encoder
from ptm_core.finetune.predict_output import predict_file
from ptm_core.finetune.recipe import finetune, predict
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig

SPECS = Path(__file__).resolve().parents[3] / "data_specs"
GLUE = SPECS / "glue_classification"


def _tokenizer() -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(SPECS / "text_corpus/sample-vocab.txt", lowercase=True)


def _trainer(out: Path) -> TrainerConfig:
    return TrainerConfig(output_dir=str(out), max_steps=1, progress=False, device="cpu")


def _seq2seq(tokenizer: WordPieceTokenizer) -> torch.nn.Module:
    torch.manual_seed(0)
    vocab = tokenizer.vocab_info
    return build_encoder_decoder(
        tokenizer.vocab_size,
        hidden_size=32,
        encoder_layers=1,
        decoder_layers=1,
        num_heads=2,
        intermediate_size=64,
        max_positions=64,
        dropout=0.0,
        pad_token_id=vocab.pad_id,
        bos_token_id=vocab.cls_id,
        eos_token_id=vocab.sep_id,
        decoder_start_token_id=vocab.cls_id,
    )


def _jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("text_to_text", [False, True])
def test_encoder_decoder_classifiers(tmp_path: Path, text_to_text: bool) -> None:
    tokenizer = _tokenizer()
    task = TaskSpec(
        name="pairs",
        kind="classification",
        train=str(GLUE / "single_train.tsv"),
        dev=str(GLUE / "single_dev.tsv"),
        max_length=48,
        eval_batch_size=8,
    )
    final = finetune(
        task,
        encoder=_seq2seq(tokenizer),  # type: ignore[arg-type]
        tokenizer=tokenizer,
        trainer=_trainer(tmp_path / "run"),
        text_to_text=text_to_text,
    ).encoder_dir
    stats = predict_file(final, GLUE / "single_dev.tsv", tmp_path / "out.jsonl", batch_size=5)
    records = _jsonl(tmp_path / "out.jsonl")
    _, expected = predict(final, GLUE / "single_dev.tsv")
    assert stats.examples == len(records) == len(expected)
    assert [r["prediction"] for r in records] == expected
    if text_to_text:
        assert all(r["score"] is None for r in records)
    else:
        assert all(0 < r["score"] <= 1 for r in records)  # type: ignore[operator]


def test_feature_based_tagger(tmp_path: Path) -> None:
    tokenizer = WordPieceTokenizer.from_vocab(SPECS / "text_corpus/sample-vocab.txt")
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_layers=1, num_heads=2
    )
    task = TaskSpec(
        name="ner",
        kind="tagging",
        train=str(SPECS / "conll_tagging/train.txt"),
        dev=str(SPECS / "conll_tagging/dev.txt"),
        max_length=64,
    )
    final = finetune(
        task,
        encoder=encoder,
        tokenizer=tokenizer,
        trainer=_trainer(tmp_path / "run"),
        feature_based=True,
        lstm_hidden=8,
    ).encoder_dir
    predict_file(final, SPECS / "conll_tagging/dev.txt", tmp_path / "out.jsonl")
    records = _jsonl(tmp_path / "out.jsonl")
    _, expected = predict(final, SPECS / "conll_tagging/dev.txt")
    assert [r["prediction"][: len(e)] for r, e in zip(records, expected, strict=True)] == expected  # type: ignore[index]


def test_cli_prints_throughput_and_refuses_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokenizer = WordPieceTokenizer.from_vocab(SPECS / "text_corpus/sample-vocab.txt")
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=tokenizer.vocab_size, hidden_size=16, num_layers=1, num_heads=2
    )
    task = TaskSpec(
        name="sst",
        kind="classification",
        train=str(GLUE / "single_train.tsv"),
        dev=str(GLUE / "single_dev.tsv"),
        max_length=32,
    )
    final = finetune(task, encoder=encoder, tokenizer=tokenizer, trainer=_trainer(tmp_path / "r"))
    out = tmp_path / "p.csv"
    assert (
        main(["predict", str(final.encoder_dir), str(GLUE / "single_dev.tsv"), "-o", str(out)]) == 0
    )
    printed = capsys.readouterr().out
    assert "examples/s" in printed and str(out) in printed
    assert out.read_text(encoding="utf-8").splitlines()[0].endswith("prediction,score,scores")
    assert (
        main(["predict", str(final.encoder_dir), str(GLUE / "single_dev.tsv"), "-o", str(out)]) == 1
    )
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "already exists; pass --overwrite" in error
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"sentence": "fine"}\n{"sentence": 3}\n')
    assert main(["predict", str(final.encoder_dir), str(bad), "-o", str(tmp_path / "q.jsonl")]) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("ptm: ") and "bad.jsonl:2: expected a string" in error
    assert "field 'sentence'" in error and "\n" not in error


@pytest.mark.parametrize("variant", ["encoder", "seq2seq", "text_to_text", "feature_based"])
def test_bf16_linear_weights_change_no_prediction(
    tmp_path: Path, variant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `ptm predict --bf16` stores the linear weights in bf16 once instead of letting
    # autocast cast them at every call: the records must be the same, to the last bit.
    import ptm_core.fast

    tokenizer = _tokenizer()
    torch.manual_seed(0)
    tagging = variant == "feature_based"
    data = SPECS / "conll_tagging" if tagging else GLUE
    task = TaskSpec(
        name=variant,
        kind="tagging" if tagging else "classification",
        train=str(data / ("train.txt" if tagging else "single_train.tsv")),
        dev=str(data / ("dev.txt" if tagging else "single_dev.tsv")),
        max_length=48,
    )
    encoder = (
        _seq2seq(tokenizer)
        if variant in ("seq2seq", "text_to_text")
        else bert_encoder(
            vocab_size=tokenizer.vocab_size, hidden_size=32, num_layers=1, num_heads=2
        )
    )
    final = finetune(
        task,
        encoder=encoder,  # type: ignore[arg-type]
        tokenizer=tokenizer,
        trainer=_trainer(tmp_path / "run"),
        text_to_text=variant == "text_to_text",
        feature_based=tagging,
        **({"lstm_hidden": 8} if tagging else {}),
    ).encoder_dir
    source = task.dev
    predict_file(final, source, tmp_path / "cast.jsonl", bf16=True)
    casts: list[int] = []
    real = ptm_core.fast.bf16_linear_weights
    monkeypatch.setattr(ptm_core.fast, "bf16_linear_weights", lambda m: casts.append(real(m)) or 0)
    predict_file(final, source, tmp_path / "counted.jsonl", bf16=True)
    monkeypatch.setattr(ptm_core.fast, "bf16_linear_weights", lambda m: 0)
    predict_file(final, source, tmp_path / "autocast.jsonl", bf16=True)
    assert casts and casts[0] > 0  # the predictor did cast its linear layers
    assert _jsonl(tmp_path / "cast.jsonl") == _jsonl(tmp_path / "autocast.jsonl")
