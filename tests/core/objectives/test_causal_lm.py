"""Causal LM (GPT): next-token labels, a left-to-right mask that hides padding, a tied head."""

from __future__ import annotations

import torch
from cases import ObjectiveTestCase

from ptm_core import bert_encoder
from ptm_core.models import PretrainingModel
from ptm_core.modules import left_to_right_mask
from ptm_core.objectives import IGNORE_INDEX, CausalLMObjective, ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(vocab_size=40, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def _batch() -> dict[str, torch.Tensor]:
    ids = torch.tensor([[2, 10, 11, 12, 3], [2, 20, 3, 0, 0]])
    return {
        "input_ids": ids,
        "token_type_ids": torch.zeros_like(ids),
        "special_tokens_mask": (ids < 5).long(),
        "attention_mask": (ids != 0).long(),
    }


def test_labels_are_the_next_token_and_padding_is_hidden() -> None:
    encoder = bert_encoder(vocab_size=40, hidden_size=16, num_layers=1, num_heads=2)
    objective = build_objective(CausalLMObjective, encoder, VOCAB)
    assert objective.head.decoder.weight is encoder.word_embeddings.weight
    batch = objective.collate(_batch(), torch.Generator())
    assert batch["lm_labels"].tolist() == [
        [10, 11, 12, 3, IGNORE_INDEX],
        [20, 3, IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX],
    ]
    assert torch.equal(batch["attention_mask"], left_to_right_mask(_batch()["attention_mask"]))
    assert not batch["attention_mask"][1, 3:].any() and not batch["attention_mask"][1, :, 3:].any()


def test_a_few_steps_fit_a_repeated_sequence_and_outputs_are_causal() -> None:
    torch.manual_seed(0)
    encoder = bert_encoder(vocab_size=40, hidden_size=32, num_layers=2, num_heads=2, dropout=0.0)
    model = PretrainingModel(
        encoder, ObjectiveMix({"clm": build_objective(CausalLMObjective, encoder, VOCAB)})
    )
    batch = model.objectives.collate(_batch(), torch.Generator())
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(30):
        out = model(batch)
        optimiser.zero_grad()
        out.loss.backward()
        optimiser.step()
        losses.append(out.loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert {"clm/loss", "clm/accuracy", "clm/perplexity"} <= set(out.metrics)
    # Changing token 3 leaves positions 0..2 unchanged (no peeking at what is predicted).
    model.eval()
    with torch.no_grad():
        base = encoder(batch["input_ids"], attention_mask=batch["attention_mask"])
        other = batch["input_ids"].clone()
        other[0, 3] = 30
        changed = encoder(other, attention_mask=batch["attention_mask"])
    torch.testing.assert_close(changed.last_hidden_state[0, :3], base.last_hidden_state[0, :3])


class TestCausalLMContract(ObjectiveTestCase):
    objective_cls = CausalLMObjective
