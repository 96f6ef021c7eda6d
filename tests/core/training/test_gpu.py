"""The trainer on CUDA: bf16 autocast, exact resume, device placement, DDP over NCCL.

Every test here is marked ``gpu`` (``tests/conftest.py`` skips them without CUDA). The
data-parallel tests run their ranks in processes started by ``torch.multiprocessing``,
so no process group is ever left in the pytest process. Each rank takes its place from
the environment, as under ``torchrun`` (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``), so the
trainer joins the group through its own :func:`init_distributed`.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file
from torch.nn.parallel import DistributedDataParallel

from ptm_core import bert_encoder
from ptm_core.data import PretrainingBatches
from ptm_core.models import PretrainingModel
from ptm_core.objectives import MaskedLMObjective, ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import VocabInfo
from ptm_core.training import Trainer, TrainerConfig
from ptm_core.training.distributed import barrier, mean_across_ranks
from ptm_core.training.trainer import TIMING_KEYS, resolve_device

pytestmark = pytest.mark.gpu

VOCAB = VocabInfo(vocab_size=300, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


class Crash(Exception):
    """Stands in for a kill signal in the middle of a run."""


class CrashAfterLog:
    """Raises :class:`Crash` right after the log line of ``step``."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_log(self, step: int, record: dict[str, Any]) -> None:
        if step == self.step:
            raise Crash


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _without_timing(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in records]


@pytest.fixture
def deterministic(monkeypatch: pytest.MonkeyPatch):
    """Deterministic CUDA kernels where torch has them (bit-identical comparisons)."""
    # Read when cuBLAS makes its handle; harmless if one exists already (warn_only below).
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    before = torch.are_deterministic_algorithms_enabled()
    before_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    yield
    torch.use_deterministic_algorithms(before, warn_only=before_warn)


# ------------------------------------------------------------------ (a) bf16 on CUDA


def test_auto_precision_on_cuda_trains_in_bf16_with_fp32_weights(
    make_model, make_source, make_config
) -> None:
    seen: list[tuple[torch.dtype, str]] = []
    model = make_model(0)
    model.hidden.register_forward_hook(
        lambda module, args, out: seen.append((out.dtype, out.device.type))
    )
    config = make_config(
        precision="auto",
        device="auto",
        max_steps=20,
        learning_rate=3e-2,
        log_every=5,
        save_every=20,
    )
    trainer = Trainer(model, make_source(), config)
    assert trainer.device.type == "cuda"
    records = trainer.fit().history
    # precision="auto" means bf16 autocast on CUDA: the layer computes in bf16 there.
    assert seen and all(item == (torch.bfloat16, "cuda") for item in seen)
    # Master weights (and so the optimizer's update) stay fp32, on the GPU.
    for name, parameter in model.named_parameters():
        assert parameter.dtype == torch.float32, name
        assert parameter.device.type == "cuda", name
    for state in trainer.optimizer.state.values():
        for value in state.values():
            if torch.is_tensor(value) and value.is_floating_point() and value.dim() > 0:
                assert value.dtype == torch.float32
    losses = [r["loss"] for r in records]
    assert [r["step"] for r in records] == [5, 10, 15, 20]
    assert all(torch.isfinite(torch.tensor(loss)) for loss in losses)
    assert losses[-1] < losses[0], losses


def test_resume_on_cuda_is_bit_identical(
    make_model, make_source, make_config, deterministic
) -> None:
    # As the CPU test: 7 batches/epoch, 2 micro-batches per step, the step-10 checkpoint
    # mid-epoch; here with bf16 autocast, CUDA dropout and the CUDA RNG state.
    settings = {"device": "auto", "gradient_accumulation_steps": 2, "log_every": 3}
    straight_model = make_model(0)
    straight = Trainer(straight_model, make_source(), make_config("a", **settings)).fit()

    interrupted = make_config("b", **settings)
    with pytest.raises(Crash):
        Trainer(make_model(0), make_source(), interrupted, callbacks=[CrashAfterLog(12)]).fit()
    ckpts = Path(interrupted.output_dir) / "checkpoints"
    assert (ckpts / "latest").read_text().strip() == "step-00000010"

    # A different initialisation proves the weights come from the checkpoint.
    resumed_model = make_model(99)
    resumed = Trainer(resumed_model, make_source(), interrupted).fit()
    assert resumed.final_step == straight.final_step == 20
    straight_state = straight_model.state_dict()
    for name, tensor in resumed_model.state_dict().items():
        assert tensor.device.type == "cuda", name
        assert torch.equal(tensor, straight_state[name]), name
    assert _without_timing(_records(resumed.metrics_path)) == _without_timing(
        _records(straight.metrics_path)
    )


# ------------------------------------------------------------------ (c) device selection


def test_auto_device_is_cuda_when_there_is_a_gpu() -> None:
    assert torch.cuda.is_available()
    assert resolve_device("auto").type == "cuda"


@pytest.mark.parametrize("name", ["cuda:0", "cuda"])
def test_a_named_cuda_device_holds_the_model_and_the_batches(
    name, make_model, make_source, make_config
) -> None:
    inputs: list[torch.device] = []
    model = make_model(0)
    model.embed.register_forward_hook(lambda module, args, out: inputs.append(args[0].device))
    config = make_config(device=name, max_steps=2, warmup_steps=1, log_every=1, save_every=2)
    trainer = Trainer(model, make_source(), config)
    assert trainer.device.type == "cuda"
    result = trainer.fit()
    # "cuda" without an index is the current device (0 unless something changed it).
    index = 0 if name == "cuda:0" else torch.cuda.current_device()
    assert all(p.device == torch.device("cuda", index) for p in model.parameters())
    assert inputs and all(d == torch.device("cuda", index) for d in inputs)
    assert result.last_checkpoint is not None and result.last_checkpoint.name == "step-00000002"


