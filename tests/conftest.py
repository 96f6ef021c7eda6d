"""Test-wide settings: offline, deterministic, CPU by default."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Raw corpora are prepared into a cache: one per test session, never the user's.
os.environ["PTM_CACHE_DIR"] = tempfile.mkdtemp(prefix="ptm-test-cache-")
# Under pytest-xdist (`make test` runs one worker per core) each worker gets its share of the
# cores, so the workers' torch thread pools do not oversubscribe the machine. Set before torch
# is imported; subprocesses (CLI tests) inherit it.
_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
if _workers > 1:
    _threads = str(max(1, (os.cpu_count() or 1) // _workers))
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_name, _threads)

import pytest  # noqa: E402  (after the environment settings above)
import torch  # noqa: E402


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device; run on a GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


# Objective contract tests in every package subclass tests/core/objectives/cases.py.
sys.path.insert(0, str(Path(__file__).parent / "core" / "objectives"))
# Family contract tests subclass tests/families/family_contract.py.
sys.path.insert(0, str(Path(__file__).parent / "families"))
