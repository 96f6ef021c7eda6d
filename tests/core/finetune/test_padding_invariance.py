"""A row's logits and loss do not depend on the padding its batch adds (issue #31, items 7-8).

Every task kind is run on a batch of unequal rows (over 30% padding, so ``unpad=auto``
unpads) with unpadding on and off, and each row alone. QA is also compared with Hugging
Face's ``BertForQuestionAnswering``: same logits at real positions, and ptm's batched loss
equals transformers' loss on each row without padding.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import BertForQuestionAnswering

from ptm_core.encoders.presets import bert_encoder, xlnet_encoder
from ptm_core.finetune.model import TaskModel, build_task_model
from ptm_core.modules.execution import ExecutionSettings, apply_execution_settings
from tests.core.finetune.test_task_parity import save_hf, tiny_hf_config

TOL = 1e-5
VOCAB = 71  # not the sample vocabulary's size
LENGTHS = (13, 4, 7, 2)  # 26 of 52 positions are padding
NUM_LABELS = {"classification": 3, "regression": 1, "tagging": 4, "qa": 2, "multiple_choice": 2}
CHOICES = 3


def _encoder(seed: int = 5) -> torch.nn.Module:
    torch.manual_seed(seed)
    return bert_encoder(
        vocab_size=VOCAB,
        hidden_size=24,
        num_layers=2,
        num_heads=3,
        intermediate_size=40,
        max_positions=16,
    )


def _rows(kind: str, seed: int = 2) -> list[dict[str, torch.Tensor]]:
    """One unpadded example per length in LENGTHS, with labels for ``kind``."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for length in LENGTHS:
        shape = (CHOICES, length) if kind == "multiple_choice" else (length,)
        ids = torch.randint(4, VOCAB, shape, generator=gen)
        types = torch.zeros_like(ids)
        types[..., length // 2 :] = 1  # a sentence pair
        row = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": types}
        if kind == "qa":
            start = int(torch.randint(0, length, (1,), generator=gen))
            row["start_positions"] = torch.tensor(start)
            row["end_positions"] = torch.tensor(min(length - 1, start + 1))
        elif kind == "tagging":
            row["labels"] = torch.randint(0, NUM_LABELS[kind], (length,), generator=gen)
        elif kind == "regression":
            row["labels"] = torch.rand((), generator=gen)
        else:
            row["labels"] = torch.randint(
                0, NUM_LABELS[kind] if kind != "multiple_choice" else CHOICES, (), generator=gen
            )
        rows.append(row)
    return rows


def _pad(rows: list[dict[str, torch.Tensor]], *, left: bool = False) -> dict[str, torch.Tensor]:
    width = max(row["input_ids"].shape[-1] for row in rows)
    batch: dict[str, list[torch.Tensor]] = {}
    for row in rows:
        for key, value in row.items():
            if value.dim() == 0:
                batch.setdefault(key, []).append(value)
                continue
            fill = -100 if key == "labels" else 0
            gap = width - value.shape[-1]
            spec = (gap, 0) if left else (0, gap)
            batch.setdefault(key, []).append(torch.nn.functional.pad(value, spec, value=fill))
    return {key: torch.stack(values) for key, values in batch.items()}


def _run(
    model: TaskModel, batch: dict[str, torch.Tensor], unpad: str
) -> tuple[torch.Tensor, torch.Tensor]:
    apply_execution_settings(model, ExecutionSettings(unpadding=unpad))
    with torch.no_grad():
        out = model.eval()(batch)
    assert out.loss is not None
    return out.logits, out.loss


def _real_logits(kind: str, logits: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
    """Per row: the logits a row owns (real positions for token-level kinds)."""
    if kind in ("tagging", "qa"):
        return [row[m.bool()] for row, m in zip(logits, mask, strict=True)]
    return list(logits)


@pytest.mark.parametrize("kind", list(NUM_LABELS))
def test_every_task_kind_gives_the_same_logits_and_loss_at_any_padding(kind: str) -> None:
    model = build_task_model(_encoder(), kind, NUM_LABELS[kind], 0.0)
    with torch.no_grad():
        for param in model.head.parameters():
            param.normal_(std=0.3)
    rows = _rows(kind)
    batch = _pad(rows)
    mask = batch["attention_mask"]
    logits_on, loss_on = _run(model, batch, "on")
    logits_off, loss_off = _run(model, batch, "off")
    assert (loss_on - loss_off).abs().item() <= TOL, (kind, loss_on, loss_off)
    real_mask = mask if kind != "multiple_choice" else mask[:, 0]
    for on, off in zip(
        _real_logits(kind, logits_on, real_mask),
        _real_logits(kind, logits_off, real_mask),
        strict=True,
    ):
        assert (on - off).abs().max().item() <= TOL
    # Each row alone (no padding at all) gives the logits it got in the batch.
    alone = [_run(model, _pad([row]), "off")[0][0] for row in rows]
    for index, (row_alone, row_batched) in enumerate(
        zip(alone, _real_logits(kind, logits_on, real_mask), strict=True)
    ):
        assert (row_alone - row_batched).abs().max().item() <= TOL, (kind, index)
    if kind in ("qa", "classification", "multiple_choice"):
        # Row-mean losses: the mean of each row's own loss is the batch loss.
        per_row = torch.stack([_run(model, _pad([row]), "off")[1] for row in rows])
        assert (per_row.mean() - loss_on).abs().item() <= TOL, (kind, per_row, loss_on)


def test_qa_loss_with_unpadding_equals_transformers_on_each_row_alone(tmp_path: Path) -> None:
    from ptm_core.checkpoints.hf.bert_tasks import load_hf_task_model

    hf = save_hf("qa", tmp_path, seed=4)
    assert isinstance(hf, BertForQuestionAnswering)
    model = load_hf_task_model(tmp_path)
    config = tiny_hf_config()
    gen = torch.Generator().manual_seed(9)
    lengths = (10, 3, 6)  # 43% padding: unpad=auto would unpad too
    rows = []
    for length in lengths:
        ids = torch.randint(5, config.vocab_size, (length,), generator=gen)
        start = int(torch.randint(0, length, (1,), generator=gen))
        rows.append(
            {
                "input_ids": ids,
                "attention_mask": torch.ones_like(ids),
                "token_type_ids": torch.zeros_like(ids),
                "start_positions": torch.tensor(start),
                "end_positions": torch.tensor(length - 1),
            }
        )
    batch = _pad(rows)
    logits, loss = _run(model, batch, "on")
    with torch.no_grad():
        theirs = hf(**batch)
        alone = [hf(**{k: v[None] for k, v in row.items()}).loss for row in rows]
    mask = batch["attention_mask"].bool()
    theirs_logits = torch.stack([theirs.start_logits, theirs.end_logits], dim=-1)
    assert (logits[mask] - theirs_logits[mask]).abs().max().item() <= TOL
    assert (loss - torch.stack(alone).mean()).abs().item() <= TOL
    # Padding never wins a softmax: a row's start/end probabilities sum to 1 over its tokens.
    probabilities = logits.float().softmax(dim=1)
    assert torch.allclose((probabilities * mask[..., None]).sum(1), torch.ones(len(rows), 2))


@pytest.mark.parametrize("kind", ["classification", "multiple_choice"])
def test_xlnet_pool_last_reads_the_last_real_token_with_left_or_right_padding(kind: str) -> None:
    torch.manual_seed(11)
    encoder = xlnet_encoder(
        vocab_size=VOCAB, hidden_size=24, num_layers=2, num_heads=3, intermediate_size=40
    )
    model = build_task_model(encoder, kind, NUM_LABELS[kind], 0.0, pool="last").eval()
    rows = _rows(kind, seed=6)
    alone = torch.stack([_run(model, _pad([row]), "off")[0][0] for row in rows])
    for left in (True, False):
        batched, _ = _run(model, _pad(rows, left=left), "auto")
        assert (batched - alone).abs().max().item() <= 1e-4, (
            "left" if left else "right",
            batched,
            alone,
        )
