"""Shared checks of the families' parameter-efficient fine-tunes (finetune.peft and its
family keys): what trained, what final/ holds, and a crash/resume that stays bit-identical."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from ptm_core.peft.attach import is_adapter_tensor
from ptm_core.training.metrics import MetricsLog


def spy_on_attach(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> dict[str, Any]:
    """Wrap ``module.<name>`` (the attach a family's fine-tune calls): the dict gets the
    model and a copy of its state right after the adapter is attached."""
    attach = getattr(module, name)
    seen: dict[str, Any] = {}

    def spy(model: torch.nn.Module, config: Any) -> torch.nn.Module:
        attach(model, config)
        seen["model"] = model
        seen["before"] = {k: v.clone() for k, v in model.state_dict().items()}
        return model

    monkeypatch.setattr(module, name, spy)
    return seen


def assert_only_adapter_and_head_trained(
    before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]
) -> list[str]:
    """The base weights are bit-identical, the adapter and the head changed.

    Returns:
        The adapter's state names.
    """
    adapter = [k for k in after if is_adapter_tensor(k)]
    frozen = [k for k in after if not k.startswith("head.") and k not in adapter]
    assert adapter and frozen
    assert all(torch.equal(after[k], before[k]) for k in frozen)  # the base is untouched
    assert any(not torch.equal(after[k], before[k]) for k in adapter)
    assert any(not torch.equal(after[k], before[k]) for k in after if k.startswith("head."))
    return adapter


def assert_adapter_folder(final: Path, base: Path, method: str, *, smaller: int = 4) -> dict:
    """``final/`` holds the adapter and the head (no encoder weights), ``smaller`` times less
    than the base's weights, and points at ``base``.

    Returns:
        Its ``task.json``.
    """
    names = {p.name for p in final.iterdir()}
    assert {"adapter.safetensors", "task_head.safetensors", "task.json"} <= names
    assert "model.safetensors" not in names
    sizes = [sum(p.stat().st_size for p in d.glob("*.safetensors")) for d in (final, base)]
    assert sizes[0] * smaller < sizes[1], sizes
    record = json.loads((final / "task.json").read_text())
    assert record["peft"]["method"] == method
    assert record["peft"]["base"]["path"] == str(base.resolve())
    return record


def assert_same_state(loaded: torch.nn.Module, trained: dict[str, torch.Tensor]) -> None:
    """A reloaded model holds exactly the trained tensors (so it gives the same logits)."""
    reloaded = loaded.state_dict()
    assert reloaded.keys() == trained.keys()
    assert all(torch.equal(reloaded[k], trained[k].cpu()) for k in trained)


def assert_resume_is_bit_identical(
    monkeypatch: pytest.MonkeyPatch, model_class: type, run: Callable[[str], Any]
) -> None:
    """``run("straight")`` for 8 steps (checkpoints every 4), then ``run("killed")`` killed
    during step 7 and run again: the adapter, the head and every logged loss match."""
    straight = run("straight")
    forward = model_class.forward
    calls = {"n": 0}

    def crashing(self: Any, batch: dict[str, torch.Tensor]) -> Any:
        calls["n"] += 1
        if calls["n"] == 7:  # during step 7, after the step-4 checkpoint
            raise RuntimeError("killed")
        return forward(self, batch)

    monkeypatch.setattr(model_class, "forward", crashing)
    with pytest.raises(RuntimeError, match="killed"):
        run("killed")
    monkeypatch.setattr(model_class, "forward", forward)
    resumed = run("killed")
    for name in ("adapter.safetensors", "task_head.safetensors"):
        ours = load_file(str(resumed.encoder_dir / name))
        theirs = load_file(str(straight.encoder_dir / name))
        assert ours.keys() == theirs.keys()
        assert all(torch.equal(ours[k], theirs[k]) for k in ours), name
    losses = [r["loss"] for r in MetricsLog(resumed.metrics_path).read()]
    assert losses == [r["loss"] for r in MetricsLog(straight.metrics_path).read()]
    assert len(losses) == 8


def assert_prompt_seen_and_padding_hidden(
    encode: Callable[[int], torch.Tensor], prompt: torch.nn.Parameter, mask: torch.Tensor
) -> None:
    """A soft prompt reaches every real position and padding stays hidden.

    Args:
        encode: ``encode(pad)`` runs the prompted model on the batch with ``pad`` more
            padding columns after the text and returns its text states ``(B, L + pad, D)``
            (the prompt's positions already cut off).
        prompt: the wrapper's prompt ``(P, E)``.
        mask: ``(B, L)`` 1 = real token.
    """
    real = mask.bool()
    base = encode(0)
    padded = encode(3)
    assert padded.shape[1] == base.shape[1] + 3
    torch.testing.assert_close(padded[:, : base.shape[1]][real], base[real], atol=1e-5, rtol=0)
    kept = prompt.detach().clone()
    with torch.no_grad():  # not a constant shift: the embedding LayerNorm would remove it
        prompt.add_(torch.randn(prompt.shape, generator=torch.Generator().manual_seed(0)))
    moved = encode(0)
    with torch.no_grad():
        prompt.copy_(kept)
    change = (moved - base).abs().amax(-1)  # (B, L)
    assert bool((change[real] > 1e-5).all()), change
