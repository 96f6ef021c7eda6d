"""Checkpoint directories: pruning, the latest pointer, crash leftovers, corruption errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from ptm_core.atomic import OUTPUT_MARKER
from ptm_core.training import CheckpointError, Trainer, find_latest_checkpoint, load_checkpoint
from ptm_core.training.checkpointing import save_checkpoint
from ptm_core.training.metrics import MetricsLog

# ptm's output marker (#31): a checkpoint is ptm's own, so a re-save may replace it.
FILES = {
    "model.safetensors",
    "config.json",
    "optimizer.pt",
    "rng.pt",
    "trainer_state.json",
    OUTPUT_MARKER,
}


@pytest.fixture
def trained(make_model, make_source, make_config) -> Path:
    """Output dir of a finished 4-step run with checkpoints at steps 2 and 4."""
    config = make_config("trained", max_steps=4, save_every=2, warmup_steps=0)
    return Trainer(make_model(), make_source(), config).fit().output_dir


def test_keep_last_prunes_and_latest_is_complete(make_model, make_source, make_config) -> None:
    config = make_config(max_steps=6, save_every=1, keep_last=2)
    out = Trainer(make_model(), make_source(), config).fit().output_dir
    ckpts = out / "checkpoints"
    assert sorted(p.name for p in ckpts.iterdir()) == ["latest", "step-00000005", "step-00000006"]
    latest = ckpts / (ckpts / "latest").read_text().strip()
    assert latest.name == "step-00000006"
    assert {p.name for p in latest.iterdir()} == FILES
    assert json.loads((latest / "trainer_state.json").read_text())["step"] == 6


def test_leftover_temp_dir_is_ignored_and_removed(
    trained, make_model, make_source, make_config
) -> None:
    ckpts = trained / "checkpoints"
    # A crash while writing step 6 leaves a temp dir that may already hold trainer_state.json.
    leftover = ckpts / ".step-00000006.abc123.tmp"
    shutil.copytree(ckpts / "step-00000004", leftover)
    (leftover / "trainer_state.json").write_text(json.dumps({"step": 6}))
    (leftover / "model.safetensors").write_bytes(b"garbage")
    # A directory copied by hand without its state file is not a checkpoint either.
    (ckpts / "step-00000009").mkdir()
    assert find_latest_checkpoint(ckpts) == ckpts / "step-00000004"

    config = make_config(
        "trained", max_steps=6, save_every=2, warmup_steps=0, resume="force"
    )  # extends the finished 4-step run: an explicit resume
    result = Trainer(make_model(), make_source(), config).fit()
    assert [r["step"] for r in result.history] == [5, 6]
    assert not leftover.exists()


def test_newer_complete_dir_beats_stale_pointer(trained) -> None:
    ckpts = trained / "checkpoints"
    shutil.copytree(ckpts / "step-00000004", ckpts / "step-00000002", dirs_exist_ok=True)
    # Crash between the rename of step 4 and the pointer update.
    (ckpts / "latest").write_text("step-00000002\n")
    assert find_latest_checkpoint(ckpts) == ckpts / "step-00000004"


def test_dangling_pointer_falls_back_to_scan(trained) -> None:
    ckpts = trained / "checkpoints"
    shutil.rmtree(ckpts / "step-00000004")  # the documented fix for a broken checkpoint
    assert find_latest_checkpoint(ckpts) == ckpts / "step-00000002"


def test_truncated_weights_give_a_clear_error(
    trained, make_model, make_source, make_config
) -> None:
    weights = trained / "checkpoints" / "step-00000004" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    config = make_config(
        "trained", max_steps=6, save_every=2, warmup_steps=0, resume="force"
    )  # extends the finished 4-step run: an explicit resume
    with pytest.raises(CheckpointError) as info:
        Trainer(make_model(), make_source(), config).fit()
    message = str(info.value)
    assert str(weights) in message
    assert "delete" in message and "resume=false" in message
    with pytest.raises(CheckpointError, match=r"model\.safetensors"):
        load_checkpoint(trained, make_model())


@pytest.mark.parametrize("name", ["optimizer.pt", "rng.pt", "trainer_state.json"])
def test_corrupted_state_files_give_a_clear_error(
    name, trained, make_model, make_source, make_config
) -> None:
    file = trained / "checkpoints" / "step-00000004" / name
    file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])  # torn write
    config = make_config(
        "trained", max_steps=6, save_every=2, warmup_steps=0, resume="force"
    )  # extends the finished 4-step run: an explicit resume
    with pytest.raises(CheckpointError, match=f"step-00000004/{name}.*resume=false"):
        Trainer(make_model(), make_source(), config).fit()


def test_pointer_to_incomplete_dir_names_the_missing_file(trained) -> None:
    ckpts = trained / "checkpoints"
    (ckpts / "step-00000004" / "trainer_state.json").unlink()
    with pytest.raises(CheckpointError, match=r"trainer_state\.json: file is missing"):
        find_latest_checkpoint(ckpts)


def test_load_checkpoint_weights_only(trained, make_model) -> None:
    model = make_model(seed=7)
    loaded = load_checkpoint(trained / "checkpoints" / "step-00000002", model)
    assert loaded.name == "model.safetensors"
    assert model.out.weight is model.embed.weight  # tying survives the load
    from_file = make_model(seed=8)
    load_checkpoint(loaded, from_file)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, from_file.state_dict()[name])
    with pytest.raises(CheckpointError, match="does not fit ToyModel"):
        load_checkpoint(trained, make_model(dim=8))
    with pytest.raises(CheckpointError, match="no checkpoint found"):
        load_checkpoint(trained / "nowhere", model)


def test_failed_save_leaves_no_partial_checkpoint(trained, make_model) -> None:
    class Exploding(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = make_model()

        def checkpoint_config(self) -> dict[str, int]:
            raise OSError("disk full")  # after model.safetensors is already written

    ckpts = trained / "checkpoints"
    model = Exploding()
    optimizer = torch.optim.AdamW(model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(
            ckpts, step=6, model=model, optimizer=optimizer, scheduler=scheduler, trainer_state={}
        )
    assert sorted(p.name for p in ckpts.iterdir()) == ["latest", "step-00000002", "step-00000004"]
    assert find_latest_checkpoint(ckpts) == ckpts / "step-00000004"


def test_metrics_log_drops_later_steps_and_torn_lines(tmp_path) -> None:
    log = MetricsLog(tmp_path / "metrics.jsonl")
    for step in (1, 2, 3):
        log.append({"step": step, "loss": 1.0})
    with open(log.path, "a") as handle:
        handle.write('{"step": 4, "lo')  # killed mid-write
    log.truncate_after(2)
    assert [r["step"] for r in log.read()] == [1, 2]
