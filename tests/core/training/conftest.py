"""Toy model and data source for the trainer tests: tiny, CPU-only, dropout on, tied weights."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ptm_core.training import TrainerConfig

VOCAB = 16


@dataclass
class ToyOutput:
    loss: torch.Tensor
    metrics: dict[str, float | torch.Tensor]


class ToyModel(nn.Module):
    """Predicts ``(3 * token + 1) % VOCAB`` at every position; output tied to the embedding."""

    def __init__(self, dim: int = 16, dropout: float = 0.1) -> None:
        super().__init__()
        self.dim = dim
        self.embed = nn.Embedding(VOCAB, dim)
        self.norm = nn.LayerNorm(dim)
        self.dropout = nn.Dropout(dropout)
        self.hidden = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, VOCAB)
        self.out.weight = self.embed.weight  # tied: safetensors must handle the shared tensor

    def forward(self, batch: dict[str, torch.Tensor]) -> ToyOutput:
        ids, mask = batch["input_ids"], batch["attention_mask"].bool()
        h = self.dropout(self.norm(self.embed(ids)))
        logits = self.out(F.gelu(self.hidden(h)))  # (B, L, V)
        target = (3 * ids + 1) % VOCAB
        loss = F.cross_entropy(logits[mask], target[mask])
        accuracy = (logits[mask].argmax(-1) == target[mask]).float().mean()
        return ToyOutput(loss, {"accuracy": accuracy, "tokens": float(mask.sum())})

    def checkpoint_config(self) -> dict[str, Any]:
        return {"dim": self.dim, "vocab": VOCAB}


class ToySource:
    """28 sequences in batches of 4, reshuffled per epoch by a generator seeded from the epoch."""

    def __init__(
        self, seed: int = 0, num_examples: int = 28, batch_size: int = 4, min_length: int = 3
    ) -> None:
        gen = torch.Generator().manual_seed(1234)
        self.seed, self.batch_size = seed, batch_size
        self.input_ids = torch.randint(1, VOCAB, (num_examples, 6), generator=gen)
        lengths = torch.randint(min_length, 7, (num_examples,), generator=gen)
        self.attention_mask = (torch.arange(6) < lengths[:, None]).long()
        self.input_ids = self.input_ids * self.attention_mask
        self.calls: list[tuple[int, int]] = []

    @property
    def batches_per_epoch(self) -> int:
        return len(self.input_ids) // self.batch_size

    def iter_batches(self, epoch: int, start: int = 0) -> Iterator[dict[str, torch.Tensor]]:
        self.calls.append((epoch, start))
        gen = torch.Generator().manual_seed(self.seed * 100_003 + epoch)
        order = torch.randperm(len(self.input_ids), generator=gen)
        for index in range(start, self.batches_per_epoch):
            rows = order[index * self.batch_size : (index + 1) * self.batch_size]
            yield {"input_ids": self.input_ids[rows], "attention_mask": self.attention_mask[rows]}


@pytest.fixture
def make_model() -> Callable[..., ToyModel]:
    """``make_model(seed)`` builds a ToyModel whose initial weights depend only on ``seed``."""

    def build(seed: int = 0, **kwargs: Any) -> ToyModel:
        torch.manual_seed(seed)
        return ToyModel(**kwargs)

    return build


@pytest.fixture
def make_source() -> Callable[..., ToySource]:
    return ToySource


@pytest.fixture
def make_config(tmp_path: Path) -> Callable[..., TrainerConfig]:
    """``make_config(name, **overrides)``: a fast CPU config writing to ``tmp_path / name``."""

    def build(name: str = "run", **overrides: Any) -> TrainerConfig:
        settings: dict[str, Any] = {
            "output_dir": str(tmp_path / name),
            "max_steps": 20,
            "learning_rate": 1e-2,
            "warmup_steps": 3,
            "device": "cpu",
            "progress": False,
            "log_every": 5,
            "save_every": 10,
        }
        settings.update(overrides)
        return TrainerConfig(**settings)

    return build
