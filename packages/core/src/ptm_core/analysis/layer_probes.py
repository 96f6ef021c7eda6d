"""Linear probes per layer, a scalar-mix probe, and the control task that gives selectivity.

Tenney et al. (2019), "BERT Rediscovers the Classical NLP Pipeline": a linear classifier on
each frozen layer, and a probe over a learned softmax mix of all layers whose weights say
where the information sits. Hewitt & Liang (2019), "Designing and Interpreting Probes with
Control Tasks": a probe can score well by memorising word types, so the same probe is also
trained on a *control task* where every word type gets one random label, drawn from the
task's empirical label distribution. Selectivity = task accuracy - control accuracy: high
when the representation, not the probe, holds the label.

Every probe sees the same seeded split of texts (train / dev / test, a text's spans stay
together), is trained full-batch with Adam on standardised features (mean and std of the
train split), and keeps the weights of its best dev accuracy (early stopping).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ptm_core.analysis.layer_features import SpanFeatures
from ptm_core.modules.scalar_mix import ScalarMix
from ptm_core.progress import track


@dataclass(frozen=True)
class ProbeSettings:
    """How every probe is trained.

    Attributes:
        steps: full-batch Adam steps.
        learning_rate: Adam's rate.
        weight_decay: L2 on the probe's weights.
        eval_every: steps between two dev evaluations (the best one is kept).
        dev_share: share of the texts held out for early stopping.
        test_share: share of the texts held out for the reported accuracy.
        threads: torch threads while the probes train (restored after). A probe step is a
            few small matrix products, which more threads only slow down on a busy
            machine: 618 spans x 4 layers took 25 s on 2 threads and 0.9 s on 1 here.
    """

    steps: int = 300
    learning_rate: float = 0.01
    weight_decay: float = 0.0
    eval_every: int = 10
    dev_share: float = 0.1
    test_share: float = 0.2
    threads: int = 1

    def __post_init__(self) -> None:
        if min(self.steps, self.eval_every, self.threads) < 1:
            raise ValueError(
                f"steps ({self.steps}), eval_every ({self.eval_every}) and threads "
                f"({self.threads}) must be >= 1"
            )
        if min(self.dev_share, self.test_share) <= 0 or self.dev_share + self.test_share >= 1:
            raise ValueError(
                f"dev_share {self.dev_share} and test_share {self.test_share} must be > 0 and "
                "leave a train share"
            )


def split_texts(
    groups: Tensor, settings: ProbeSettings, seed: int, *, test_from: int | None = None
) -> dict[str, Tensor]:
    """Boolean unit masks ``train``/``dev``/``test`` from a seeded split of the texts.

    Args:
        groups: ``(N,)`` each unit's text index.
        settings: the dev and test shares.
        seed: the permutation's seed.
        test_from: texts from this index on are the test split (a separate test file);
            the others are split into train and ``dev_share`` of them for dev.

    Raises:
        ValueError: too few texts for a split to have one.
    """
    texts = torch.unique(groups)
    fixed = None if test_from is None else texts[texts >= test_from]
    rest = texts if fixed is None else texts[texts < test_from]
    if len(rest) < (3 if fixed is None else 2) or (fixed is not None and not len(fixed)):
        raise ValueError(
            f"{len(texts)} texts with labelled spans ({0 if fixed is None else len(fixed)} "
            "for test); the probes need 3 or more, and texts for train, dev and test"
        )
    order = rest[torch.randperm(len(rest), generator=torch.Generator().manual_seed(seed))]
    n_dev = max(1, round(settings.dev_share * len(texts if fixed is None else rest)))
    if fixed is None:
        n_test = max(1, round(settings.test_share * len(texts)))
        parts = {"dev": order[:n_dev], "test": order[n_dev : n_dev + n_test]}
        parts["train"] = order[n_dev + n_test :]
    else:
        parts = {"dev": order[:n_dev], "test": fixed, "train": order[n_dev:]}
    return {name: torch.isin(groups, part) for name, part in parts.items()}


def control_labels(types: Sequence[str], labels: Sequence[str], seed: int) -> list[str]:
    """Hewitt & Liang's control task: each word type's one label, drawn at random.

    The draw for a type follows the empirical distribution of ``labels`` (over all units),
    so the control task has the task's label frequencies (weighted by type, as their
    paper's) and is a function of the word type alone.
    """
    counts = Counter(labels)
    names = sorted(counts)
    probabilities = np.array([counts[n] for n in names], dtype=np.float64)
    probabilities /= probabilities.sum()
    rng = np.random.default_rng(seed)
    distinct = sorted(set(types))
    drawn = rng.choice(len(names), size=len(distinct), p=probabilities)
    table = {t: names[int(i)] for t, i in zip(distinct, drawn, strict=True)}
    return [table[t] for t in types]


class _MixProbe(nn.Module):
    def __init__(self, representations: int, hidden: int, classes: int) -> None:
        super().__init__()
        self.mix = ScalarMix(representations)
        self.linear = nn.Linear(hidden, classes)

    def forward(self, x: Tensor) -> Tensor:  # (N, R, D) -> (N, C)
        return self.linear(self.mix(list(x.unbind(dim=1))))


def _standardise(x: Tensor, train: Tensor) -> Tensor:
    mean = x[train].mean(dim=0, keepdim=True)
    std = x[train].std(dim=0, keepdim=True).clamp_min(1e-6)
    return (x - mean) / std


def _accuracy(model: nn.Module, x: Tensor, y: Tensor) -> float:
    with torch.no_grad():
        return float((model(x).argmax(dim=-1) == y).float().mean()) if len(y) else math.nan


def train_probe(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    masks: dict[str, Tensor],
    settings: ProbeSettings,
) -> dict[str, float]:
    """Train ``model`` on the train units; ``{"train", "dev", "test"}`` accuracy at its best
    dev step (the model is left with those weights)."""
    optimizer = torch.optim.Adam(
        model.parameters(), lr=settings.learning_rate, weight_decay=settings.weight_decay
    )
    xt, yt = x[masks["train"]], y[masks["train"]]
    xd, yd = x[masks["dev"]], y[masks["dev"]]
    best, best_state = -1.0, {k: v.clone() for k, v in model.state_dict().items()}
    for step in range(1, settings.steps + 1):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(xt), yt).backward()
        optimizer.step()
        if step % settings.eval_every == 0 or step == settings.steps:
            dev = _accuracy(model, xd, yd)
            if dev > best:
                best, best_state = dev, {k: v.clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)
    return {name: _accuracy(model, x[m], y[m]) for name, m in masks.items()}


def probe_layers(
    data: SpanFeatures,
    *,
    seed: int = 0,
    settings: ProbeSettings | None = None,
    test_from: int | None = None,
) -> dict[str, Any]:
    """Task and control probes on every representation, and the scalar-mix probes.

    Args:
        data: pooled span features (:func:`~ptm_core.analysis.layer_features.span_features`).
        seed: the split's, the control labels' and the probes' initialisation seed.
        settings: how probes train.
        test_from: texts from this index on are the test split (:func:`split_texts`).

    Returns:
        ``{"layers": [{"layer", "accuracy", "control_accuracy", "selectivity", "dev",
        "control_dev", "train", "control_train"}, ...], "mix": {"accuracy",
        "control_accuracy", "selectivity", "weights", "control_weights", "gamma"},
        "split": {"train", "dev", "test"} (units), "labels": {name: count},
        "majority": test accuracy of the train split's most frequent label,
        "unseen": share of the test spans whose word type is not in the train split}``.
        Accuracies are on the test split.
    """
    settings = settings or ProbeSettings()
    before = torch.get_num_threads()
    torch.set_num_threads(settings.threads)
    try:
        return _probe_layers(data, seed, settings, test_from)
    finally:
        torch.set_num_threads(before)


def _probe_layers(
    data: SpanFeatures, seed: int, settings: ProbeSettings, test_from: int | None
) -> dict[str, Any]:
    masks = split_texts(data.groups, settings, seed, test_from=test_from)
    names = sorted(set(data.labels))
    index = {n: i for i, n in enumerate(names)}
    task = torch.tensor([index[label] for label in data.labels])
    control = torch.tensor([index[c] for c in control_labels(data.types, data.labels, seed)])
    x = data.features
    reps, width = x.shape[1], x.shape[2]
    layers = []
    for r in track(range(reps), "layer probes", reps, "layer"):
        features = _standardise(x[:, r], masks["train"])
        scores = {}
        for arm, y in (("task", task), ("control", control)):
            torch.manual_seed(seed)
            scores[arm] = train_probe(nn.Linear(width, len(names)), features, y, masks, settings)
        layers.append(
            {
                "layer": r,
                "accuracy": scores["task"]["test"],
                "control_accuracy": scores["control"]["test"],
                "selectivity": scores["task"]["test"] - scores["control"]["test"],
                "dev": scores["task"]["dev"],
                "control_dev": scores["control"]["dev"],
                "train": scores["task"]["train"],
                "control_train": scores["control"]["train"],
            }
        )
    mixed = _standardise(x, masks["train"])
    mix: dict[str, Any] = {}
    for arm, y in (("task", task), ("control", control)):
        torch.manual_seed(seed)
        probe = _MixProbe(reps, width, len(names))
        score = train_probe(probe, mixed, y, masks, settings)
        weights = [round(float(w), 6) for w in probe.mix.weights().detach()]
        if arm == "task":
            mix.update(accuracy=score["test"], dev=score["dev"], weights=weights)
            mix["gamma"] = float(probe.mix.gamma.detach())
        else:
            mix.update(control_accuracy=score["test"], control_weights=weights)
    mix["selectivity"] = mix["accuracy"] - mix["control_accuracy"]
    majority = Counter(task[masks["train"]].tolist()).most_common(1)[0][0]
    seen = {t for t, m in zip(data.types, masks["train"].tolist(), strict=True) if m}
    test_types = [t for t, m in zip(data.types, masks["test"].tolist(), strict=True) if m]
    return {
        "layers": layers,
        "mix": mix,
        "split": {name: int(m.sum()) for name, m in masks.items()},
        "labels": dict(sorted(Counter(data.labels).items())),
        "majority": float((task[masks["test"]] == majority).float().mean()),
        "unseen": sum(t not in seen for t in test_types) / len(test_types),
    }


def mean_and_std(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per layer (and for the mix) the mean and sample std (n - 1) of each figure over seeds."""

    def stats(values: list[float]) -> dict[str, float]:
        array = np.array(values, dtype=np.float64)
        std = float(array.std(ddof=1)) if len(array) > 1 else 0.0
        return {"mean": float(array.mean()), "std": std}

    keys = ("accuracy", "control_accuracy", "selectivity")
    layers = [
        {"layer": i, **{k: stats([run["layers"][i][k] for run in runs]) for k in keys}}
        for i in range(len(runs[0]["layers"]))
    ]
    mix: dict[str, Any] = {k: stats([run["mix"][k] for run in runs]) for k in keys}
    reps = len(runs[0]["mix"]["weights"])
    mix["weights"] = [stats([run["mix"]["weights"][r] for run in runs]) for r in range(reps)]
    return {"seeds": len(runs), "layers": layers, "mix": mix}
