"""Blank filling at inference: a model trained on one row fills its blanks back."""

from __future__ import annotations

import pytest
import torch

from ptm_core import bert_encoder
from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mix import ObjectiveMix
from ptm_core.tokenization import VocabInfo
from ptm_text.glm.construction import DOCUMENT, SENTENCE, SPAN, build_blank_infilling
from ptm_text.glm.infill import encode_blanks, fill_blanks, next_token_logits
from ptm_text.glm.objective import GLMObjective, collate_blank_rows

VOCAB = VocabInfo(vocab_size=40, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)
ROW = [2, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 3]
SPANS = [(3, 6), (8, 9)]  # part B in A's order, as fill_blanks fills them


@pytest.fixture(scope="module")
def trained() -> tuple[torch.nn.Module, GLMObjective]:
    torch.manual_seed(0)
    encoder = bert_encoder(vocab_size=40, hidden_size=32, num_layers=2, num_heads=2, dropout=0.0)
    objective = build_objective(GLMObjective, encoder, VOCAB)
    model = PretrainingModel(encoder, ObjectiveMix({"glm": objective}))
    row = build_blank_infilling(ROW, SPANS, mask_id=4, start_id=2, end_id=3)
    batch = collate_blank_rows([row], VOCAB.pad_id)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(150):
        optimizer.zero_grad()
        model(batch).loss.backward()
        optimizer.step()
    return encoder.eval(), objective


def test_fill_blanks_recovers_the_trained_spans(trained) -> None:
    encoder, objective = trained
    part_a = [2, 10, 11, 4, 15, 16, 4, 18, 19, 3]
    assert fill_blanks(encoder, objective, part_a) == [[12, 13, 14], [17]]


def test_fill_blanks_stops_at_max_span_length(trained) -> None:
    encoder, objective = trained
    part_a = [2, 10, 11, 4, 15, 16, 4, 18, 19, 3]
    assert fill_blanks(encoder, objective, part_a, max_span_length=2) == [[12, 13], [17]]


def test_text_without_blank_is_refused(trained) -> None:
    encoder, objective = trained
    with pytest.raises(ValueError, match=r"no \[MASK\]"):
        fill_blanks(encoder, objective, [2, 10, 3])


@pytest.mark.parametrize("task", [SPAN, SENTENCE, DOCUMENT])
def test_each_generation_step_equals_the_training_forward(task: int) -> None:
    """A step of generation sees exactly what the training row's B token sees: the
    logits at B position j of one teacher-forced pass equal those of the prefix alone
    (also with the [sMASK]/[gMASK] task vectors on the blanks)."""
    torch.manual_seed(1)
    encoder = bert_encoder(vocab_size=40, hidden_size=32, num_layers=2, num_heads=2, dropout=0.0)
    objective = build_objective(GLMObjective, encoder, VOCAB).eval()
    encoder.eval()
    row = build_blank_infilling(ROW, [(8, 9), (3, 6)], mask_id=4, start_id=2, end_id=3, task=task)
    batch = objective.rewrite_inputs(collate_blank_rows([row], VOCAB.pad_id))
    with torch.no_grad():
        hidden = encoder(
            batch["input_ids"],
            attention_mask=batch["attention_mask"],
            position_ids=batch["position_ids"],
            token_type_ids=batch["token_type_ids"],
            extra_embeds=batch["extra_embeds"],
        ).last_hidden_state
        full = objective.head(hidden[0])
    for end in range(row.sep + 1, len(row.input_ids) + 1):
        step = next_token_logits(
            encoder,
            objective,
            row.input_ids[:end],
            row.position_ids[:end],
            row.block_position_ids[:end],
            row.sep,
            row.task_ids[:end] if row.task_ids is not None else None,
        )
        torch.testing.assert_close(step, full[end - 1], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("task", [SPAN, SENTENCE, DOCUMENT])
def test_fill_blanks_builds_the_training_row(monkeypatch: pytest.MonkeyPatch, task: int) -> None:
    """The rows generation runs are GLM's rows for the spans it generated: same ids,
    positions, block positions, task marks and sep (a scripted model emits
    12 13 14 [END] 17 [END])."""
    import ptm_text.glm.infill as infill

    script = iter([12, 13, 14, 3, 17, 3])
    seen: list[tuple[list[int], list[int], list[int], int, list[int]]] = []

    def scripted(encoder, objective, ids, positions, block, sep, task_ids):
        seen.append((list(ids), list(positions), list(block), sep, list(task_ids)))
        return torch.nn.functional.one_hot(torch.tensor(next(script)), 40).float()

    monkeypatch.setattr(infill, "next_token_logits", scripted)
    objective = build_objective(
        GLMObjective, bert_encoder(vocab_size=40, hidden_size=8, num_layers=1, num_heads=2), VOCAB
    )
    part_a = [2, 10, 11, 4, 15, 16, 4, 18, 19, 3]
    filled = infill.fill_blanks(None, objective, part_a, tasks=[task, task])  # type: ignore[arg-type]
    assert filled == [[12, 13, 14], [17]]
    want = build_blank_infilling(ROW, SPANS, mask_id=4, start_id=2, end_id=3, task=task)
    ids, positions, block, sep, task_ids = seen[-1]
    assert ids == want.input_ids  # the call that emitted the last [END]
    assert positions == want.position_ids
    assert block == want.block_position_ids
    assert sep == want.sep
    assert task_ids == want.task_ids


def test_task_count_must_match_the_blanks(trained) -> None:
    encoder, objective = trained
    with pytest.raises(ValueError, match="2 tasks for 1"):
        fill_blanks(encoder, objective, [2, 10, 4, 3], tasks=[SPAN, SENTENCE])


def test_task_masks_need_a_model_trained_with_them() -> None:
    encoder = bert_encoder(vocab_size=40, hidden_size=8, num_layers=1, num_heads=2)
    objective = build_objective(GLMObjective, encoder, VOCAB, task_masks=False)
    with pytest.raises(ValueError, match="without task masks"):
        fill_blanks(encoder, objective, [2, 10, 4, 3], tasks=[SENTENCE])


def test_encode_blanks_reads_the_three_masks(tmp_path) -> None:
    from ptm_core.tokenization import WordPieceTokenizer

    text = ["the river flows to the sea .", "a sentence here . another one !"] * 20
    tokenizer = WordPieceTokenizer.train(text, vocab_size=80)
    ids, tasks = encode_blanks(tokenizer, "the [MASK] flows . [sMASK] the sea [gMASK]")
    mask = tokenizer.vocab_info.mask_id
    assert tasks == [SPAN, SENTENCE, DOCUMENT]
    assert sum(1 for t in ids if t == mask) == 3
    assert "smask" not in tokenizer.decode(ids) and "gmask" not in tokenizer.decode(ids)
