"""Issue 20: what a user meets when writes fail, crash or come from untrusted files.

Defects: 9 (a full disk gives torch's "unexpected pos 576 vs 534"; `device=cuda` without a
GPU), 11 (a `.final.*.tmp` left in the run directory is never removed), 12 (every
`*.safetensors` is written 0600 while the other files are 0644) and 14 (a refused pickle
passes on torch's advice to use weights_only=False and calls the file damaged).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import torch

from ptm_core import bert_encoder
from ptm_core.atomic import DiskFullError, atomic_directory, save_safetensors
from ptm_core.checkpoints import CheckpointError, read_weights
from ptm_core.training import Trainer, TrainerConfig
from ptm_core.training.checkpointing import save_checkpoint


def _plain_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _modes(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode)
        for p in root.rglob("*")
        if p.is_file()
    }


# ------------------------------------------------------------------ defect 12: permissions


def test_every_file_of_a_run_has_a_plain_files_mode(make_model, make_source, make_config) -> None:
    config = make_config(max_steps=2, save_every=1, warmup_steps=0)
    out = Trainer(make_model(), make_source(), config).fit().output_dir
    encoder = bert_encoder(vocab_size=30, hidden_size=8, num_layers=1, num_heads=2)
    encoder.save_pretrained(out / "final")
    save_safetensors({"w": torch.ones(3)}, out / "heads.safetensors")
    modes = _modes(out)
    assert any(name.endswith(".safetensors") for name in modes)
    assert {name: mode for name, mode in modes.items() if mode != _plain_mode()} == {}


# ------------------------------------------------------------------ defect 11: run-dir litter


def test_a_crashed_final_write_is_removed_by_the_next_run(
    make_model, make_source, make_config
) -> None:
    config = make_config(max_steps=2, save_every=1, warmup_steps=0)
    out = Path(config.output_dir)
    out.mkdir(parents=True)
    # What a kill during `save_pretrained(final)` and an atomic file write leave behind.
    litter = [out / ".final.k2j3h4.tmp", out / ".metrics.jsonl.x9y8.tmp"]
    litter[0].mkdir()
    (litter[0] / "model.safetensors").write_bytes(b"half")
    litter[1].write_text("{")
    keep = out / "notes.tmp"  # not one of ours: no leading dot
    keep.write_text("mine")
    Trainer(make_model(), make_source(), config).fit()
    assert [p for p in litter if p.exists()] == []
    assert keep.read_text() == "mine"


# ------------------------------------------------------------------ defect 9: a full disk


def test_a_full_disk_during_a_checkpoint_write_says_so(
    make_model, make_config, monkeypatch
) -> None:
    checkpoints = Path(make_config().output_dir) / "checkpoints"
    model = make_model()
    optimizer = torch.optim.AdamW(model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)

    def torch_save_on_a_full_disk(*args: object, **kwargs: object) -> None:
        raise RuntimeError("[enforce fail at inline_container.cc:671] . unexpected pos 576 vs 534")

    monkeypatch.setattr(torch, "save", torch_save_on_a_full_disk)
    monkeypatch.setattr(
        shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9 - 4096, 4096)
    )
    with pytest.raises(DiskFullError) as caught:
        save_checkpoint(
            checkpoints,
            step=3,
            model=model,
            optimizer=optimizer,
            scheduler=scheduler,
            trainer_state={},
        )
    message = str(caught.value)
    assert "no space left" in message and str(checkpoints / "step-00000003") in message
    assert "nothing was replaced" in message
    assert [p.name for p in checkpoints.iterdir()] == []  # no partial checkpoint


def test_a_failed_write_with_space_left_is_not_called_a_full_disk(tmp_path: Path) -> None:
    with pytest.raises(KeyError), atomic_directory(tmp_path / "out") as tmp:
        (tmp / "a").write_text("x")
        raise KeyError("a bug, not a disk")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def tiny_filesystem(tmp_path: Path):
    """A 1 MiB tmpfs: a real full disk (needs the right to mount, which CI's machine has)."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}); the mocked test runs")
    yield mount_point
    subprocess.run(["umount", str(mount_point)], check=False)


def test_a_really_full_disk_names_the_cause(tiny_filesystem: Path) -> None:
    target = tiny_filesystem / "final"
    (tiny_filesystem / "old.txt").write_text("kept")
    with (
        pytest.raises(DiskFullError, match="no space left on the device"),
        atomic_directory(target) as tmp,
    ):
        torch.save({"w": torch.zeros(1_000_000)}, tmp / "optimizer.pt")
    with pytest.raises(DiskFullError, match=str(tiny_filesystem / "w.safetensors")):
        save_safetensors({"w": torch.zeros(1_000_000)}, tiny_filesystem / "w.safetensors")
    assert sorted(p.name for p in tiny_filesystem.iterdir()) == ["old.txt"]


# ------------------------------------------------------------------ defect 9: no GPU


def test_device_cuda_without_a_gpu_is_one_clear_error(
    make_model, make_source, make_config, monkeypatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    config: TrainerConfig = make_config(device="cuda")
    with pytest.raises(ValueError) as caught:
        Trainer(make_model(), make_source(), config)
    message = str(caught.value)
    assert "trainer.device='cuda'" in message and "no CUDA device" in message
    assert "trainer.device=auto" in message and "\n" not in message


def test_a_cuda_index_past_the_last_gpu_is_refused(
    make_model, make_source, make_config, monkeypatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(ValueError, match=r"has 2 CUDA device\(s\) \(cuda:0\.\.cuda:1\)"):
        Trainer(make_model(), make_source(), make_config(device="cuda:5"))


# ------------------------------------------------------------------ defect 14: pickles


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # runs on unpickling: must never happen
        return (Path.touch, (self.marker,))


def test_a_pickle_with_code_is_refused_without_weights_only_false_advice(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "code-ran"
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    torch.save({"w": torch.ones(2), "x": _Payload(marker)}, checkpoint / "pytorch_model.bin")
    with pytest.raises(CheckpointError) as caught:
        read_weights(checkpoint)
    message = str(caught.value)
    assert str(checkpoint / "pytorch_model.bin") in message
    assert "will not unpickle" in message and "model.safetensors" in message
    assert "weights_only=False" not in message and "damaged" not in message
    assert not marker.exists()
    assert caught.value.__cause__ is None  # torch's advice is not chained either


def test_a_truncated_pickle_is_still_called_damaged(tmp_path: Path) -> None:
    encoder = bert_encoder(vocab_size=30, hidden_size=8, num_layers=1, num_heads=2)
    torch.save(encoder.state_dict(), tmp_path / "pytorch_model.bin")
    data = (tmp_path / "pytorch_model.bin").read_bytes()
    (tmp_path / "pytorch_model.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="damaged or truncated"):
        read_weights(tmp_path)
