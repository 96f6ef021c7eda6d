"""The ULMFiT/ELECTRA switches inside the Trainer: rates per depth, STLR, gradual unfreezing,
and exact resume with all of them on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from ptm_core.encoders.presets import bert_encoder
from ptm_core.finetune.model import build_task_model
from ptm_core.training import Trainer, TrainerConfig
from ptm_core.training.checkpointing import load_checkpoint

VOCAB = 40


class Stop(Exception):
    pass


class StopAt:
    def __init__(self, step: int) -> None:
        self.step = step

    def on_save(self, step: int, path: Path) -> None:
        if step == self.step:
            raise Stop


class PairSource:
    """24 classification rows in batches of 4: label = first token is even."""

    def __init__(self) -> None:
        gen = torch.Generator().manual_seed(7)
        self.ids = torch.randint(5, VOCAB, (24, 8), generator=gen)
        self.labels = (self.ids[:, 1] % 2 == 0).long()

    @property
    def batches_per_epoch(self) -> int:
        return 6

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[dict[str, torch.Tensor]]:
        order = torch.randperm(24, generator=torch.Generator().manual_seed(epoch))
        for b in range(start, 6):
            rows = order[b * 4 : (b + 1) * 4]
            yield {
                "input_ids": self.ids[rows],
                "attention_mask": torch.ones(4, 8, dtype=torch.long),
                "labels": self.labels[rows],
            }


def make_model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    encoder = bert_encoder(
        vocab_size=VOCAB, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32
    )
    return build_task_model(encoder, "classification", 2)


def config(out: Path, **overrides: object) -> TrainerConfig:
    settings: dict[str, object] = {
        "output_dir": str(out),
        "max_steps": 10,
        "learning_rate": 1e-2,
        "log_every": 2,
        "save_every": 3,
        "progress": False,
        "device": "cpu",
    }
    settings.update(overrides)
    return TrainerConfig(**settings)  # type: ignore[arg-type]


def test_layer_lr_decay_gives_each_depth_its_rate(tmp_path: Path) -> None:
    trainer = Trainer(make_model(), PairSource(), config(tmp_path, layer_lr_decay=0.5))
    by_depth = {g["depth"]: g["initial_lr"] for g in trainer.optimizer.param_groups}
    top = max(by_depth)
    assert top == 3  # embeddings 0, layers 1-2, head 3
    for depth, rate in by_depth.items():
        assert rate == pytest.approx(1e-2 * 0.5 ** (top - depth))
    assert trainer.optimizer.param_groups[0]["initial_lr"] == pytest.approx(1e-2)


def test_slanted_triangular_schedule_is_ulmfit_eq3(tmp_path: Path) -> None:
    cfg = config(tmp_path, schedule="slanted_triangular", max_steps=20, stlr_ratio=32.0)
    trainer = Trainer(make_model(), PairSource(), cfg)
    rates = []
    for step in range(20):
        rates.append(trainer.optimizer.param_groups[0]["lr"])
        trainer.optimizer.step()
        trainer.scheduler.step()
        del step
    cut = 2  # floor(20 * 0.1)
    assert rates[0] == pytest.approx(1e-2 / 32)
    assert rates[cut] == pytest.approx(1e-2)
    ratio_at = 1 - (19 - cut) / (cut * (1 / 0.1 - 1))
    assert rates[19] == pytest.approx(1e-2 * (1 + ratio_at * 31) / 32)
    assert max(rates) == rates[cut]


def test_gradual_unfreezing_trains_the_head_first(tmp_path: Path) -> None:
    model = make_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    cfg = config(tmp_path, unfreeze_every=2, max_steps=2, save_every=2)
    Trainer(model, PairSource(), cfg).fit()
    after = model.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(not k.startswith("encoder.") for k in changed), sorted(changed)
    assert any(k.startswith("head.") for k in changed)


def test_all_switches_on_resume_bit_identical(tmp_path: Path) -> None:
    switches = {
        "schedule": "slanted_triangular",
        "layer_lr_decay": 0.8,
        "unfreeze_every": 2,
        "max_steps": 10,
    }
    straight = Trainer(make_model(), PairSource(), config(tmp_path / "a", **switches))
    straight.fit()
    with pytest.raises(Stop):  # killed after the step-3 checkpoint
        Trainer(
            make_model(), PairSource(), config(tmp_path / "b", **switches), callbacks=[StopAt(3)]
        ).fit()
    resumed_model = make_model(seed=5)  # weights must come from the checkpoint
    Trainer(resumed_model, PairSource(), config(tmp_path / "b", **switches)).fit()
    reference = make_model()
    load_checkpoint(tmp_path / "a", reference)
    for name, tensor in reference.state_dict().items():
        assert torch.equal(tensor, resumed_model.state_dict()[name]), name
    # Every depth trained by the end (4 depths, one more every 2 steps).
    assert not torch.equal(
        make_model().encoder.embeddings.word.weight, resumed_model.encoder.embeddings.word.weight
    )
