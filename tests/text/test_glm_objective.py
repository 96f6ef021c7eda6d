"""GLMObjective: its batches (parts, labels, 2D positions, structured mask), the block
position embeddings entering the encoder, and a few training steps."""

from __future__ import annotations

import pytest
import torch
from cases import ObjectiveTestCase

from ptm_core import bert_encoder
from ptm_core.models.pretraining import PretrainingModel
from ptm_core.modules.attention_structure import AttentionStructure
from ptm_core.objectives.base import IGNORE_INDEX
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.tokenization import VocabInfo
from ptm_text.glm.objective import GLMObjective

VOCAB = VocabInfo(vocab_size=60, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def _encoder():
    torch.manual_seed(0)
    return bert_encoder(vocab_size=60, hidden_size=16, num_layers=2, num_heads=2, dropout=0.0)


def _batch(lengths: list[int]) -> dict[str, torch.Tensor]:
    width = max(lengths)
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for b, n in enumerate(lengths):
        ids[b, :n] = torch.tensor([2, *[5 + (b * 7 + i) % 50 for i in range(n - 2)], 3])
        mask[b, :n] = 1
    return {"input_ids": ids, "attention_mask": mask}


def _objective(encoder, **kwargs) -> GLMObjective:
    return build_objective(GLMObjective, encoder, VOCAB, **kwargs)


def test_collate_builds_parts_labels_and_positions() -> None:
    objective = _objective(_encoder())
    batch = objective.collate(_batch([60, 41]), torch.Generator().manual_seed(0))
    structure = batch["attention_mask"]
    assert isinstance(structure, AttentionStructure) and structure.kind == "prefix"
    dense = structure.dense()
    for b, n in enumerate([60, 41]):
        ids, labels = batch["input_ids"][b], batch["glm_labels"][b]
        types = structure.token_type_ids[b]
        sep = int((types == 0).sum())
        masks = int((ids[:sep] == VOCAB.mask_id).sum())
        starts = int((batch["glm_block_position_ids"][b] == 1).sum())
        assert masks == starts >= 1  # one [MASK] in A per span in B
        real = int(structure.real[b].sum())
        assert real == n + 2 * masks  # A loses len-1 per span, B adds len+1
        # Labels only on B; every B span ends with [END] = [SEP].
        assert (labels[:sep] == IGNORE_INDEX).all() and (labels[sep:real] != IGNORE_INDEX).all()
        assert int((labels == VOCAB.sep_id).sum()) == masks
        # Covered >= 15%: B's real length minus the [START]s.
        assert real - sep - masks >= int(0.15 * n)
        # A sees A only; the first B token sees A and itself.
        assert dense[b, 0, :sep].all() and not dense[b, 0, sep:].any()
        assert dense[b, sep, : sep + 1].all() and not dense[b, sep, sep + 1 :].any()
        assert (batch["position_ids"][b, sep:real] < sep).all()
    assert (batch["token_type_ids"] == 0).all()


def test_collate_is_seeded() -> None:
    objective = _objective(_encoder())
    first = objective.collate(_batch([50, 50]), torch.Generator().manual_seed(3))
    again = objective.collate(_batch([50, 50]), torch.Generator().manual_seed(3))
    other = objective.collate(_batch([50, 50]), torch.Generator().manual_seed(4))
    assert torch.equal(first["input_ids"], again["input_ids"])
    assert not torch.equal(first["glm_labels"], other["glm_labels"])


def test_document_batches_have_one_long_span() -> None:
    objective = _objective(_encoder(), document_prob=1.0)
    batch = objective.collate(_batch([42, 42]), torch.Generator().manual_seed(0))
    assert float(batch["glm_document"]) == 1.0
    for b in range(2):
        assert int((batch["glm_block_position_ids"][b] == 1).sum()) == 1
        assert int((batch["glm_labels"][b] != IGNORE_INDEX).sum()) - 1 >= 20  # >= 50% of 40


def test_block_positions_reach_the_encoder_and_part_a_reads_as_plain_text() -> None:
    encoder = _encoder()
    objective = _objective(encoder)
    model = PretrainingModel(encoder, ObjectiveMix({"glm": objective}))
    batch = objective.collate(_batch([40, 33]), torch.Generator().manual_seed(1))
    model(batch).loss.backward()
    grad = objective.block_positions.weight.grad
    assert grad is not None and grad[1:].abs().sum() > 0  # through the encoder's extra_embeds
    assert grad[0].abs().sum() == 0  # row 0 (part A) is fixed at zero
    extra = objective.rewrite_inputs(batch)["extra_embeds"]
    assert (extra[batch["glm_block_position_ids"] == 0] == 0).all()


def test_loss_falls_on_a_fixed_batch() -> None:
    encoder = _encoder()
    objective = _objective(encoder)
    model = PretrainingModel(encoder, ObjectiveMix({"glm": objective}))
    batch = objective.collate(_batch([48, 48, 40]), torch.Generator().manual_seed(2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        loss = model(batch).loss
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.7 * losses[0]


def test_packed_rows_are_refused() -> None:
    objective = _objective(_encoder())
    batch = {**_batch([20]), "document_ids": torch.zeros(1, 20, dtype=torch.long)}
    with pytest.raises(ValueError, match=r"data\.pack=false"):
        objective.collate(batch, torch.Generator().manual_seed(0))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"mask_ratio": 0.0}, "mask_ratio"), ({"document_prob": 2.0}, "document_prob")],
)
def test_bad_settings_name_the_key(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _objective(_encoder(), **kwargs)


class TestGLMContract(ObjectiveTestCase):
    objective_cls = GLMObjective
