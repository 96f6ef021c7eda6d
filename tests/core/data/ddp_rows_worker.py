"""Run under torchrun by test_ddp_rows.py: which rows does each Gloo rank build and read?"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch.distributed as dist

from ptm_core.data.batches import PretrainingBatches
from ptm_core.data.layouts import SegmentRows, plan_single_segments
from ptm_core.data.token_store import InMemoryTokenStore
from ptm_core.tokenization import VocabInfo
from ptm_core.training.distributed import ShardedBatches

VOCAB = VocabInfo(vocab_size=300, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


class RecordedRows(SegmentRows):
    """Rows that carry their index and remember which ones this process built."""

    built: list[int]

    def _build(self, index: int) -> dict[str, Any]:
        self.built.append(index)
        return {**super()._build(index), "row": index}


def main(out: Path) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    store = InMemoryTokenStore([[list(range(5, 5 + 7 + i % 23))] for i in range(61)])
    rows = RecordedRows(store, plan_single_segments(store, 16), VOCAB)
    rows.built = []
    report: dict[str, Any] = {"rows": len(rows)}
    for workers in (0, 1):
        source = PretrainingBatches(rows, 4, pad_id=0, seed=3, num_workers=workers)
        mine = ShardedBatches(source, rank, world)
        read = [int(r) for batch in mine.iter_batches(0) for r in batch["row"]]
        report[f"read_workers{workers}"] = read
        report["batches_per_epoch"] = source.batches_per_epoch
        if workers == 0:
            report["built"] = sorted(rows.built)
    (out / f"rank{rank}.json").write_text(json.dumps(report))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
