"""Pseudo-log-likelihood of sentences under a masked LM (Salazar et al., 2020).

``PLL(W) = sum_t log P(w_t | W with w_t masked)``: each token of the sentence is masked in
turn (one copy of the sentence per token, special tokens never masked) and the MLM head's
log-probability of the original token is summed. A minimal pair (a grammatical sentence and
an ungrammatical twin) is right when the grammatical one has the higher PLL, as in BLiMP
(Warstadt et al., 2020) scored by Salazar et al.
"""

from __future__ import annotations

import csv
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ptm_core.analysis.masked_lm_model import MaskedLanguageModel


def pseudo_log_likelihoods(
    model: MaskedLanguageModel, sentences: Sequence[str], *, batch_size: int = 64
) -> list[float]:
    """The PLL (natural log) of each sentence: one masked copy per non-special token."""
    info = model.tokenizer.vocab_info  # type: ignore[attr-defined]
    specials = set(info.special_ids)
    rows: list[list[int]] = []
    positions: list[int] = []
    targets: list[int] = []
    owner: list[int] = []
    for index, ids in enumerate(model.encode(sentences)):
        for position, token in enumerate(ids):
            if token in specials:
                continue
            masked = list(ids)
            masked[position] = model.mask_id
            rows.append(masked)
            positions.append(position)
            targets.append(token)
            owner.append(index)
    totals = [0.0] * len(sentences)
    if not rows:
        return totals
    log_probs = model.log_probs(rows, positions, batch_size=batch_size)
    picked = log_probs.gather(1, torch.tensor(targets)[:, None]).squeeze(1).tolist()
    for index, value in zip(owner, picked, strict=True):
        totals[index] += value
    return totals


@dataclass(frozen=True)
class MinimalPair:
    """A grammatical sentence, its ungrammatical twin and the phenomenon they test."""

    good: str
    bad: str
    phenomenon: str = "all"


def read_minimal_pairs(path: str | Path) -> list[MinimalPair]:
    """Pairs from a TSV: ``good<TAB>bad[<TAB>phenomenon]``, an optional header line
    ``good<TAB>bad...``, ``#`` comments.

    Raises:
        ValueError: a line without two non-empty columns (names ``file:line``).
    """
    file = Path(path)
    pairs = []
    with file.open(encoding="utf-8", newline="") as handle:
        for number, row in enumerate(csv.reader(handle, delimiter="\t"), start=1):
            if not row or row[0].startswith("#") or (number == 1 and row[:2] == ["good", "bad"]):
                continue
            if len(row) < 2 or not row[0].strip() or not row[1].strip():
                raise ValueError(
                    f"{file}:{number}: expected good<TAB>bad[<TAB>phenomenon], got {row!r}"
                )
            phenomenon = row[2].strip() if len(row) > 2 and row[2].strip() else "all"
            pairs.append(MinimalPair(row[0].strip(), row[1].strip(), phenomenon))
    if not pairs:
        raise ValueError(f"{file}: no minimal pairs (good<TAB>bad per line)")
    return pairs


#: PLL differences within this are ties (a tie counts as wrong): the same sentence scored in
#: two batches differs by float rounding (padding changes the kernels' reduction order).
TIE = 1e-5


def minimal_pair_accuracy(
    model: MaskedLanguageModel, pairs: Sequence[MinimalPair], *, batch_size: int = 64
) -> dict[str, object]:
    """Share of pairs whose good sentence has the higher PLL, overall and per phenomenon.

    Returns:
        ``{"accuracy", "pairs", "phenomena": {name: {"accuracy", "pairs"}}, "scores":
        [(good PLL, bad PLL), ...]}``; a tie (within :data:`TIE`) counts as wrong.
    """
    scores = pseudo_log_likelihoods(
        model, [p.good for p in pairs] + [p.bad for p in pairs], batch_size=batch_size
    )
    good, bad = scores[: len(pairs)], scores[len(pairs) :]
    right: dict[str, list[bool]] = defaultdict(list)
    for pair, g, b in zip(pairs, good, bad, strict=True):
        right[pair.phenomenon].append(g > b + TIE)
    every = [r for rs in right.values() for r in rs]
    return {
        "accuracy": sum(every) / len(every),
        "pairs": len(every),
        "phenomena": {
            name: {"accuracy": sum(rs) / len(rs), "pairs": len(rs)} for name, rs in right.items()
        },
        "scores": list(zip(good, bad, strict=True)),
    }
