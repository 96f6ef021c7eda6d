"""The tiny fine-tuned final/ the compression tests share."""

from __future__ import annotations

from pathlib import Path

import pytest
from compress_fixtures import write_task_final


@pytest.fixture(scope="module")
def task_final(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_task_final(tmp_path_factory.mktemp("compress") / "final")
