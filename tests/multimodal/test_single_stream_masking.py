"""The masking rates of the single-stream presets' objectives against their papers:

* vlbert_tiny (configs/objective/vl_vlbert.yaml; Su et al., 2020, §3.2): 15% of words
  (80/10/10), 15% of RoIs of which 90% are zeroed;
* imagebert_tiny (configs/objective/vl_imagebert.yaml; Qi et al., 2020, §3.3): the same
  rates for MLM and for the regions MOC and MRFR share.

Fixed seeds; binomial and chi-square tests at p > 1e-3."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from scipy import stats

from ptm_core.objectives.inputs import build_objective
from ptm_core.objectives.mlm import regular_token_ids
from ptm_core.tokenization import WordPieceTokenizer
from ptm_multimodal.feature_spec import FeatureSpec
from ptm_multimodal.imagebert import imagebert
from ptm_multimodal.vlbert import vlbert

CONFIGS = Path(__file__).parents[2] / "configs" / "objective"
ROWS, DRAWS = 256, 12
# preset objective file, model builder, name of its region objective
PRESETS: dict[str, tuple[str, Callable[..., Any], str]] = {
    "vlbert": ("vl_vlbert.yaml", vlbert, "mvrc"),
    "imagebert": ("vl_imagebert.yaml", imagebert, "region"),
}


def preset_objectives(preset: str, vocab_size: int, vocab: Any) -> dict[str, Any]:
    config, builder, region = PRESETS[preset]
    model = builder(
        vocab_size=vocab_size,
        visual_embedding_dim=8,
        hidden_size=16,
        num_layers=1,
        num_heads=2,
        intermediate_size=32,
        max_positions=32,
        # a detector with classes (ImageBERT's MOC classifies the masked regions)
        feature_spec=FeatureSpec(
            extractor="test", feature_size=8, extractor_hash="0", num_classes=5
        ),
    )
    factories = instantiate(OmegaConf.load(CONFIGS / config).objectives)
    built = {name: build_objective(f, model, vocab) for name, f in factories.items()}
    return {**built, "region": built[region]}


@pytest.fixture(scope="module", params=sorted(PRESETS))
def objectives(
    request: pytest.FixtureRequest, caption_tokenizer: WordPieceTokenizer
) -> dict[str, Any]:
    vocab = caption_tokenizer.vocab_info
    return preset_objectives(request.param, vocab.vocab_size, vocab)


def text_batch(tokenizer: WordPieceTokenizer, g: torch.Generator) -> dict[str, torch.Tensor]:
    """Rows of [CLS] + 12..24 regular tokens + [SEP] + padding to 28."""
    vocab = tokenizer.vocab_info
    regular = regular_token_ids(vocab)
    lengths = torch.randint(12, 25, (ROWS,), generator=g)
    ids = torch.full((ROWS, 28), vocab.pad_id)
    special = torch.ones(ROWS, 28, dtype=torch.long)
    for row, n in enumerate(lengths.tolist()):
        words = regular[torch.randint(len(regular), (n,), generator=g)]
        ids[row, : n + 2] = torch.cat(
            [torch.tensor([vocab.cls_id]), words, torch.tensor([vocab.sep_id])]
        )
        special[row, 1 : n + 1] = 0
    return {"input_ids": ids, "special_tokens_mask": special}


def test_text_masking_is_15_percent_of_words_80_10_10(
    objectives: dict[str, Any], caption_tokenizer: WordPieceTokenizer
) -> None:
    mlm, vocab = objectives["mlm"], caption_tokenizer.vocab_info
    regular = len(regular_token_ids(vocab))
    selected = candidates = 0
    outcome = torch.zeros(3)  # [MASK], another word, kept
    variance_bound = 0.0
    for draw in range(DRAWS):
        batch = text_batch(caption_tokenizer, torch.Generator().manual_seed(100 + draw))
        out = mlm.collate(batch, torch.Generator().manual_seed(draw))
        chosen = out["mlm_labels"] != -100
        real = batch["special_tokens_mask"] == 0
        assert not (chosen & ~real).any(), "a special or padding token was selected"
        n = real.sum(1).float()
        count = chosen.sum(1).float()
        # per row floor(0.15 n + u): its floor or its ceiling, the mean exactly 0.15 n
        assert ((count - torch.floor(0.15 * n)).abs() <= 1).all()
        selected += int(count.sum())
        candidates += int(n.sum())
        variance_bound += 0.25 * ROWS
        new, old = out["input_ids"][chosen], batch["input_ids"][chosen]
        outcome += torch.tensor(
            [
                (new == vocab.mask_id).sum(),
                ((new != vocab.mask_id) & (new != old)).sum(),
                (new == old).sum(),
            ],
            dtype=torch.float,
        )
    assert abs(selected - 0.15 * candidates) < 5 * variance_bound**0.5, selected / candidates
    # a random replacement draws the original word with probability 1/regular
    expected = torch.tensor([0.8, 0.1 * (1 - 1 / regular), 0.1 + 0.1 / regular]) * outcome.sum()
    assert stats.chisquare(outcome.numpy(), expected.numpy()).pvalue > 1e-3, outcome


def test_text_masking_picks_every_position_alike(
    objectives: dict[str, Any], caption_tokenizer: WordPieceTokenizer
) -> None:
    per_position = torch.zeros(24)
    for draw in range(DRAWS):
        batch = text_batch(caption_tokenizer, torch.Generator().manual_seed(200 + draw))
        full = batch["special_tokens_mask"][:, 1:25].sum(1) == 0  # rows with 24 words
        out = objectives["mlm"].collate(batch, torch.Generator().manual_seed(draw))
        per_position += (out["mlm_labels"][full, 1:25] != -100).sum(0).float()
    assert per_position.sum() > 200
    assert stats.chisquare(per_position.numpy()).pvalue > 1e-3, per_position


def test_roi_masking_is_15_percent_of_regions_90_percent_zeroed(objectives: dict[str, Any]) -> None:
    region = objectives["region"]
    selected = real_total = zeroed = 0
    per_region = torch.zeros(10)
    for draw in range(DRAWS):
        g = torch.Generator().manual_seed(300 + draw)
        features = torch.rand(ROWS, 10, 8, generator=g) + 0.1  # never all zero
        counts = torch.randint(3, 11, (ROWS,), generator=g)
        mask = (torch.arange(10)[None] < counts[:, None]).long()
        batch = {"visual_features": features, "visual_mask": mask}
        out = region.collate(batch, torch.Generator().manual_seed(draw))
        chosen = out["region_selected"]
        assert not (chosen & (mask == 0)).any(), "a padding region was selected"
        is_zero = (out["visual_features"] == 0).all(-1)
        assert not (is_zero & ~chosen).any(), "an unselected region was zeroed"
        assert torch.equal(out["region_target_features"], features)
        selected += int(chosen.sum())
        real_total += int(mask.sum())
        zeroed += int(is_zero.sum())
        per_region += (chosen & (counts[:, None] == 10)).sum(0).float()
    assert stats.binomtest(selected, real_total, 0.15).pvalue > 1e-3, selected / real_total
    assert stats.binomtest(zeroed, selected, 0.9).pvalue > 1e-3, zeroed / selected
    assert stats.chisquare(per_region.numpy()).pvalue > 1e-3, per_region