def test_a_cuda_index_past_the_last_gpu_names_the_ones_there_are(
    make_model, make_source, make_config
) -> None:
    count = torch.cuda.device_count()
    with pytest.raises(ValueError, match=rf"has {count} CUDA device\(s\)"):
        Trainer(make_model(), make_source(), make_config(device=f"cuda:{count}"))


# ------------------------------------------------------------------ (b) DDP over NCCL


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _join_as_rank(rank: int, world_size: int, port: int) -> None:
    """The environment torchrun would give rank ``rank`` (the trainer reads it)."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
    )


def _tiny_mlm() -> tuple[torch.nn.Module, PretrainingModel, PretrainingBatches]:
    torch.manual_seed(0)  # the same initial weights on every rank, as DDP requires
    encoder = bert_encoder(vocab_size=300, hidden_size=32, num_layers=2, num_heads=2)
    mlm = build_objective(functools.partial(MaskedLMObjective, mode="dynamic"), encoder, VOCAB)
    model = PretrainingModel(encoder, ObjectiveMix({"mlm": mlm}))
    gen = torch.Generator().manual_seed(1)
    examples = []
    for _ in range(64):
        ids = torch.randint(5, 300, (20,), generator=gen).tolist()
        examples.append({"input_ids": [2, *ids, 3], "special_tokens_mask": [1] + [0] * 20 + [1]})
    data = PretrainingBatches(examples, 4, pad_id=0, transform=model.objectives.collate)
    return encoder, model, data


def _mlm_config(out: Path, device: str) -> TrainerConfig:
    return TrainerConfig(
        output_dir=str(out / "run"),
        max_steps=8,
        save_every=4,
        log_every=2,
        progress=False,
        device=device,
        learning_rate=1e-3,
    )


def _nccl_ranks_worker(rank: int, world_size: int, port: int, out: str) -> None:
    """One rank of the data-parallel run: the trainer joins NCCL from the environment."""
    _join_as_rank(rank, world_size, port)
    encoder, model, data = _tiny_mlm()
    trainer = Trainer(model, data, _mlm_config(Path(out), "auto"))
    assert dist.is_initialized() and dist.get_backend() == "nccl"
    assert trainer.device == torch.device("cuda", rank)  # LOCAL_RANK picks the GPU
    assert isinstance(trainer._forward, DistributedDataParallel)
    trainer.fit()
    assert next(encoder.parameters()).device == torch.device("cuda", rank)
    state = {k: v.detach().cpu().contiguous() for k, v in encoder.state_dict().items()}
    save_file(state, str(Path(out) / f"rank{rank}.safetensors"))
    dist.destroy_process_group()


def test_two_nccl_ranks_end_with_identical_weights(tmp_path: Path) -> None:
    if torch.cuda.device_count() < 2:
        pytest.skip("DDP over NCCL needs two GPUs (NCCL refuses two ranks on one GPU)")
    mp.spawn(_nccl_ranks_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    a = load_file(tmp_path / "rank0.safetensors")
    b = load_file(tmp_path / "rank1.safetensors")
    for name in a:
        assert torch.equal(a[name], b[name]), name
    # Rank 0 alone wrote the metrics (reduced across ranks) and the checkpoints.
    records = _records(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [2, 4, 6, 8]
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in records)
    assert (tmp_path / "run" / "checkpoints" / "step-00000008").is_dir()
    initial, _, _ = _tiny_mlm()
    moved = [n for n, t in initial.state_dict().items() if not torch.equal(t, a[n])]
    assert moved  # the ranks trained, they did not just agree on the start


def _one_rank_nccl_worker(rank: int, port: int, out: str) -> None:
    """A one-process NCCL group on GPU 0: the collectives and the DDP wrapping the trainer
    uses, then a training run inside the live group (its barriers go through NCCL)."""
    _join_as_rank(rank, 1, port)
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1)
    try:
        assert dist.get_backend() == "nccl"
        mean = mean_across_ranks(torch.tensor(3.0, device="cuda"))
        assert mean.device.type == "cuda" and float(mean) == 3.0
        barrier()

        _, model, data = _tiny_mlm()
        model = model.cuda().eval()  # eval: no dropout, so both copies compute the same
        plain = copy.deepcopy(model)
        wrapped = DistributedDataParallel(model, device_ids=[0])
        batch = {k: v.cuda() for k, v in data.batch(0, 0).items() if torch.is_tensor(v)}
        wrapped(batch).loss.backward()
        plain(batch).loss.backward()
        grads = dict(plain.named_parameters())
        for name, parameter in model.named_parameters():
            assert parameter.grad is not None, name
            torch.testing.assert_close(parameter.grad, grads[name].grad, msg=name)

        encoder, model, data = _tiny_mlm()
        result = Trainer(model, data, _mlm_config(Path(out), "cuda:0")).fit()
        assert result.final_step == 8
        assert next(encoder.parameters()).device == torch.device("cuda", 0)
    finally:
        dist.destroy_process_group()


def test_a_one_process_nccl_group_on_one_gpu(tmp_path: Path) -> None:
    mp.spawn(_one_rank_nccl_worker, args=(_free_port(), str(tmp_path)), nprocs=1, join=True)
    records = _records(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [2, 4, 6, 8]
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in records)
    assert (tmp_path / "run" / "checkpoints" / "step-00000008").is_dir()
