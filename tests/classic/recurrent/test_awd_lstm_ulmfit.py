"""ULMFiT on the AWD-LSTM: concat pooling, layer groups, discriminative rates, gradual
unfreezing, and the fine-tuning run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from ptm_classic.recurrent.awd_lstm import AWDLSTMConfig, AWDLSTMEncoder, AWDLSTMLanguageModel
from ptm_classic.recurrent.ulmfit import (
    ConcatPoolingHead,
    ULMFiTClassifier,
    finetune_ulmfit,
    load_ulmfit_classifier,
)
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_core.training.finetuning import (
    GradualUnfreezing,
    LayerGroups,
    discriminative_param_groups,
)
from ptm_core.training.optim import build_optimizer

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _classifier(num_labels: int = 3) -> ULMFiTClassifier:
    config = AWDLSTMConfig(vocab_size=40, embedding_size=8, hidden_size=16, num_layers=3)
    return ULMFiTClassifier(AWDLSTMEncoder(config), num_labels)


def test_concat_pooling_reads_last_max_mean_of_real_tokens() -> None:
    hidden = torch.tensor([[[1.0], [5.0], [3.0], [100.0]], [[2.0], [-1.0], [-7.0], [9.0]]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    pooled = ConcatPoolingHead.pool(hidden, mask)  # (B, 3D): last, max, mean
    assert pooled.tolist() == [[3.0, 5.0, 3.0], [9.0, 9.0, 0.75]]


def test_classifier_has_the_ulmfit_layer_groups() -> None:
    model = _classifier()
    assert isinstance(model, LayerGroups)
    depths = {name: model.parameter_depth(name) for name, _ in model.named_parameters()}
    assert model.depth_top() == 4
    assert depths["encoder.embeddings.weight"] == 0
    assert {depths[f"encoder.layers.{i}.lstm.weight_hh_l0"] for i in range(3)} == {1, 2, 3}
    assert {d for n, d in depths.items() if n.startswith("head.")} == {4}
    batch = {
        "input_ids": torch.randint(0, 40, (4, 7)),
        "attention_mask": torch.ones(4, 7, dtype=torch.long),
        "labels": torch.tensor([0, 1, 2, 1]),
    }
    out = model(batch)
    assert out.logits.shape == (4, 3) and out.loss is not None and out.loss.ndim == 0


def test_discriminative_rates_divide_by_2_6_per_layer_group() -> None:
    model = _classifier()
    groups = discriminative_param_groups(
        model, learning_rate=0.01, weight_decay=0.0, layer_decay="ulmfit"
    )
    rate = {g["depth"]: g["lr"] for g in groups}
    assert sorted(rate) == [0, 1, 2, 3, 4]
    for depth in range(5):  # eta^{l-1} = eta^l / 2.6 (Howard & Ruder, 2018, section 3.2)
        assert rate[depth] == pytest.approx(0.01 / 2.6 ** (4 - depth))
    by_param = {id(p): g["depth"] for g in groups for p in g["params"]}
    assert by_param[id(model.encoder.embeddings.weight)] == 0
    assert by_param[id(model.encoder.layers[2].lstm.weight_hh_l0)] == 3
    # The trainer's optimizer takes the same groups from its config switch.
    config = TrainerConfig(
        output_dir="unused", max_steps=10, learning_rate=0.01, layer_lr_decay=1 / 2.6
    )
    optimizer = build_optimizer(model, config)
    assert {g["depth"]: g["lr"] for g in optimizer.param_groups} == pytest.approx(rate)


def test_gradual_unfreezing_unfreezes_the_last_layer_group_first() -> None:
    model = _classifier()
    unfreeze = GradualUnfreezing(model, every_steps=2)

    def group(name: str) -> str:
        return "head" if name.startswith("head.") else ".".join(name.split(".")[:3])

    def trainable(step: int) -> set[str]:
        unfreeze.apply(step)
        return {group(n) for n, p in model.named_parameters() if p.requires_grad}

    assert trainable(0) == {"head"}  # only the head
    assert trainable(2) - trainable(0) == {"encoder.layers.2"}  # then the last LSTM
    assert trainable(4) - trainable(2) == {"encoder.layers.1"}
    assert trainable(6) - trainable(4) == {"encoder.layers.0"}
    assert trainable(8) - trainable(6) == {"encoder.embeddings.weight"}  # the embeddings last
    assert unfreeze.fully_unfrozen_at == 8


def test_finetune_ulmfit_trains_saves_and_reloads(tmp_path: Path) -> None:
    tokenizer = WordPieceTokenizer.from_vocab(
        ROOT / "data_specs/text_corpus/sample-vocab.txt", lowercase=True
    )
    config = AWDLSTMConfig(
        vocab_size=tokenizer.vocab_size, embedding_size=16, hidden_size=24, num_layers=2
    )
    lm_dir = AWDLSTMLanguageModel(config).save_pretrained(
        tmp_path / "lm", extra_writers=[tokenizer.save]
    )
    task = TaskSpec.from_mapping(
        {
            "name": "gain_sentiment",
            "kind": "classification",
            "format": "glue",
            "train": str(ROOT / "data_specs/gain_tasks/sentiment_train.tsv"),
            "dev": str(ROOT / "data_specs/gain_tasks/sentiment_dev.tsv"),
            "label_field": "label",
            "max_length": 32,
            "batch_size": 16,
            "metric": "accuracy",
        }
    )
    trainer = TrainerConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=10,
        learning_rate=1e-2,
        schedule="slanted_triangular",
        layer_lr_decay=1 / 2.6,
        unfreeze_every=2,
        log_every=5,
        save_every=10,
        progress=False,
        device="cpu",
    )
    result = finetune_ulmfit(task, model_dir=lm_dir, trainer=trainer)
    assert "dev/accuracy" in result.final_metrics
    final = result.encoder_dir
    record = json.loads((final / "task.json").read_text())
    assert record["ulmfit"] is True and record["label_names"] == ["0", "1"]
    model = load_ulmfit_classifier(final)
    ids = torch.tensor([tokenizer.encode("the soup was good .").input_ids])
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    # The pre-trained LSTM weights moved (all groups were unfrozen by step 6 of 10).
    lm = AWDLSTMLanguageModel.from_pretrained(lm_dir)
    assert not torch.equal(
        model.encoder.layers[0].lstm.weight_ih_l0, lm.encoder.layers[0].lstm.weight_ih_l0
    )
    assert model(batch).logits.shape == (1, 2)
