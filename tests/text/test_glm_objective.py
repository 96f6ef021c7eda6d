"""GLMObjective: its batches (parts, labels, 2D positions, structured mask), the block
position embeddings entering the encoder, and a few training steps."""

from __future__ import annotations

import itertools

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
from ptm_text.glm.construction import DOCUMENT, SENTENCE
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


def _sentence_batch(sentences_per_row: list[list[int]]) -> dict[str, torch.Tensor]:
    """Rows of sentences of the given lengths, with their ``sentence_starts`` flags."""
    lengths = [sum(s) + 2 for s in sentences_per_row]
    batch = _batch(lengths)
    flags = torch.zeros_like(batch["input_ids"])
    for b, sentences in enumerate(sentences_per_row):
        at = 1
        for length in sentences:
            flags[b, at] = 1
            at += length
    return {**batch, "sentence_starts": flags}


def test_sentence_batches_blank_whole_sentences_as_smask() -> None:
    objective = _objective(_encoder(), sentence_prob=1.0)
    sentences = [[5, 9, 4, 7, 6, 8], [12, 3, 10]]
    batch = objective.collate(_sentence_batch(sentences), torch.Generator().manual_seed(0))
    assert float(batch["glm_sentence"]) == 1.0 and float(batch["glm_document"]) == 0.0
    for b, lengths in enumerate(sentences):
        ids, tasks = batch["input_ids"][b], batch["glm_task_ids"][b]
        blanks = (ids == VOCAB.mask_id).nonzero().flatten()
        assert (tasks[blanks] == SENTENCE).all() and int((tasks != 0).sum()) == len(blanks)
        # Each B span ([START] at block position 1, up to the next) is one whole sentence.
        block = batch["glm_block_position_ids"][b]
        real = int(batch["attention_mask"].real[b].sum())
        starts = [*(block[:real] == 1).nonzero().flatten().tolist(), real]
        taken = sorted(end - start - 1 for start, end in itertools.pairwise(starts))
        assert all(n in lengths for n in taken)
        assert sum(taken) >= int(0.15 * (sum(lengths) + 2))


def test_sentence_batches_need_sentence_starts() -> None:
    objective = _objective(_encoder(), sentence_prob=1.0)
    with pytest.raises(ValueError, match="sentence_starts"):
        objective.collate(_batch([20, 20]), torch.Generator().manual_seed(0))


def test_task_vectors_reach_the_encoder_only_on_task_blanks() -> None:
    encoder = _encoder()
    objective = _objective(encoder, sentence_prob=0.5, document_prob=0.5)
    model = PretrainingModel(encoder, ObjectiveMix({"glm": objective}))
    seen = set()
    for seed in range(6):
        batch = objective.collate(
            _sentence_batch([[6, 7, 8, 9], [10, 11]]), torch.Generator().manual_seed(seed)
        )
        model(batch).loss.backward()
        seen.add(int(batch["glm_task_ids"].max()))
        extra = objective.rewrite_inputs(batch)["extra_embeds"]
        plain = (batch["glm_block_position_ids"] == 0) & (batch["glm_task_ids"] == 0)
        assert (extra[plain] == 0).all()
    assert seen == {SENTENCE, DOCUMENT}
    assert objective.task_embeddings is not None
    grad = objective.task_embeddings.weight.grad
    assert grad is not None and grad[1].abs().sum() > 0 and grad[2].abs().sum() > 0
    assert grad[0].abs().sum() == 0


def test_without_task_masks_every_blank_is_a_plain_mask() -> None:
    objective = _objective(_encoder(), sentence_prob=1.0, task_masks=False)
    batch = objective.collate(_sentence_batch([[6, 7, 8]]), torch.Generator().manual_seed(0))
    assert objective.task_embeddings is None and (batch["glm_task_ids"] == 0).all()


def test_build_examples_gives_glm_rows_with_sentence_starts() -> None:
    """The run's layout writes the flags only when GLM asks for sentences."""
    from ptm_core.pretraining import build_examples

    documents = [[[10 + i for i in range(n)] for n in (5, 3, 7)], [[30, 31], [32, 33, 34]]]
    with_sentences = ObjectiveMix({"glm": _objective(_encoder(), sentence_prob=0.3)})
    without = ObjectiveMix({"glm": _objective(_encoder())})
    rows = build_examples(with_sentences, documents, VOCAB, 32, seed=0)
    assert rows[0]["sentence_starts"] == [0, 1, 0, 0, 0, 0, 1, 0, 0, 1] + [0] * 7
    assert "sentence_starts" not in build_examples(without, documents, VOCAB, 32, seed=0)[0]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mask_ratio": 0.0}, "mask_ratio"),
        ({"document_prob": 2.0}, "document_prob"),
        ({"sentence_prob": -0.1}, "sentence_prob"),
        ({"sentence_prob": 0.6, "document_prob": 0.5}, "add up to at most 1"),
        ({"sentence_ratio": 1.0}, "sentence_ratio"),
    ],
)
def test_bad_settings_name_the_key(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _objective(_encoder(), **kwargs)


class TestGLMContract(ObjectiveTestCase):
    objective_cls = GLMObjective
