"""`ptm compress`: runs on a tiny final/, prints one summary line, fails clearly."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from flows.cli import main
from ptm_core.compress import load_compressed
from ptm_core.encoders.presets import bert_encoder
from ptm_core.finetune.model import build_task_model, load_task_model, save_task_model
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.tokenization import WordPieceTokenizer

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def final(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tokenizer = WordPieceTokenizer.from_vocab(REPO / "data_specs/text_corpus/sample-vocab.txt")
    torch.manual_seed(0)
    encoder = bert_encoder(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
    )
    model = build_task_model(encoder, "classification", 2, label_names=["0", "1"])
    task = TaskSpec(
        name="sentiment",
        kind="classification",
        train=str(REPO / "data_specs/glue_classification/single_train.tsv"),
        dev=str(REPO / "data_specs/glue_classification/single_dev.tsv"),
        max_length=32,
    )
    directory = tmp_path_factory.mktemp("cli") / "final"
    save_task_model(
        model, directory, task_config={"task": task.to_dict()}, extra_writers=[tokenizer.save]
    )
    return directory


def test_int8_and_drop_layers(final: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["compress", str(final), "--method", "int8", "--output", str(tmp_path / "q")]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("compress int8: ") and "MiB ->" in line
    assert "10 linear layers to dynamic int8" in line
    assert load_compressed(tmp_path / "q").model.kind == "classification"
    argv = ["compress", str(final), "--method", "drop-layers", "--keep", "top:1"]
    assert main([*argv, "--output", str(tmp_path / "d")]) == 0
    assert "kept layers [1] of 2" in capsys.readouterr().out
    model, _ = load_task_model(tmp_path / "d")
    assert model.encoder.config.num_layers == 1


def test_prune_heads_on_the_dev_set(
    final: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    argv = ["compress", str(final), "--method", "prune-heads", "--fraction", "0.25"]
    assert main([*argv, "--output", str(tmp_path / "p")]) == 0
    assert "pruned 2/8 heads" in capsys.readouterr().out
    # Layers of different widths have no Hugging Face BERT layout: export refuses by name.
    assert main(["export", "--format", "hf", str(tmp_path / "p"), str(tmp_path / "hf")]) != 0
    assert "heads_per_layer=" in capsys.readouterr().err
    assert not (tmp_path / "hf").exists()


def test_predict_reads_compressed_finals(final: Path, tmp_path: Path) -> None:
    """`predict` / `ptm evaluate` load int8 and pruned outputs like any fine-tuned final/."""
    from ptm_core.finetune.recipe import predict

    reference, _ = predict(final)
    for method in ("int8", "prune-heads"):
        out = tmp_path / method
        assert main(["compress", str(final), "--method", method, "--output", str(out)]) == 0
        metrics, _ = predict(out)
        assert set(metrics) == set(reference)
        assert 0.0 <= metrics["accuracy"] <= 1.0


def test_broken_final_and_bad_arguments(
    final: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("config.json", "task.json", "task_head.safetensors", "vocab.txt"):
        (broken / name).write_bytes((final / name).read_bytes())
    (broken / "model.safetensors").write_bytes(b"\x00" * 16)
    out = str(tmp_path / "out")
    assert main(["compress", str(broken), "--method", "int8", "--output", out]) == 1
    error = capsys.readouterr().err
    assert "model.safetensors" in error and "damaged or truncated" in error
    assert not Path(out).exists()
    assert main(["compress", str(tmp_path / "nope"), "--method", "int8", "--output", out]) == 1
    assert "no such directory" in capsys.readouterr().err
    argv = ["compress", str(final), "--method", "int8", "--keep", "bottom:1", "--output", out]
    assert main(argv) == 1
    assert "--keep belongs to --method drop-layers" in capsys.readouterr().err
    assert main(["compress", str(final), "--method", "drop-layers", "--output", out]) == 1
    assert "needs --keep" in capsys.readouterr().err
    argv = ["compress", str(final), "--method", "drop-layers", "--keep", "5", "--output", out]
    assert main(argv) == 1
    assert "out of range" in capsys.readouterr().err
    assert main(["compress", str(final), "--method", "int8", "--output", str(final)]) == 1
    assert "the source final/ itself" in capsys.readouterr().err
