"""Task heads and TaskModel: shapes, losses, gradients, save/load, and training under the Trainer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from ptm_core.checkpoints import CheckpointError
from ptm_core.encoders.presets import albert_encoder, bert_encoder, electra_encoder, xlnet_encoder
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.finetune.model import (
    TASK_KINDS,
    TaskModel,
    TaskOutput,
    build_task_model,
    load_task_model,
    save_task_model,
    task_loss,
)
from ptm_core.heads.tasks import (
    MultipleChoiceHead,
    QuestionAnsweringHead,
    SequenceClassificationHead,
    TokenClassificationHead,
    summary_token,
)
from ptm_core.training import Trainer, TrainerConfig

VOCAB = 40
NUM_LABELS = {"classification": 3, "regression": 1, "tagging": 4, "qa": 2, "multiple_choice": 4}


def tiny_bert(seed: int = 0) -> TransformerEncoder:
    torch.manual_seed(seed)
    return bert_encoder(
        vocab_size=VOCAB, hidden_size=16, num_layers=2, num_heads=2, max_positions=32
    )


def make_batch(kind: str, seed: int = 0, labels: bool = True) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    shape = (2, 4, 8) if kind == "multiple_choice" else (3, 8)
    ids = torch.randint(5, VOCAB, shape, generator=gen)
    mask = torch.ones_like(ids)
    mask[..., -1, 5:] = 0
    batch = {
        "input_ids": ids * mask,
        "attention_mask": mask,
        "token_type_ids": torch.zeros_like(ids),
    }
    if not labels:
        return batch
    if kind == "classification":
        batch["labels"] = torch.tensor([0, 2, 1])
    elif kind == "regression":
        batch["labels"] = torch.tensor([0.5, -1.0, 2.0])
    elif kind == "tagging":
        tags = torch.randint(0, 4, (3, 8), generator=gen)
        tags[:, 0] = -100
        tags[-1, 5:] = -100
        batch["labels"] = tags
    elif kind == "qa":
        batch["start_positions"] = torch.tensor([1, 0, 3])
        batch["end_positions"] = torch.tensor([2, 0, 4])
    else:
        batch["labels"] = torch.tensor([3, 0])
    return batch


# ---------------------------------------------------------------- heads


def test_head_shapes() -> None:
    hidden = torch.randn(6, 5, 16)
    assert SequenceClassificationHead(16, 3)(hidden).shape == (6, 3)
    assert TokenClassificationHead(16, 4)(hidden).shape == (6, 5, 4)
    assert QuestionAnsweringHead(16)(hidden).shape == (6, 5, 2)
    assert MultipleChoiceHead(16)(hidden, num_choices=3).shape == (2, 3)


def test_pooling_reads_the_first_or_the_last_real_token() -> None:
    hidden = torch.randn(2, 5, 16)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    assert torch.equal(summary_token(hidden, "first", mask)[:, 0], hidden[:, 0])
    last = summary_token(hidden, "last", mask)[:, 0]
    assert torch.equal(last[0], hidden[0, 2]) and torch.equal(last[1], hidden[1, 4])
    assert torch.equal(summary_token(hidden, "last")[:, 0], hidden[:, -1])
    head = SequenceClassificationHead(16, 2, dropout=0.0, pool="last").eval()
    changed = hidden.clone()
    changed[0, 3:] = 100.0  # padding after the last real token must not matter
    assert torch.equal(head(hidden, mask), head(changed, mask))
    with pytest.raises(ValueError, match="valid: first, last"):
        SequenceClassificationHead(16, 2, pool="mean")  # type: ignore[arg-type]


# ---------------------------------------------------------------- losses


def test_classification_loss_is_cross_entropy_and_ignores_minus_100() -> None:
    logits = torch.randn(4, 3)
    labels = torch.tensor([0, 2, -100, 1])
    loss, metrics = task_loss("classification", logits, {"labels": labels})
    assert loss is not None
    keep = labels != -100
    assert torch.allclose(loss, F.cross_entropy(logits[keep], labels[keep]))
    expected = (logits[keep].argmax(-1) == labels[keep]).float().mean()
    assert torch.allclose(metrics["accuracy"], expected)


def test_tagging_loss_ignores_minus_100_tokens() -> None:
    logits = torch.randn(2, 5, 4)
    labels = torch.tensor([[-100, 1, 2, -100, 3], [-100, 0, -100, -100, -100]])
    loss, _ = task_loss("tagging", logits, {"labels": labels})
    keep = labels != -100
    assert loss is not None
    assert torch.allclose(loss, F.cross_entropy(logits[keep], labels[keep]))
    moved = logits.clone()
    moved[~keep] = torch.randn(int((~keep).sum()), 4) * 50  # ignored tokens change freely
    assert torch.equal(task_loss("tagging", moved, {"labels": labels})[0], loss)
    nothing, metrics = task_loss("tagging", logits, {"labels": torch.full((2, 5), -100)})
    assert nothing is not None and nothing.item() == 0.0 and metrics["accuracy"].item() == 0.0


def test_regression_uses_mse() -> None:
    logits = torch.tensor([[0.5], [2.0], [-1.0]])
    labels = torch.tensor([1.0, 2.0, 0.0])
    loss, metrics = task_loss("regression", logits, {"labels": labels})
    assert loss is not None and metrics == {}
    assert loss.item() == pytest.approx((0.25 + 0.0 + 1.0) / 3)


def test_qa_loss_ignores_positions_outside_the_window() -> None:
    logits = torch.randn(3, 6, 2)
    starts, ends = torch.tensor([1, 9, 2]), torch.tensor([2, 3, 40])
    loss, metrics = task_loss("qa", logits, {"start_positions": starts, "end_positions": ends})
    start = F.cross_entropy(logits[[0, 2], :, 0], starts[[0, 2]])  # row 1 start is out
    end = F.cross_entropy(logits[[0, 1], :, 1], ends[[0, 1]])  # row 2 end is out
    assert loss is not None and torch.allclose(loss, (start + end) / 2)
    assert set(metrics) == {"start_accuracy", "end_accuracy"}


def test_without_labels_there_is_no_loss() -> None:
    model = build_task_model(tiny_bert(), "qa", 2).eval()
    out = model(make_batch("qa", labels=False))
    assert out.loss is None and out.metrics == {}
    assert out.start_logits.shape == out.end_logits.shape == (3, 8)
    with pytest.raises(ValueError, match="qa models only"):
        _ = TaskOutput(loss=None, logits=torch.zeros(3, 2)).start_logits


@pytest.mark.parametrize("kind", TASK_KINDS)
def test_gradient_reaches_the_encoder(kind: str) -> None:
    model = build_task_model(tiny_bert(), kind, NUM_LABELS[kind])
    out = model(make_batch(kind))
    assert out.loss is not None and torch.isfinite(out.loss)
    out.loss.backward()
    grads = [p.grad for p in model.encoder.layers[0].parameters()]
    assert all(g is not None for g in grads)
    assert sum(float(g.abs().sum()) for g in grads if g is not None) > 0
    word = model.encoder.embeddings.word.weight.grad
    assert word is not None and word.abs().sum() > 0
    assert all(v.dim() == 0 for v in out.metrics.values())


def test_bad_kind_and_labels_are_refused() -> None:
    with pytest.raises(ValueError, match="valid: classification, regression, tagging"):
        build_task_model(tiny_bert(), "ner", 3)
    with pytest.raises(ValueError, match="num_labels=1"):
        build_task_model(tiny_bert(), "regression", 2)
    with pytest.raises(ValueError, match="2 names but num_labels=3"):
        build_task_model(tiny_bert(), "classification", 3, label_names=["a", "b"])


@pytest.mark.parametrize(
    ("name", "encoder_fn", "pool"),
    [
        ("albert", lambda: albert_encoder(VOCAB, 8, 16, 2, 2, max_positions=32), "first"),
        ("electra", lambda: electra_encoder(VOCAB, 8, 16, 2, 2, max_positions=32), "first"),
        ("xlnet", lambda: xlnet_encoder(VOCAB, 16, 2, 2), "last"),
    ],
)
def test_other_encoder_builds_fine_tune(name: str, encoder_fn, pool: str) -> None:
    torch.manual_seed(0)
    for kind in ("classification", "tagging", "qa", "multiple_choice"):
        model = build_task_model(encoder_fn(), kind, NUM_LABELS[kind], pool=pool)
        out = model(make_batch(kind))
        assert out.loss is not None and torch.isfinite(out.loss), (name, kind)
        out.loss.backward()


# ---------------------------------------------------------------- save / load


@pytest.mark.parametrize("kind", TASK_KINDS)
def test_save_and_load_give_identical_logits(kind: str, tmp_path: Path) -> None:
    names = ["neg", "neu", "pos"] if kind == "classification" else None
    model = build_task_model(tiny_bert(), kind, NUM_LABELS[kind], 0.2, label_names=names)
    with torch.no_grad():
        for param in model.head.parameters():
            param.normal_()
    save_task_model(model, tmp_path / "final", task_config={"task": "toy", "max_length": 8})
    loaded, config = load_task_model(tmp_path / "final")
    assert config["task"] == "toy" and config["kind"] == kind
    assert config["dropout"] == (0.0 if kind == "qa" else 0.2)  # the qa head has no dropout
    assert loaded.label_names == names
    batch = make_batch(kind, labels=False)
    with torch.no_grad():
        assert torch.equal(loaded.eval()(batch).logits, model.eval()(batch).logits)
    assert sorted(p.name for p in (tmp_path / "final").iterdir()) == [
        ".ptm-output.json",
        "config.json",
        "model.safetensors",
        "task.json",
        "task_head.safetensors",
    ]


def test_damaged_or_mismatched_head_files_are_named(tmp_path: Path) -> None:
    model = build_task_model(tiny_bert(), "classification", 3)
    final = tmp_path / "final"
    save_task_model(model, final, task_config={})
    head = final / "task_head.safetensors"
    data = head.read_bytes()
    head.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"task_head\.safetensors: cannot read.*damaged"):
        load_task_model(final)
    head.write_bytes(data)
    record = json.loads((final / "task.json").read_text())
    (final / "task.json").write_text(json.dumps({**record, "num_labels": 5}))
    with pytest.raises(CheckpointError, match=r"task_head\.safetensors: does not fit.*\n.*5"):
        load_task_model(final)
    (final / "task.json").write_text(json.dumps({**record, "kind": "ner"}))
    with pytest.raises(CheckpointError, match=r"task\.json: kind 'ner' is not one of"):
        load_task_model(final)
    (final / "task.json").unlink()
    with pytest.raises(CheckpointError, match=r"task\.json: missing"):
        load_task_model(final)


def test_task_config_may_not_contradict_the_model(tmp_path: Path) -> None:
    model = build_task_model(tiny_bert(), "classification", 3)
    with pytest.raises(ValueError, match="task_config\\['num_labels'\\]"):
        save_task_model(model, tmp_path / "x", task_config={"num_labels": 4})
    assert not (tmp_path / "x").exists()


# ---------------------------------------------------------------- training


class KeywordSource:
    """Label 1 when token 7 occurs in the sentence: a toy classification stream."""

    def __init__(self, batch_size: int = 8, num_batches: int = 4) -> None:
        gen = torch.Generator().manual_seed(5)
        count = batch_size * num_batches
        self.ids = torch.randint(8, VOCAB, (count, 8), generator=gen)
        self.labels = torch.randint(0, 2, (count,), generator=gen)
        slots = torch.randint(1, 8, (count,), generator=gen)
        self.ids[self.labels == 1, slots[self.labels == 1]] = 7
        self.batch_size, self.num_batches = batch_size, num_batches

    @property
    def batches_per_epoch(self) -> int:
        return self.num_batches

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[dict[str, torch.Tensor]]:
        order = torch.randperm(len(self.ids), generator=torch.Generator().manual_seed(epoch))
        for index in range(start, self.num_batches):
            rows = order[index * self.batch_size : (index + 1) * self.batch_size]
            ids = self.ids[rows]
            yield {
                "input_ids": ids,
                "attention_mask": torch.ones_like(ids),
                "token_type_ids": torch.zeros_like(ids),
                "labels": self.labels[rows],
            }


def test_task_model_trains_under_the_core_trainer(tmp_path: Path) -> None:
    model: TaskModel = build_task_model(tiny_bert(), "classification", 2, dropout=0.0)
    config = TrainerConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=40,
        learning_rate=1e-2,
        warmup_steps=2,
        device="cpu",
        progress=False,
        log_every=8,
        save_every=40,
    )
    history = Trainer(model, KeywordSource(), config).fit().history
    first, last = history[0], history[-1]
    assert last["loss"] < 0.7 * first["loss"]
    assert "accuracy" in last and last["accuracy"] > first["accuracy"]
