"""Layer probes (ptm_core.analysis.layer_probes): a layer that linearly encodes the label
against one that does not, the control task's labels, the scalar mix, CoNLL label errors."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from scipy.stats import chisquare
from tokenizers import Tokenizer, models, pre_tokenizers

from ptm_core.analysis.layer_features import LabeledText, span_features
from ptm_core.analysis.layer_probes import (
    ProbeSettings,
    control_labels,
    mean_and_std,
    probe_layers,
    split_texts,
)
from ptm_core.analysis.probe_labels import conll_texts
from ptm_core.data.errors import DataError

MARKERS = ["ka", "zu"]
WORDS = [f"w{i}" for i in range(30)]
VOCAB = ["[PAD]", "[UNK]", *MARKERS, *WORDS]


class ContextEncoder(torch.nn.Module):
    """Three representations of each token: 0 = its own random vector (no context),
    1 = that plus a vector of the token before it, 2 = noise."""

    def __init__(self, width: int = 64) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.own = torch.randn(len(VOCAB), width, generator=g)
        self.before = torch.randn(len(VOCAB), width, generator=g)

    def forward(self, ids: torch.Tensor, **_: object) -> SimpleNamespace:
        previous = torch.cat([torch.zeros_like(ids[:, :1]), ids[:, :-1]], dim=1)
        own = self.own[ids]
        g = torch.Generator().manual_seed(int(ids.sum()))
        noise = torch.randn(own.shape, generator=g)
        return SimpleNamespace(hidden_states=(own, own + self.before[previous], noise))


def _backend() -> Tokenizer:
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tokenizer


def _texts(n: int, seed: int = 0) -> list[LabeledText]:
    """Sentences of ``marker word`` pairs; a word's label is the marker before it, so only a
    representation that sees the previous token can tell it."""
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        words: list[str] = []
        labels: list[str] = []
        for _ in range(4):
            marker = rng.choice(MARKERS)
            words += [marker, rng.choice(WORDS)]
            labels += ["M", marker.upper()]
        spans, start = [], 0
        for word in words:
            spans.append((start, start + len(word)))
            start += len(word) + 1
        texts.append(LabeledText(" ".join(words), spans, labels))
    return texts


@pytest.fixture(scope="module")
def result() -> dict:
    data = span_features(ContextEncoder(), _backend(), _texts(150), pad_id=0, batch_size=16)
    assert data.features.shape == (150 * 8, 3, 64)
    return probe_layers(data, seed=0, settings=ProbeSettings(steps=200))


def test_the_curve_shows_the_layer_that_encodes_the_label(result: dict) -> None:
    accuracy = [layer["accuracy"] for layer in result["layers"]]
    # words are half the units: without context they are at chance (0.5 + 0.5 * 0.5 = 0.75)
    assert accuracy[1] > 0.97
    assert 0.6 < accuracy[0] < 0.85
    assert accuracy[2] < 0.7  # noise: about the majority label
    assert result["majority"] == pytest.approx(0.5, abs=0.06)
    selectivity = [layer["selectivity"] for layer in result["layers"]]
    assert max(range(3), key=selectivity.__getitem__) == 1


def test_scalar_mix_weights_sum_to_one_and_pick_the_informative_layer(result: dict) -> None:
    weights = result["mix"]["weights"]
    assert sum(weights) == pytest.approx(1.0, abs=1e-5)
    assert max(range(3), key=weights.__getitem__) == 1
    assert result["mix"]["accuracy"] > 0.95
    summary = mean_and_std([result, result])
    assert sum(w["mean"] for w in summary["mix"]["weights"]) == pytest.approx(1.0, abs=1e-5)
    assert summary["layers"][1]["accuracy"] == {"mean": result["layers"][1]["accuracy"], "std": 0}


def test_control_labels_are_a_function_of_the_type_and_follow_the_distribution() -> None:
    rng = random.Random(1)
    names = ["A", "B", "C"]
    types = [f"t{rng.randrange(3000)}" for _ in range(20000)]
    labels = rng.choices(names, weights=[0.6, 0.3, 0.1], k=len(types))
    control = control_labels(types, labels, seed=4)
    by_type: dict[str, set[str]] = {}
    for word, label in zip(types, control, strict=True):
        by_type.setdefault(word, set()).add(label)
    assert all(len(seen) == 1 for seen in by_type.values())
    per_type = Counter(next(iter(seen)) for seen in by_type.values())
    counts = Counter(labels)
    expected = [counts[n] / len(labels) * len(by_type) for n in names]
    assert chisquare([per_type[n] for n in names], expected).pvalue > 0.001
    assert control_labels(types, labels, seed=4) == control
    assert control_labels(types, labels, seed=5) != control


def test_conll_labels_and_errors_name_the_file_and_line(tmp_path: Path) -> None:
    good = tmp_path / "pos.conll"
    good.write_text("The DT B-NP\ncat NN I-NP\n\nRuns VBZ B-VP\n")
    texts = conll_texts(good, 1)
    assert [t.text for t in texts] == ["The cat", "Runs"]
    assert texts[0].labels == ["DT", "NN"] and texts[0].spans == [(0, 3), (4, 7)]
    assert conll_texts(good, -1)[1].labels == ["B-VP"]
    bad = tmp_path / "bad.conll"
    bad.write_text("The DT B-NP\ncat NN I-NP\n\nRuns VBZ\n")
    with pytest.raises(DataError, match=r"bad\.conll:4: .*--column"):
        conll_texts(bad, 2)
    with pytest.raises(ValueError, match="--column 0 is the word"):
        conll_texts(good, 0)


def test_mean_pooling_and_truncated_spans_are_counted() -> None:
    texts = [LabeledText("ka w1 zu w2", [(0, 2), (3, 5), (6, 8), (9, 11)], ["M", "KA", "M", "ZU"])]
    data = span_features(ContextEncoder(), _backend(), texts, pad_id=0, max_length=3)
    assert data.features.shape[0] == 2 and data.dropped == {"truncated": 2}
    assert data.types == ["ka", "w1"]
    mean = span_features(ContextEncoder(), _backend(), texts, pad_id=0, pooling="mean")
    assert mean.features.shape[0] == 4
    with pytest.raises(ValueError, match="pooling 'last' is not known"):
        span_features(ContextEncoder(), _backend(), texts, pad_id=0, pooling="last")  # type: ignore[arg-type]


def test_a_test_file_is_the_test_split_and_the_rest_is_train_and_dev() -> None:
    groups = torch.arange(40).repeat_interleave(3)  # 40 texts of 3 spans
    masks = split_texts(groups, ProbeSettings(), seed=1, test_from=30)
    assert torch.equal(masks["test"], groups >= 30)
    assert not (masks["train"] & masks["dev"]).any()
    assert torch.equal(masks["train"] | masks["dev"], groups < 30)
    assert int(masks["dev"].sum()) == 3 * 3  # 10 % of the 30 other texts
    plain = split_texts(groups, ProbeSettings(), seed=1)
    assert [int(plain[k].sum()) // 3 for k in ("train", "dev", "test")] == [28, 4, 8]
    with pytest.raises(ValueError, match="texts for train, dev and test"):
        split_texts(groups, ProbeSettings(), seed=1, test_from=40)
