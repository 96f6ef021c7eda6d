"""`ptm pretrain experiment=cove_tiny` trains CoVe's translation model (its loss falls) and
`ptm finetune model=<its final/>` trains a classifier and a tagger on [GloVe; CoVe] with the
MT-LSTM frozen."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cove_data import pretrain_args, write_sentiment, write_tagging
from safetensors.torch import load_file

from flows.cli import main
from ptm_classic.cove.finetune import load_cove_task_model
from ptm_classic.cove.translation import load_cove


@pytest.fixture(scope="module")
def cove_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("cove")
    assert main(pretrain_args(tmp_path, steps=36)) == 0
    return tmp_path / "cove"


@pytest.mark.integration
def test_the_translation_loss_falls_and_final_loads(cove_run: Path) -> None:
    records = [json.loads(x) for x in (cove_run / "metrics.jsonl").read_text().splitlines()]
    losses = [r["translation/nll"] for r in records]
    assert len(losses) == 36
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.75 * first, (first, last)  # measured: 2.74 -> 1.69
    model = load_cove(cove_run / "final")
    assert model.record["ptm_model"] == "cove" and model.record["target_langs"] == ["de"]
    assert model.vocabulary[:4] == ["<pad>", "<unk>", "</s>", "<2de>"]
    assert model.encoder.hidden_size == 16 and model.glove.dim == 8


def _finetune(cove_run: Path, out: Path, task: str, train: Path, dev: Path, *extra: str) -> int:
    return main(
        [
            "finetune",
            f"model={cove_run / 'final'}",
            f"task={task}",
            f"task.train={train}",
            f"task.dev={dev}",
            "trainer.max_steps=12",
            "trainer.save_every=12",
            "trainer.progress=false",
            "trainer.learning_rate=0.01",
            "finetune.lstm_hidden=8",
            *extra,
            f"trainer.output_dir={out}",
        ]
    )


@pytest.mark.integration
def test_finetune_classifier_keeps_the_mt_lstm_frozen(cove_run: Path, tmp_path: Path) -> None:
    train, dev = write_sentiment(tmp_path / "task")
    assert _finetune(cove_run, tmp_path / "ft", "gain_sentiment", train, dev) == 0
    final = tmp_path / "ft" / "final"
    pretrained = load_file(str(cove_run / "final" / "model.safetensors"))
    tuned = load_file(str(final / "taglm.safetensors"))
    encoder = {k: v for k, v in pretrained.items() if k.startswith("encoder.")}
    assert encoder
    for key, value in encoder.items():  # encoder.layer0.weight_ih_l0 -> features.mtlstm....
        assert torch.equal(tuned["features.mtlstm." + key.removeprefix("encoder.")], value), key
    glove = load_cove(cove_run / "final").glove.embedding.weight
    assert torch.equal(tuned["features.static.embedding.weight"], glove)
    evaluated = json.loads((tmp_path / "ft" / "eval.json").read_text())
    assert 0.0 <= evaluated["dev/accuracy"] <= 1.0
    model = load_cove_task_model(final)
    assert model.kind == "classification" and model.features.dims == {"glove": 8, "cove": 32}
    assert json.loads((final / "config.json").read_text())["model_type"] == "cove_word_model"


@pytest.mark.integration
def test_finetune_tagger_on_both_layers(cove_run: Path, tmp_path: Path) -> None:
    train, dev = write_tagging(tmp_path / "task")
    code = _finetune(cove_run, tmp_path / "ft", "gain_ner", train, dev, "+cove.layers=both")
    assert code == 0
    model = load_cove_task_model(tmp_path / "ft" / "final")
    assert model.kind == "tagging" and model.features.dims == {"glove": 8, "cove": 64}
    assert "dev/f1" in json.loads((tmp_path / "ft" / "eval.json").read_text())


def test_finetune_refuses_peft(cove_run: Path, tmp_path: Path) -> None:
    train, dev = write_sentiment(tmp_path / "task")
    code = _finetune(cove_run, tmp_path / "ft", "gain_sentiment", train, dev, "finetune.peft=lora")
    assert code != 0
