"""Short pre-training on synthetic scenes lifts matching accuracy above chance and above
the same model fed shuffled image features."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives import MaskedLMObjective, ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import WordPieceTokenizer
from ptm_multimodal import (
    AlignmentObjective,
    ImageTextBatches,
    ImageTextMatchObjective,
    MaskedRegionObjective,
    matching_accuracy,
    read_image_text_pairs,
    retrieval_recall,
    vilbert,
    visualbert,
)
from ptm_multimodal.families import INPUT_KEYS
from ptm_multimodal.pretraining import GroundedLabels

TINY = dict(
    hidden_size=64,
    num_layers=2,
    num_heads=4,
    intermediate_size=128,
    max_positions=32,
    dropout=0.0,
    attention_dropout=0.0,
)


def _build(arch: str, vocab, spec):
    torch.manual_seed(0)
    if arch == "visualbert":
        model = visualbert(
            vocab_size=vocab.vocab_size,
            visual_embedding_dim=spec.feature_size,
            feature_spec=spec,
            **TINY,
        )
        objectives = {
            "mlm": build_objective(MaskedLMObjective, model.encoder, vocab),
            "itm": build_objective(ImageTextMatchObjective, model.encoder, vocab),
        }
    else:
        model = vilbert(
            vocab_size=vocab.vocab_size,
            visual_embedding_dim=spec.feature_size,
            feature_spec=spec,
            image_hidden_size=48,
            image_num_layers=1,
            image_num_heads=4,
            co_hidden_size=64,
            co_num_heads=4,
            co_attention_after=[[1, 0], [2, 1]],
            **TINY,
        )
        objectives = {
            "mlm": build_objective(MaskedLMObjective, model, vocab),
            "mrm": MaskedRegionObjective(model, vocab),
            "align": AlignmentObjective(model, vocab),
        }
    mix = ObjectiveMix(objectives)
    return PretrainingModel(model, mix, input_keys=INPUT_KEYS), mix


def train_steps(
    model: torch.nn.Module, data: ImageTextBatches, steps: int, *, learning_rate: float
) -> list[float]:
    """``steps`` AdamW steps over ``data`` (epochs in order); the losses."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.01)
    model.train()
    losses: list[float] = []
    epoch = 0
    while len(losses) < steps:
        for batch in data.iter_batches(epoch):
            loss = model(batch).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(float(loss.detach()))
            if len(losses) >= steps:
                break
        epoch += 1
    return losses


@pytest.mark.slow
@pytest.mark.parametrize(("arch", "steps"), [("visualbert", 600), ("vilbert", 700)])
def test_short_pretraining_lifts_matching_above_chance_and_shuffled_images(
    arch: str,
    steps: int,
    synthetic_dirs: tuple[Path, Path],
    caption_tokenizer: WordPieceTokenizer,
    one_thread: None,
) -> None:
    train = read_image_text_pairs(synthetic_dirs[0])
    held_out = read_image_text_pairs(synthetic_dirs[1])
    model, mix = _build(arch, caption_tokenizer.vocab_info, train.features.spec)
    grounded = GroundedLabels(mix.collate, regions_in_output=arch == "visualbert")
    data = ImageTextBatches(train, caption_tokenizer, 64, transform=grounded, seed=0)
    evaluation = ImageTextBatches(held_out, caption_tokenizer, 64, shuffle=False)
    before = matching_accuracy(model, evaluation)
    losses = train_steps(model, data, steps, learning_rate=1e-3)
    after = matching_accuracy(model, evaluation)
    shuffled = matching_accuracy(model, evaluation, shuffle_images=True)
    recall = retrieval_recall(model, evaluation)
    print(
        f"{arch}: matching accuracy {before.accuracy:.3f} -> {after.accuracy:.3f} "
        f"(chance {after.chance}; shuffled image features {shuffled.accuracy:.3f}); "
        f"loss {losses[0]:.3f} -> {sum(losses[-20:]) / 20:.3f}; "
        f"R@1 {recall.recall[1]:.3f} (chance {recall.chance[1]:.3f}), "
        f"R@5 {recall.recall[5]:.3f} (chance {recall.chance[5]:.3f})"
    )
    assert after.accuracy >= 0.68, after
    assert after.accuracy >= shuffled.accuracy + 0.12, (after, shuffled)
    assert shuffled.accuracy <= 0.62
    assert recall.recall[5] >= 3 * recall.chance[5]
