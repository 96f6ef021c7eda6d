"""LXMERT: masking rates, the five pre-training tasks, and errors a user can meet."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives import IGNORE_INDEX, ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import VocabInfo, WordPieceTokenizer
from ptm_multimodal.data import ImageTextBatches, read_image_text_pairs
from ptm_multimodal.families import INPUT_KEYS
from ptm_multimodal.feature_spec import FeatureMismatchError
from ptm_multimodal.lxmert import lxmert
from ptm_multimodal.lxmert_pretraining import (
    LxmertImageQAObjective,
    LxmertMaskedLMObjective,
    LxmertMatchingObjective,
    LxmertObjectPredictionObjective,
    mask_objects,
    mask_words,
)
from ptm_multimodal.synthetic import vocabulary

VOCAB = VocabInfo(vocab_size=50, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)
SIGMAS = 5.0


def _within(count: int, total: int, rate: float) -> None:
    """``count / total`` equals ``rate`` within 5 binomial standard deviations."""
    sigma = math.sqrt(rate * (1 - rate) / total)
    observed = count / total
    assert abs(observed - rate) <= SIGMAS * sigma, (observed, rate, sigma)


def test_words_are_masked_at_15_percent_with_80_10_10() -> None:
    g = torch.Generator().manual_seed(0)
    chosen = candidates_total = to_mask = kept = 0
    for _ in range(20):
        ids = torch.randint(5, 50, (128, 40), generator=g)
        candidates = torch.rand(128, 40, generator=g) < 0.8
        corrupted, labels = mask_words(ids, candidates, VOCAB, g)
        picked = labels != IGNORE_INDEX
        assert not (picked & ~candidates).any()  # specials and padding are never chosen
        assert torch.equal(labels[picked], ids[picked])
        assert torch.equal(corrupted[~picked], ids[~picked])
        chosen += int(picked.sum())
        candidates_total += int(candidates.sum())
        to_mask += int((corrupted[picked] == VOCAB.mask_id).sum())
        kept += int((corrupted[picked] == ids[picked]).sum())
    _within(chosen, candidates_total, 0.15)
    _within(to_mask, chosen, 0.8)
    # 10% kept, plus random draws that hit the same token (1 in 45 regular ids)
    _within(kept, chosen, 0.1 + 0.1 / 45)


def test_objects_are_masked_at_15_percent_with_80_10_10() -> None:
    g = torch.Generator().manual_seed(1)
    chosen = real_total = zeroed = kept = 0
    for _ in range(20):
        feats = torch.randn(128, 36, 8, generator=g) + 3.0  # never zero
        real = torch.rand(128, 36, generator=g) < 0.7
        corrupted, picked = mask_objects(feats, real, g)
        assert not (picked & ~real).any()  # padded regions are never chosen
        assert torch.equal(corrupted[~picked], feats[~picked])
        chosen += int(picked.sum())
        real_total += int(real.sum())
        zeroed += int((corrupted[picked] == 0).all(-1).sum())
        kept += int((corrupted[picked] == feats[picked]).all(-1).sum())
    _within(chosen, real_total, 0.15)
    _within(zeroed, chosen, 0.8)
    _within(kept, chosen, 0.1 + 0.1 * chosen / real_total / 128)  # a random pick may be itself


@pytest.fixture
def setup(synthetic_dirs: tuple[Path, Path], caption_tokenizer: WordPieceTokenizer):
    vocab = caption_tokenizer.vocab_info
    data = read_image_text_pairs(synthetic_dirs[0])
    torch.manual_seed(0)
    model = lxmert(
        vocab_size=vocab.vocab_size,
        visual_embedding_dim=data.features.spec.feature_size,
        hidden_size=32,
        num_heads=4,
        intermediate_size=64,
        l_layers=1,
        r_layers=1,
        x_layers=1,
        max_positions=32,
        dropout=0.0,
        attention_dropout=0.0,
        feature_spec=data.features.spec,
    )
    answers = [vocabulary().index(w) for w in ("red", "green", "blue", "circle", "square")]
    mix = ObjectiveMix(
        {
            "qa": build_objective(LxmertImageQAObjective, model, vocab, answer_token_ids=answers),
            "lm": build_objective(LxmertMaskedLMObjective, model, vocab),
            "obj": build_objective(LxmertObjectPredictionObjective, model, vocab),
            "itm": build_objective(LxmertMatchingObjective, model, vocab),
        }
    )
    batches = ImageTextBatches(data, caption_tokenizer, 32, transform=mix.collate, seed=3)
    return PretrainingModel(model, mix, input_keys=INPUT_KEYS), batches, answers


def test_lm_rate_on_captions_and_cloze_questions(setup) -> None:
    wrapped, batches, answers = setup
    mask_id = wrapped.objectives.objectives["lm"].vocab.mask_id
    g = torch.Generator().manual_seed(4)
    chosen = candidates = questions = 0
    for index in range(len(batches)):
        rows = list(range(index * 32, min(index * 32 + 32, len(batches.pairs))))
        captions = rows[1:] + rows[:1] if index % 2 else rows  # odd batches: all swapped
        raw = batches.build(rows, captions, None)
        batch = wrapped.objectives.collate(raw, g)
        labels = batch["lxmert_lm_labels"]
        chosen += int((labels != IGNORE_INDEX).sum())
        candidates += int(wrapped.objectives.objectives["lm"].candidates(batch).sum())
        qa = batch["qa_label"]
        asked = qa != IGNORE_INDEX
        assert bool((batch["match_label"][asked] == 1).all())  # questions only on matches
        questions += int(asked.sum())
        for row in asked.nonzero().squeeze(1).tolist():
            # the cloze [MASK] hides the answer word and is not an LM target
            cloze = (batch["input_ids"][row] == mask_id) & (labels[row] == IGNORE_INDEX)
            original = raw["input_ids"][row][cloze].tolist()
            assert answers[int(qa[row])] in original
    _within(chosen, candidates, 0.15)
    assert questions > 50


def test_every_task_logs_its_loss_and_the_total_falls(setup, one_thread) -> None:
    wrapped, batches, _ = setup
    optimizer = torch.optim.AdamW(wrapped.parameters(), lr=2e-3)
    fixed = [batches.batch(0, i) for i in range(3)]
    losses = []
    for step in range(24):
        out = wrapped(fixed[step % 3])
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        losses.append(out.loss.item())
    for key in ("qa/loss", "lm/loss", "obj/loss", "obj/feat_loss", "obj/label_loss", "itm/loss"):
        assert key in out.metrics and math.isfinite(out.metrics[key].item()), key
    assert sum(losses[-3:]) < 0.9 * sum(losses[:3]), losses


def test_a_wrong_region_feature_size_names_the_field(setup) -> None:
    wrapped, batches, _ = setup
    batch = batches.batch(0, 0)
    bad = batch["visual_features"][..., :-2]
    with pytest.raises(FeatureMismatchError, match=r"visual_features.*visual_embedding_dim=32"):
        wrapped.encoder(batch["input_ids"], bad)
    with pytest.raises(FeatureMismatchError, match=r"visual_boxes.*box_size=4"):
        wrapped.encoder(
            batch["input_ids"],
            batch["visual_features"],
            visual_boxes=batch["visual_boxes"][..., :3],
        )


def test_no_masked_object_or_question_gives_zero_losses_not_nan(setup) -> None:
    wrapped, batches, _ = setup
    batch = batches.batch(0, 0)
    batch = {
        **batch,
        "object_selected": torch.zeros_like(batch["object_selected"]),
        "qa_label": torch.full_like(batch["qa_label"], IGNORE_INDEX),
    }
    out = wrapped(batch)
    assert out.metrics["obj/loss"].item() == 0.0 and out.metrics["qa/loss"].item() == 0.0
    out.loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in wrapped.parameters() if p.grad is not None)
