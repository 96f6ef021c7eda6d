"""Settings of a KG-embedding run: per-model defaults, size presets, and their checks.

Where the numbers come from (user guide with the table: ``docs/knowledge/kg-embeddings.md``):

* Loss and negatives. TransE and RotatE train with the self-adversarial negative-sampling
  loss (NSSA) of Sun et al. (2019, "RotatE", Sec. 3.3; their WN18RR runs: margin 6.0,
  adversarial temperature 0.5, 1024 negatives, batch 512, dim 500, Adam lr 5e-5, 80k steps).
  ComplEx trains with the softplus (logistic) loss of Trouillon et al. (2016) and PyKEEN's
  L2 regularisation of its ComplEx class; DistMult with NSSA at margin 0 and temperature
  1.0, as Sun et al.'s DistMult baseline (with PyKEEN's DistMult regularisation).
* What is shrunk for a CPU: dim (500 -> 64..200), negatives (1024 -> 32..128) and, to make
  up for far fewer steps, a larger lr (1e-3..1e-2). sLCWA with few negatives and a large lr
  converges far faster per CPU-second than the papers' settings; the presets trade the last
  points of MRR for that.
* Presets by entity count (``auto``): ``small`` below 5,000 entities (the demo's KGs; a
  run takes seconds), ``medium`` up to 50,000 (WN18RR-sized), ``large`` above.

Explicit settings (``ptm embed-kg --dim ...``) override the preset's.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MODELS",
    "PRESETS",
    "EmbeddingSettings",
    "pick_preset",
    "resolve_settings",
]

#: Models with tuned defaults here (any other PyKEEN model name also works, with TransE's).
MODELS = ("TransE", "RotatE", "ComplEx", "DistMult")
#: Entity counts at which ``auto`` moves to the next preset.
SMALL_BELOW = 5_000
MEDIUM_UP_TO = 50_000

#: The loss of each model (PyKEEN names and keyword arguments; see the module docstring).
MODEL_LOSS: dict[str, tuple[str, dict[str, float]]] = {
    "TransE": ("NSSA", {"margin": 6.0, "adversarial_temperature": 0.5}),
    "RotatE": ("NSSA", {"margin": 6.0, "adversarial_temperature": 0.5}),
    "ComplEx": ("Softplus", {}),
    "DistMult": ("NSSA", {"margin": 0.0, "adversarial_temperature": 1.0}),
}

#: Settings a model needs apart from the preset's, per preset (before explicit overrides).
#: RotatE at medium/large: PyKEEN initialises its complex entity vectors small (Xavier),
#: so at lr 0.005 the self-adversarial loss barely moves them for the first epochs
#: (WN18RR-style KG, 1,000 valid triples: MRR 0.18 after 5 epochs at 0.005, 0.50 after 4
#: at 0.02; ``benchmarks/results/kg_embeddings.md``).
MODEL_PRESET_OVERRIDES: dict[tuple[str, str], dict[str, Any]] = {
    ("RotatE", "medium"): {"learning_rate": 0.02},
    ("RotatE", "large"): {"learning_rate": 0.02},
}

#: The size presets: every setting a run needs, before explicit overrides.
PRESETS: dict[str, dict[str, Any]] = {
    "small": {
        "embedding_dim": 32,
        "num_epochs": 100,
        "batch_size": 64,
        # RotatE and ComplEx barely move in 100 small epochs at 0.01 (measured on the
        # tests' 66-entity KG); ERNIE's config gives its own.
        "learning_rate": 0.05,
        "num_negatives": 16,
        "eval_every": 10,
        "patience": 3,
        "valid_sample": 0,
    },
    "medium": {
        "embedding_dim": 128,
        "num_epochs": 200,
        "batch_size": 1024,
        "learning_rate": 0.005,
        "num_negatives": 64,
        "eval_every": 5,
        "patience": 3,
        "valid_sample": 1000,
    },
    "large": {
        "embedding_dim": 64,
        "num_epochs": 100,
        "batch_size": 2048,
        "learning_rate": 0.005,
        "num_negatives": 32,
        "eval_every": 5,
        "patience": 3,
        "valid_sample": 1000,
    },
}

#: Each setting's ``ptm embed-kg`` flag, named in errors.
FLAGS = {
    "embedding_dim": "--dim",
    "num_epochs": "--epochs",
    "batch_size": "--batch-size",
    "learning_rate": "--lr",
    "num_negatives": "--negatives",
    "eval_every": "--eval-every",
    "patience": "--patience",
    "valid_sample": "--valid-sample",
    "preset": "--preset",
    "model": "--model",
    "threads": "--threads",
}


@dataclass(frozen=True)
class EmbeddingSettings:
    """Every setting of one run, as :func:`resolve_settings` made it (saved in metrics.json).

    Attributes:
        model: PyKEEN model name.
        preset: the size preset the defaults came from (``small``/``medium``/``large``).
        embedding_dim: entity width (complex models store ``2 * dim`` floats per entity).
        num_epochs: most epochs (early stopping may end sooner).
        batch_size: positive triples per step.
        learning_rate: Adam's.
        num_negatives: corrupted triples per positive (PyKEEN's basic sampler).
        eval_every: epochs between validation evaluations (and progress lines).
        patience: evaluations without a 1% relative MRR gain before stopping; 0 = never stop.
        valid_sample: validation triples scored at each early-stopping evaluation (a fixed
            random sample, by the run's seed); 0 = all of them. Each one is ranked against
            every entity: one validation of all 3,190 triples of the WN18RR-style KG (37,914
            entities) takes about 70 s for TransE and 7 min for RotatE on 2 CPU cores (dim
            128). The final validation and test scores use every triple.
        loss: PyKEEN loss name; ``loss_kwargs`` its arguments.
    """

    model: str
    preset: str
    embedding_dim: int
    num_epochs: int
    batch_size: int
    learning_rate: float
    num_negatives: int
    eval_every: int
    patience: int
    valid_sample: int
    loss: str
    loss_kwargs: dict[str, float]

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict."""
        return dataclasses.asdict(self)


def pick_preset(num_entities: int) -> str:
    """The ``auto`` preset for a KG of ``num_entities`` entities."""
    if num_entities < SMALL_BELOW:
        return "small"
    return "medium" if num_entities <= MEDIUM_UP_TO else "large"


def _check(name: str, value: Any, *, minimum: int) -> None:
    where = f"{name} ({FLAGS[name]})" if name in FLAGS else name
    if name == "learning_rate":
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 < value < math.inf
        ):
            raise ValueError(f"{where} is {value!r}; it must be a finite number above 0")
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{where} is {value!r}; it must be a whole number of at least {minimum}")


def resolve_settings(
    *, model: str = "TransE", preset: str = "auto", num_entities: int = 0, **overrides: Any
) -> EmbeddingSettings:
    """The preset's settings for ``model``, with the explicit (non-``None``) ``overrides``.

    Args:
        model: PyKEEN model name (the loss comes from :data:`MODEL_LOSS`; others get TransE's).
        preset: ``auto`` (by ``num_entities``), ``small``, ``medium`` or ``large``.
        num_entities: the KG's entity count (for ``auto``).
        **overrides: any field of :data:`PRESETS` (``None`` = the preset's).

    Raises:
        ValueError: one line naming the setting (and its ``ptm embed-kg`` flag) and its range.
    """
    if preset not in ("auto", *PRESETS):
        raise ValueError(
            f"preset ({FLAGS['preset']}) is {preset!r}; use auto, small, medium or large"
        )
    chosen = pick_preset(num_entities) if preset == "auto" else preset
    unknown = sorted(set(overrides) - set(PRESETS[chosen]))
    if unknown:
        raise ValueError(f"unknown embedding setting(s) {', '.join(unknown)}")
    values = {
        **PRESETS[chosen],
        **MODEL_PRESET_OVERRIDES.get((model, chosen), {}),
        **{k: v for k, v in overrides.items() if v is not None},
    }
    for name, value in values.items():
        _check(name, value, minimum=0 if name in ("patience", "valid_sample") else 1)
    loss, loss_kwargs = MODEL_LOSS.get(model, MODEL_LOSS["TransE"])
    return EmbeddingSettings(
        model=model, preset=chosen, loss=loss, loss_kwargs=dict(loss_kwargs), **values
    )
