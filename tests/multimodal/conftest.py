"""Shared fixtures for the multimodal tests: one synthetic dataset, one thread."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
import torch

from ptm_core.families import registry
from ptm_core.families.runner import PretrainRun, run_pretraining
from ptm_core.tokenization import WordPieceTokenizer
from ptm_core.training import TrainerConfig
from ptm_multimodal.pretraining import MultimodalPretrainResult
from ptm_multimodal.settings import ImageTextData, ImageTextSettings
from ptm_multimodal.synthetic import write_synthetic_dataset


@pytest.fixture
def one_thread() -> Iterator[None]:
    """Tiny models run fastest (and deterministically) on one thread of a shared CPU."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def synthetic_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A 400-image training set (seed 1) and a disjoint 100-image evaluation set (seed 2)."""
    root = tmp_path_factory.mktemp("image_text")
    return (
        write_synthetic_dataset(root / "train", 400, seed=1),
        write_synthetic_dataset(root / "eval", 100, seed=2),
    )


@pytest.fixture(scope="session")
def caption_tokenizer(synthetic_dirs: tuple[Path, Path]) -> WordPieceTokenizer:
    return WordPieceTokenizer.from_vocab(synthetic_dirs[0] / "vocab.txt")


def pretrain_pairs(
    family: str,
    model: Callable[..., torch.nn.Module],
    objectives: Mapping[str, Callable[..., object]],
    trainer: TrainerConfig,
    **data: object,
) -> MultimodalPretrainResult:
    """Pre-train ``family`` through its spec and the one runner (no config file), with the
    ``data`` block's fields given as keywords."""
    spec = registry.get(family)
    settings = ImageTextSettings(data=ImageTextData(**data))  # type: ignore[arg-type]
    run = PretrainRun(
        settings=settings, model=model, objectives=objectives, weights={}, trainer=trainer, seed=0
    )
    return run_pretraining(spec, run)  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def pretrain() -> Callable[..., MultimodalPretrainResult]:
    """:func:`pretrain_pairs`, for tests that pre-train a tiny model first."""
    return pretrain_pairs
