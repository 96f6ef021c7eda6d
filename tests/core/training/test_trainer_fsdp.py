"""FSDP2 on CPU: 2 Gloo processes, against DDP, sharded save + exact resume, final/ export.

One torchrun launch runs every distributed case (fsdp_worker.py); starting two processes
costs most of the ~35 s.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from torchrun_launch import run_torchrun

from ptm_core.training import CheckpointError, Trainer
from ptm_core.training.checkpointing import find_latest_checkpoint
from ptm_core.training.run_folder import RunMismatchError

WORKER = Path(__file__).with_name("fsdp_worker.py")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fsdp")
    run_torchrun(WORKER, str(out))
    return out


def _weights(runs: Path, name: str, rank: int) -> dict[str, torch.Tensor]:
    return load_file(runs / f"{name}-rank{rank}.safetensors")


@pytest.mark.integration
def test_fsdp_trains_like_ddp(runs: Path) -> None:
    losses = json.loads((runs / "losses.json").read_text())
    assert len(losses["fsdp"]) == 8
    # Same maths as DDP (fp32, the same dropout masks per rank); only how gradients are
    # averaged differs (reduce-scatter of shards vs all-reduce of buckets), which moves
    # the result by float rounding: ~1e-8 here after 8 AdamW steps. 1e-6 leaves margin
    # for that and still fails on any real difference (a wrong shard, a missing average).
    torch.testing.assert_close(losses["fsdp"], losses["ddp"], rtol=0, atol=1e-6)
    ddp = _weights(runs, "ddp", 0)
    for rank in (0, 1):
        fsdp = _weights(runs, "fsdp", rank)  # gathered back into each rank's own model
        assert fsdp.keys() == ddp.keys()
        for name, tensor in ddp.items():
            assert fsdp[name].dtype == torch.float32
            torch.testing.assert_close(fsdp[name], tensor, rtol=0, atol=1e-6, msg=name)
    initial_word = _initial_encoder().state_dict()["embeddings.word.weight"]
    assert not torch.equal(ddp["encoder.embeddings.word.weight"], initial_word)


def _initial_encoder():
    from ptm_core import bert_encoder

    torch.manual_seed(0)
    return bert_encoder(vocab_size=300, hidden_size=32, num_layers=2, num_heads=2)


@pytest.mark.integration
def test_sharded_resume_is_bit_identical(runs: Path) -> None:
    losses = json.loads((runs / "losses.json").read_text())
    assert losses["before-interruption"] == losses["fsdp"][:4]
    assert losses["resumed"] == losses["fsdp"][4:]
    for rank in (0, 1):
        resumed, straight = _weights(runs, "resumed", rank), _weights(runs, "fsdp", rank)
        for name, tensor in straight.items():
            assert torch.equal(resumed[name], tensor), name
    step4 = runs / "interrupted" / "checkpoints" / "step-00000004"
    assert sorted(p.name for p in step4.iterdir()) == [
        "config.json",
        "dcp",
        "rng-rank00000.pt",
        "rng-rank00001.pt",
        "scheduler.pt",
        "trainer_state.json",
    ]
    assert (step4 / "dcp" / ".metadata").is_file()
    checkpoints = runs / "fsdp" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == [
        "latest",
        "step-00000004",
        "step-00000008",
    ]  # keep_last=2 and no temp directory left behind
    assert find_latest_checkpoint(checkpoints) == checkpoints / "step-00000008"


@pytest.mark.integration
def test_ddp_resume_is_bit_identical(runs: Path) -> None:
    """Each DDP rank's RNG state is saved (rank 0 in rng.pt, rank 1 in rng-rank00001.pt):
    with rank 1 reseeded on resume instead, its dropout masks, hence the averaged
    gradients, would differ from the uninterrupted run's."""
    losses = json.loads((runs / "losses.json").read_text())
    assert losses["ddp-resumed"] == losses["ddp"][4:]
    for rank in (0, 1):
        resumed, straight = _weights(runs, "ddp-resumed", rank), _weights(runs, "ddp", rank)
        for name, tensor in straight.items():
            assert torch.equal(resumed[name], tensor), name
    step4 = runs / "ddp-interrupted" / "checkpoints" / "step-00000004"
    assert {"rng.pt", "rng-rank00001.pt"} <= {p.name for p in step4.iterdir()}
    assert json.loads((step4 / "trainer_state.json").read_text())["world_size"] == 2


@pytest.mark.integration
def test_final_dir_is_a_normal_checkpoint(runs: Path) -> None:
    from ptm_core.encoders import TransformerEncoder

    encoder = TransformerEncoder.from_pretrained(runs / "fsdp" / "final")
    trained = _weights(runs, "fsdp", 0)
    for name, tensor in encoder.state_dict().items():
        assert torch.equal(tensor, trained[f"encoder.{name}"]), name


@pytest.mark.integration
def test_a_sharded_checkpoint_is_refused_without_fsdp(
    runs: Path, make_source, make_config, make_model
) -> None:
    # Other settings than the sharded run's: the run folder's fingerprint refuses first,
    # naming trainer.fsdp among the differing keys ...
    config = make_config(output_dir=str(runs / "fsdp"), max_steps=8)
    with pytest.raises(RunMismatchError, match=r"trainer\.fsdp true -> false"):
        Trainer(make_model(0), make_source(), config).fit()
    # ... and a forced resume still never reads a sharded checkpoint into an unsharded model.
    forced = make_config(output_dir=str(runs / "fsdp"), max_steps=8, resume="force")
    with pytest.raises(CheckpointError, match=r"trainer\.fsdp=true"):
        Trainer(make_model(0), make_source(), forced).fit()


@pytest.mark.integration
def test_weights_only_loading_of_a_sharded_checkpoint_points_to_final(runs: Path) -> None:
    from ptm_core.training import load_checkpoint

    with pytest.raises(CheckpointError, match="final/"):
        load_checkpoint(runs / "fsdp", _initial_encoder())


@pytest.mark.integration
def test_bf16_fsdp_trains_with_fp32_master_weights(runs: Path) -> None:
    losses = json.loads((runs / "losses.json").read_text())["bf16"]
    assert len(losses) == 3 and all(abs(loss - 5.7) < 0.3 for loss in losses)  # ln(300) = 5.7
    weights = _weights(runs, "bf16", 0)
    assert all(tensor.dtype == torch.float32 for tensor in weights.values())
    assert not torch.equal(
        weights["encoder.embeddings.word.weight"],
        _initial_encoder().state_dict()["embeddings.word.weight"],
    )


def test_fsdp_in_one_process_is_refused(make_source, make_config, make_model) -> None:
    with pytest.raises(ValueError, match=r"torchrun --nproc-per-node=N"):
        Trainer(make_model(0), make_source(), make_config(fsdp=True))
