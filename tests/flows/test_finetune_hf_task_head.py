"""``ptm finetune model=<an ElectraForSequenceClassification folder>`` keeps the folder's
GELU head (rows reordered to the task's labels), and ``ptm export --format hf`` writes
ELECTRA's class again; a folder whose labels are not the task's gets a fresh head of the
same variant."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers
from hf_folders import SAMPLE_VOCAB, sample_wordpiece
from safetensors.torch import load_file

from flows.cli import main


def _vocabulary() -> list[str]:
    return SAMPLE_VOCAB.read_text(encoding="utf-8").splitlines()[:1200]


def _electra(directory: Path, id2label: dict[int, str] | None = None) -> Any:
    tokenizer = sample_wordpiece()
    config = transformers.ElectraConfig(
        vocab_size=len(tokenizer),
        embedding_size=16,
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=40,
        max_position_embeddings=64,
        **({"id2label": id2label} if id2label else {}),
    )
    torch.manual_seed(0)
    if id2label is None:  # a pre-trained discriminator, no task head
        model = transformers.ElectraForPreTraining(config)
    else:
        model = transformers.ElectraForSequenceClassification(config)
        with torch.no_grad():  # a head off its init, so a fresh one shows
            for parameter in model.classifier.parameters():
                parameter.add_(0.05 * torch.randn_like(parameter))
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return model


def _generated_task(directory: Path) -> list[str]:
    """A GLUE-style pair task from vocabulary words: does sentence 2 repeat sentence 1?"""
    words = [w for w in _vocabulary()[200:] if w.isalpha()][:60]
    rng = random.Random(0)
    directory.mkdir()
    for split, count in (("train", 24), ("dev", 8)):
        rows = ["index\tsentence1\tsentence2\tlabel"]
        for i in range(count):
            first = " ".join(rng.sample(words, 5))
            same = i % 2 == 0
            second = first if same else " ".join(rng.sample(words, 5))
            rows.append(f"{i}\t{first}\t{second}\t{'pos' if same else 'neg'}")
        (directory / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return [f"task.train={directory / 'train.tsv'}", f"task.dev={directory / 'dev.tsv'}"]


def _finetune(hf_dir: Path, task: list[str], run: Path) -> dict[str, Any]:
    code = main(
        [
            "finetune",
            "task=kg_pair",
            *task,
            f"model={hf_dir}",
            "trainer.max_steps=2",
            "trainer.learning_rate=1e-4",
            f"trainer.output_dir={run}",
        ]
    )
    assert code == 0
    return json.loads((run / "final" / "task.json").read_text())


def test_finetuning_an_electra_classifier_keeps_its_gelu_head(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hf_dir, run = tmp_path / "hf", tmp_path / "run"
    # The folder's order is not the task's (labels sort to neg, pos).
    hf = _electra(hf_dir, {0: "pos", 1: "neg"})
    record = _finetune(hf_dir, _generated_task(tmp_path / "task"), run)
    assert record["pooler_activation"] == "gelu" and record["pooler_input_dropout"] is True
    assert record["label_names"] == ["neg", "pos"]
    assert record["provenance"]["task_head"].startswith("task head kept from the folder")
    head = load_file(str(run / "final" / "task_head.safetensors"))
    before = hf.classifier.out_proj.weight.detach()
    # Two small steps move each weight by about the learning rate; rows follow the labels.
    assert (head["classifier.weight"] - before[[1, 0]]).abs().max().item() < 2e-3
    assert (head["classifier.weight"] - before).abs().max().item() > 1e-2
    dense = hf.classifier.dense.weight.detach()
    assert (head["pooler.dense.weight"] - dense).abs().max().item() < 2e-3

    capsys.readouterr()
    assert main(["export", "--format", "hf", str(run / "final"), str(tmp_path / "out")]) == 0
    assert "ElectraForSequenceClassification" in capsys.readouterr().out
    exported = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path / "out")
    assert type(exported) is transformers.ElectraForSequenceClassification
    assert exported.config.id2label == {0: "neg", 1: "pos"}


def test_a_folder_with_other_labels_gets_a_fresh_head_of_its_variant(tmp_path: Path) -> None:
    hf_dir, run = tmp_path / "hf", tmp_path / "run"
    _electra(hf_dir, {0: "yes", 1: "no"})
    record = _finetune(hf_dir, _generated_task(tmp_path / "task"), run)
    note = record["provenance"]["task_head"]
    assert note.startswith("task head initialised fresh") and "'yes'" in note
    assert record["pooler_activation"] == "gelu"


def test_a_fresh_head_on_an_electra_discriminator_is_electras_and_exports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hf_dir, run = tmp_path / "hf", tmp_path / "run"
    _electra(hf_dir)
    record = _finetune(hf_dir, _generated_task(tmp_path / "task"), run)
    assert "task_head" not in record["provenance"]
    assert record["pooler_activation"] == "gelu" and record["pooler_input_dropout"] is True
    capsys.readouterr()
    assert main(["export", "--format", "hf", str(run / "final"), str(tmp_path / "out")]) == 0
    assert "ElectraForSequenceClassification" in capsys.readouterr().out
