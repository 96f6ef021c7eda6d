"""ELECTRA: generator built from the discriminator, sampling without gradient, replacement
rate = the generator's error rate, and the electra_tiny preset (discriminator saved only)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from cases import ObjectiveTestCase
from safetensors.torch import load_file

from ptm_core import TransformerEncoder
from ptm_core.encoders import electra_encoder
from ptm_core.models import PretrainingModel
from ptm_core.objectives import (
    IGNORE_INDEX,
    ObjectiveMix,
    ReplacedTokenDetectionObjective,
    electra_generator,
    sample_replacements,
)
from ptm_core.tokenization import VocabInfo

VOCAB = VocabInfo(vocab_size=12, pad_id=0, unk_id=1, cls_id=2, sep_id=3, mask_id=4)


def _discriminator(**kw: object) -> TransformerEncoder:
    values: dict[str, object] = dict(
        vocab_size=12,
        embedding_size=16,
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        max_positions=40,
        dropout=0.0,
        attention_dropout=0.0,
    )
    values.update(kw)
    return electra_encoder(**values)  # type: ignore[arg-type]


def _batch(gen: torch.Generator, rows: int = 64, length: int = 32) -> dict[str, torch.Tensor]:
    ids = torch.randint(5, 7, (rows, length), generator=gen)  # tokens 5 and 6 only
    ids[:, 0], ids[:, -1] = VOCAB.cls_id, VOCAB.sep_id
    special = torch.zeros_like(ids)
    special[:, 0] = special[:, -1] = 1
    return {
        "input_ids": ids,
        "special_tokens_mask": special,
        "attention_mask": torch.ones_like(ids),
        "token_type_ids": torch.zeros_like(ids),
    }


def test_generator_is_narrower_and_shares_the_embeddings() -> None:
    disc = _discriminator(hidden_size=64, num_heads=4)
    for ratio, width in ((0.25, 16), (0.5, 32)):
        gen = electra_generator(disc, size_ratio=ratio)
        assert gen.config.hidden_size == width and gen.config.num_layers == 1
        assert gen.embeddings is disc.embeddings
        # The E=16 tables feed the generator directly when D_g == E, else through E -> D_g.
        projection = gen.embedding_projection
        assert (projection is None) if width == 16 else (projection.in_features == 16)
    objective = ReplacedTokenDetectionObjective(disc, VOCAB, generator_size_ratio=0.25)
    assert objective.generator_head.decoder.weight is disc.word_embeddings.weight


def test_a_sample_equal_to_the_original_counts_as_original() -> None:
    original = torch.tensor([5, 6, 7, 8])
    certain = torch.full((4, 12), -1e4)
    certain[torch.arange(4), original] = 1e4  # the generator is always right
    sampled, replaced = sample_replacements(certain, original)
    assert torch.equal(sampled, original) and not replaced.any()


def test_no_gradient_reaches_the_generator_through_sampling() -> None:
    torch.manual_seed(0)
    disc = _discriminator()
    objective = ReplacedTokenDetectionObjective(disc, VOCAB, generator_weight=0.0)
    model = PretrainingModel(disc, ObjectiveMix({"electra": objective}))
    batch = objective.collate(_batch(torch.Generator().manual_seed(0), rows=8), torch.Generator())
    out = model(batch)
    out.loss.backward()
    # Only the discriminator loss is on: the generator's own layers get no gradient ...
    generator_own = [
        *objective.generator.layers.named_parameters(),
        *objective.generator_head.dense.named_parameters(),
    ]
    for name, param in generator_own:
        assert param.grad is None or not param.grad.any(), name
    # ... while the shared embeddings and the discriminator do.
    assert disc.word_embeddings.weight.grad is not None and disc.word_embeddings.weight.grad.any()
    assert {"electra/discriminator_loss", "electra/generator_loss"} <= set(out.metrics)


def test_replacement_rate_equals_the_generators_error_rate() -> None:
    torch.manual_seed(0)
    disc = _discriminator()
    objective = ReplacedTokenDetectionObjective(disc, VOCAB).eval()
    with torch.no_grad():
        # A generator that favours tokens 5 and 6, so it is right about half the time.
        objective.generator_head.decoder.bias[5:7] += 4.0
    data_gen = torch.Generator().manual_seed(1)
    replaced, expected = [], []
    with torch.no_grad():
        for _ in range(20):
            batch = objective.collate(_batch(data_gen), data_gen)
            selected = batch["electra_labels"] != IGNORE_INDEX
            hidden = objective.generator(
                batch["input_ids"], batch["attention_mask"]
            ).last_hidden_state
            probs = objective.generator_head(hidden[selected]).softmax(-1)
            p_original = probs.gather(1, batch["electra_labels"][selected][:, None]).squeeze(1)
            expected.append(1.0 - p_original)
            rewritten = objective.rewrite_inputs(batch)
            replaced.append(rewritten["rtd_labels"][selected].float())
            # Unselected tokens are never replaced.
            assert not rewritten["rtd_labels"][~selected].any()
    error_rate = torch.cat(expected).mean().item()
    replacement_rate = torch.cat(replaced).mean().item()
    assert torch.cat(replaced).numel() > 4000
    assert 0.2 < error_rate < 0.8  # far from "always replaced": the test can tell
    assert abs(replacement_rate - error_rate) < 0.03


def test_electra_tiny_preset_loss_falls_and_saves_the_discriminator_only(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from test_albert import run_preset

    records = run_preset("electra_tiny", tmp_path, "model.num_layers=1")
    losses = [r["loss"] for r in records]
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5
    assert {"electra/generator_loss", "electra/discriminator_loss"} <= set(records[-1])
    final = tmp_path / "final"
    config = json.loads((final / "config.json").read_text())
    assert config["hidden_size"] == 128 and config["embedding_size"] == 64
    encoder = TransformerEncoder.from_pretrained(final)
    assert set(load_file(final / "model.safetensors")) == set(encoder.state_dict())


class TestReplacedTokenDetectionContract(ObjectiveTestCase):
    objective_cls = ReplacedTokenDetectionObjective
    vocab = VOCAB

    def make_encoder(self) -> torch.nn.Module:
        return _discriminator()

    def make_input(self) -> dict[str, torch.Tensor]:
        return _batch(torch.Generator().manual_seed(0), rows=4, length=12)
