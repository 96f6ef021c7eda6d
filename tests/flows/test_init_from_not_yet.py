"""Pre-training families that cannot start from a checkpoint yet (XLM from XLM-R) refuse
``init_from`` in one line before any data is prepared, instead of silently training from
random init."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.config import compose_config
from flows.runner import run_composed


@pytest.mark.parametrize(
    ("experiment", "says"),
    [
        ("xlm_tlm_tiny", "XLM pre-training does not start from a checkpoint yet"),
    ],
)
def test_init_from_is_refused_in_one_line(experiment: str, says: str, tmp_path: Path) -> None:
    folder = tmp_path / "xlm-roberta"
    folder.mkdir()
    run = tmp_path / "run"
    cfg = compose_config(
        [f"experiment={experiment}", f"init_from={folder}", f"trainer.output_dir={run}"]
    )
    with pytest.raises(ValueError) as exc:
        run_composed(cfg)
    message = str(exc.value)
    assert "\n" not in message and message.startswith(f"init_from={folder}: {says}")
    assert not (run / "final").exists()
