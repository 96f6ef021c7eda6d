"""Fine-tuning's fast path changes how a batch is computed, never what it computes.

The fast path (issue #36 item 3): padding dropped after the embeddings (``unpad``), the
last layer run at ``[CLS]`` only for sequence-level heads
(:mod:`ptm_core.encoders.first_position`). For every task kind, the loss and every
parameter's gradient on a padded batch are the same with all of it on, with all of it off,
and for the same rows batched in another order with other padding (what length-grouped
batching does).
"""

from __future__ import annotations

import pytest
import torch

from ptm_core.encoders.first_position import can_encode_first, encode_first
from ptm_core.finetune.model import TaskModel, build_task_model
from ptm_core.modules.execution import ExecutionSettings, apply_execution_settings
from tests.core.finetune.test_padding_invariance import NUM_LABELS, _encoder, _pad, _rows

TOL = 2e-5


def _loss_and_grads(
    model: TaskModel, batch: dict[str, torch.Tensor], *, unpad: str, first_only: bool
) -> tuple[float, dict[str, torch.Tensor]]:
    apply_execution_settings(model, ExecutionSettings(unpadding=unpad))
    model.first_position_only = first_only
    model.zero_grad(set_to_none=True)
    output = model.eval()(batch)  # no dropout: the two paths draw different masks
    assert output.loss is not None
    output.loss.backward()
    grads = {
        name: param.grad.clone()
        for name, param in model.named_parameters()
        if param.grad is not None
    }
    return float(output.loss.detach()), grads


def _assert_same(reference: tuple[float, dict], other: tuple[float, dict], what: str) -> None:
    loss, grads = reference
    other_loss, other_grads = other
    assert abs(loss - other_loss) <= TOL, (what, loss, other_loss)
    assert grads.keys() == other_grads.keys(), what
    for name, grad in grads.items():
        scale = max(1.0, grad.abs().max().item())
        gap = (grad - other_grads[name]).abs().max().item()
        assert gap <= TOL * scale, (what, name, gap)


@pytest.mark.parametrize("kind", list(NUM_LABELS))
def test_loss_and_gradients_match_padded_unpadded_and_regrouped(kind: str) -> None:
    model = build_task_model(_encoder(), kind, NUM_LABELS[kind], 0.0)
    with torch.no_grad():
        for param in model.head.parameters():
            param.normal_(std=0.3)
    rows = _rows(kind)
    batch = _pad(rows)
    reference = _loss_and_grads(model, batch, unpad="off", first_only=False)
    fast = _loss_and_grads(model, batch, unpad="on", first_only=True)
    _assert_same(reference, fast, "unpadded + first position")
    _assert_same(reference, _loss_and_grads(model, batch, unpad="off", first_only=True), "padded")
    # Length-grouped batching: the same rows, longest first, padded again. The mean loss
    # over the batch does not depend on the order (tagging and QA weigh tokens, not rows,
    # so they are compared in the order they came in).
    if kind not in ("tagging", "qa"):
        regrouped = _pad(sorted(rows, key=lambda row: -row["input_ids"].shape[-1]))
        _assert_same(
            reference,
            _loss_and_grads(model, regrouped, unpad="auto", first_only=True),
            "regrouped",
        )


@pytest.mark.parametrize("unpad", ["on", "off"])
def test_encode_first_is_the_full_stacks_first_position(unpad: str) -> None:
    encoder = _encoder()
    apply_execution_settings(encoder, ExecutionSettings(unpadding=unpad))
    batch = _pad(_rows("classification"))
    inputs = {
        "input_ids": batch["input_ids"],
        "attention_mask": batch["attention_mask"],
        "token_type_ids": batch["token_type_ids"],
    }
    encoder.eval()
    assert can_encode_first(encoder, inputs["attention_mask"])
    with torch.no_grad():
        full = encoder(**inputs).last_hidden_state[:, :1]
        first = encode_first(encoder, **inputs)
    assert first.shape == full.shape
    assert (first - full).abs().max().item() <= 1e-5


def test_encode_first_refuses_what_it_cannot_run() -> None:
    from ptm_core.encoders.presets import xlnet_encoder

    encoder = _encoder()
    visibility = torch.ones(2, 5, 5, dtype=torch.bool)  # K-BERT's visible matrix
    assert not can_encode_first(encoder, visibility)
    assert not can_encode_first(encoder, [torch.ones(2, 5)] * 2)  # one mask per layer
    xlnet = xlnet_encoder(
        vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=24
    )
    assert not can_encode_first(xlnet, torch.ones(2, 5))
    assert not can_encode_first(torch.nn.Identity(), None)  # type: ignore[arg-type]
