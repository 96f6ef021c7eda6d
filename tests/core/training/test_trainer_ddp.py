"""Data-parallel training on CPU: 2 processes, Gloo, identical weights on both ranks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from torchrun_launch import run_torchrun

from ptm_core.training.distributed import ShardedBatches

WORKER = Path(__file__).with_name("ddp_worker.py")


@pytest.mark.integration
def test_two_gloo_ranks_end_with_identical_weights(tmp_path: Path) -> None:
    run_torchrun(WORKER, str(tmp_path))
    a = load_file(tmp_path / "rank0.safetensors")
    b = load_file(tmp_path / "rank1.safetensors")
    for name in a:
        assert torch.equal(a[name], b[name]), name
    # Rank 0 alone wrote metrics and checkpoints; the weights moved.
    records = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [2, 4, 6, 8]
    assert (tmp_path / "run" / "checkpoints" / "step-00000008").is_dir()
    torch.manual_seed(0)
    from ptm_core import bert_encoder

    initial = bert_encoder(vocab_size=300, hidden_size=32, num_layers=2, num_heads=2)
    assert not torch.equal(
        initial.state_dict()["layers.0.ffn_norm.weight"], a["layers.0.ffn_norm.weight"]
    ) or not torch.equal(
        initial.state_dict()["embeddings.word.weight"], a["embeddings.word.weight"]
    )


class _Source:
    batches_per_epoch = 7

    def iter_batches(self, epoch: int, start: int = 0):
        for i in range(start, self.batches_per_epoch):
            yield {"index": torch.tensor(i), "epoch": torch.tensor(epoch)}


def test_sharded_batches_split_rounds_between_ranks() -> None:
    ranks = [ShardedBatches(_Source(), r, 3) for r in range(3)]
    assert ranks[0].batches_per_epoch == 2
    seen = [[int(b["index"]) for b in shard.iter_batches(0)] for shard in ranks]
    assert seen == [[0, 3], [1, 4], [2, 5]]
    assert [int(b["index"]) for b in ranks[1].iter_batches(0, start=1)] == [4]
    with pytest.raises(ValueError, match="cannot feed 8 processes"):
        ShardedBatches(_Source(), 0, 8)


class _IndexedSource(_Source):
    def __init__(self) -> None:
        self.built: list[int] = []

    def batch(self, epoch: int, index: int) -> dict[str, torch.Tensor]:
        self.built.append(index)
        return {"index": torch.tensor(index), "epoch": torch.tensor(epoch)}


def test_sharded_batches_build_only_their_own_batches_when_the_source_can() -> None:
    sources = [_IndexedSource() for _ in range(3)]
    ranks = [ShardedBatches(source, r, 3) for r, source in enumerate(sources)]
    seen = [[int(b["index"]) for b in shard.iter_batches(1)] for shard in ranks]
    assert seen == [[0, 3], [1, 4], [2, 5]]  # the same split as iterating everything
    assert [source.built for source in sources] == [[0, 3], [1, 4], [2, 5]]
    assert [int(b["index"]) for b in ranks[2].iter_batches(1, start=1)] == [5]


def test_pretraining_batches_by_index_equal_iteration() -> None:
    from ptm_core.data.batches import PretrainingBatches

    examples = [{"input_ids": [2, 5 + i, 3], "special_tokens_mask": [1, 0, 1]} for i in range(10)]
    source = PretrainingBatches(examples, batch_size=3, pad_id=0, seed=4)
    iterated = list(source.iter_batches(2))
    by_index = [source.batch(2, i) for i in range(source.batches_per_epoch)]
    for a, b in zip(iterated, by_index, strict=True):
        assert torch.equal(a["input_ids"], b["input_ids"])
