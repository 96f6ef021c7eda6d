"""Two DDP ranks on Gloo read disjoint rows that together cover the epoch (issue 14), and
each builds only its own: nothing of the other rank's share is read from the corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from torchrun_launch import run_torchrun

WORKER = Path(__file__).with_name("ddp_rows_worker.py")


@pytest.mark.integration
def test_two_gloo_ranks_read_disjoint_rows_covering_the_epoch(tmp_path: Path) -> None:
    run_torchrun(WORKER, str(tmp_path))
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    total = ranks[0]["rows"]
    kept_batches = ranks[0]["batches_per_epoch"] // 2 * 2  # the odd last batch is dropped
    for report in ranks:
        # Built in this process exactly what it read: no other rank's row was built.
        assert report["built"] == sorted(report["read_workers0"])
        # DataLoader workers read the same rows in the same order.
        assert report["read_workers1"] == report["read_workers0"]
    zero, one = set(ranks[0]["read_workers0"]), set(ranks[1]["read_workers0"])
    assert not zero & one
    covered = zero | one
    assert len(covered) == min(kept_batches * 4, total)
    assert covered <= set(range(total))
    # What is left out is at most the dropped last batch.
    assert total - len(covered) < 2 * 4
