"""What an ``init_from`` folder filled in a model, and what started fresh: one log line.

An extension that starts from a released encoder (ERNIE-THU's or K-BERT's text layers from
a RoBERTa folder, XLM's encoder from XLM-R, a multimodal text stream from BERT) loads the
folder into a part of a larger model. :func:`report_init` counts the model's tensors that
came from the folder and the ones initialised fresh, groups the fresh ones by prefix and
logs one summary line, so every extension tells the user the same thing in the same words.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class InitReport:
    """The outcome of starting a model from a folder.

    Args:
        source: the folder the weights came from.
        loaded: the model's tensor names that came from ``source``.
        fresh: the model's tensor names initialised fresh.
    """

    source: str
    loaded: tuple[str, ...]
    fresh: tuple[str, ...]

    def fresh_groups(self) -> list[tuple[str, int]]:
        """``(prefix, count)`` of the fresh tensors, grouped by their first two name parts
        (``knowledge_layers.3.*`` stays apart from ``knowledge_layers.4.*``)."""
        counts = Counter(_prefix(name) for name in self.fresh)
        return sorted(counts.items())

    def summary(self) -> str:
        """``N tensors loaded from <folder>, M fresh: a.b.* (k), c (1), ...``."""
        line = f"{len(self.loaded)} tensors loaded from {self.source}, {len(self.fresh)} fresh"
        groups = self.fresh_groups()
        if groups:
            line += ": " + ", ".join(
                f"{p}{'*' if p.endswith('.') else ''} ({n})" for p, n in groups
            )
        return line


def _prefix(name: str) -> str:
    parts = name.split(".")
    return ".".join(parts[: min(2, len(parts) - 1)]) + "." if len(parts) > 1 else name


def report_init(
    model: nn.Module,
    source: str | Path,
    loaded: Iterable[nn.Module | str],
    *,
    what: str = "init_from",
) -> InitReport:
    """Log and return which tensors of ``model`` came from ``source``.

    Args:
        model: the whole model (every tensor of its ``state_dict`` is counted once).
        source: the folder the loaded weights were read from.
        loaded: the submodules whose weights all came from ``source``, and/or the model's
            own tensor names that did (e.g. heads read from the folder's file).
        what: the setting named at the start of the line (``init_from``,
            ``knowledge.init_from``, ...).

    Returns:
        The :class:`InitReport` (its :meth:`~InitReport.summary` is the logged line).

    Raises:
        ValueError: a module in ``loaded`` is not part of ``model`` (a wiring bug).
    """
    names = list(model.state_dict())
    from_folder: set[str] = set()
    prefixes = {id(module): name for name, module in model.named_modules()}
    for item in loaded:
        if isinstance(item, str):
            from_folder.add(item)
            continue
        if id(item) not in prefixes:
            raise ValueError(f"report_init: {type(item).__name__} is not a submodule of the model")
        prefix = prefixes[id(item)]
        start = f"{prefix}." if prefix else ""
        from_folder.update(n for n in names if n.startswith(start))
    report = InitReport(
        source=str(source),
        loaded=tuple(n for n in names if n in from_folder),
        fresh=tuple(n for n in names if n not in from_folder),
    )
    logger.info("%s: %s", what, report.summary())
    return report


def check_folder_vocabulary(folder: str | Path, vocab_size: int, tokenizer_size: int) -> None:
    """Refuse a folder whose tokenizer does not index its token table.

    Args:
        folder: the ``init_from`` folder (its tokenizer and weights).
        vocab_size: rows of the loaded encoder's token table.
        tokenizer_size: ids of the folder's tokenizer (added tokens included).

    Raises:
        ValueError: the two differ; one line naming the files and the tensor.
    """
    if vocab_size == tokenizer_size:
        return
    path = Path(folder)
    tokenizer_file = next(
        (path / n for n in ("tokenizer.json", "vocab.json", "vocab.txt") if (path / n).is_file()),
        path,
    )
    weights = next(
        (path / n for n in ("model.safetensors", "pytorch_model.bin") if (path / n).is_file()),
        path,
    )
    raise ValueError(
        f"{tokenizer_file}: the tokenizer has {tokenizer_size} ids but "
        f"{weights} has {vocab_size} rows in tensor 'embeddings.word_embeddings.weight'; save "
        "the tokenizer the model was trained with in the folder (tokenizer.save_pretrained)"
    )


def check_segment_objectives(
    setting: str, type_vocab_size: int, factories: Mapping[str, Callable[..., Any]]
) -> None:
    """Refuse sentence-pair objectives on an encoder with one token type.

    NSP's and SOP's second segment (and every objective whose class sets
    :attr:`~ptm_core.objectives.base.Objective.needs_segments`, StructBERT's
    sentence-structural task too) is embedded with token type 1, which a RoBERTa or XLM-R
    folder does not have (its table has one row): without this check the run fails at its
    first step with an index error. An encoder with no table (DistilBERT) embeds no type.

    Args:
        setting: the option that named the encoder, with its value (``init_from=<folder>``).
        type_vocab_size: rows of the encoder's token-type table.
        factories: the run's objective factories by name (classes or partials).

    Raises:
        ValueError: one line naming the objectives and the overrides that drop them.
    """
    if type_vocab_size != 1:  # 0: no table (DistilBERT), segments are told apart by [SEP]
        return
    pairs = [
        name
        for name, make in factories.items()
        if getattr(getattr(make, "func", make), "needs_segments", False) is True
    ]
    if pairs:
        drop = " ".join(f"'~objective.objectives.{n}' '~objective.weights.{n}'" for n in pairs)
        raise ValueError(
            f"{setting}: the encoder has one token type (RoBERTa, XLM-R), so the second segment of {', '.join(pairs)} has no embedding; "
            f"drop it: {drop} (or use experiment=roberta_tiny: MLM alone)"
        )


__all__ = ["InitReport", "check_folder_vocabulary", "check_segment_objectives", "report_init"]
