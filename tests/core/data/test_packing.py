"""Packed rows give the same per-document outputs and the same MLM loss as unpacked ones."""

from __future__ import annotations

import pytest
import torch

from ptm_core import bert_encoder
from ptm_core.data import PretrainingBatches, pack_examples
from ptm_core.models import PretrainingModel
from ptm_core.objectives import MaskedLMObjective, ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.seeding import generator_for
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(vocab_size=200, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def _examples(count: int = 9) -> list[dict]:
    gen = torch.Generator().manual_seed(3)
    out = []
    for _ in range(count):
        n = int(torch.randint(3, 14, (1,), generator=gen))
        ids = torch.randint(5, 200, (n,), generator=gen).tolist()
        out.append(
            {
                "input_ids": [2, *ids, 3],
                "token_type_ids": [0] * (n + 2),
                "special_tokens_mask": [1] + [0] * n + [1],
            }
        )
    return out


def test_layout_of_packed_rows() -> None:
    examples = _examples()
    rows = pack_examples(examples, 32)
    assert sum(len(r["input_ids"]) for r in rows) == sum(len(e["input_ids"]) for e in examples)
    assert all(len(r["input_ids"]) <= 32 for r in rows)
    assert len(rows) < len(examples)
    for row in rows:
        starts = [i for i, p in enumerate(row["position_ids"]) if p == 0]
        assert [row["document_ids"][i] for i in starts] == list(range(len(starts)))
        assert all(row["input_ids"][i] == 2 for i in starts)  # each example starts at [CLS]
    with pytest.raises(ValueError, match="does not fit"):
        pack_examples(examples, 4)


def test_packed_batches_equal_unpacked_outputs_and_loss() -> None:
    torch.manual_seed(0)
    encoder = bert_encoder(vocab_size=200, hidden_size=32, num_layers=2, num_heads=4).eval()
    mlm = build_objective(MaskedLMObjective, encoder, VOCAB, mode="static")
    model = PretrainingModel(encoder, ObjectiveMix({"mlm": mlm})).eval()
    generator = generator_for(0, "static")
    examples = [mlm.prepare_example(e, generator) for e in _examples()]
    rows = pack_examples(examples, 40)

    unpacked = next(
        PretrainingBatches(examples, len(examples), pad_id=0, shuffle=False).iter_batches(0)
    )
    packed = next(PretrainingBatches(rows, len(rows), pad_id=0, shuffle=False).iter_batches(0))
    assert packed["attention_mask"].dim() == 3
    with torch.no_grad():
        plain = encoder(
            unpacked["input_ids"], attention_mask=unpacked["attention_mask"]
        ).last_hidden_state
        together = encoder(
            packed["input_ids"],
            attention_mask=packed["attention_mask"],
            position_ids=packed["position_ids"],
        ).last_hidden_state
        # Every example's tokens, in order, from both layouts.
        a = torch.cat([plain[i, : len(e["input_ids"])] for i, e in enumerate(examples)])
        real = packed["document_ids"] >= 0
        b = together[real]
        assert torch.allclose(a, b, atol=1e-5)
        assert torch.allclose(model(unpacked).loss, model(packed).loss, atol=1e-6)
