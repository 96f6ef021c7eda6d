"""Frozen per-layer features of labelled spans (words, entity mentions) for layer probes.

Tenney et al. (2019), "What do you learn from context? Probing for sentence structure in
contextualized word representations" (edge probing), pool the token states of a span of a
frozen encoder's layer and train a light classifier on them. Here a unit is a character
span of a text with a label: a CoNLL word (:mod:`ptm_core.analysis.probe_labels`) or a KG
entity mention. The tokenizer's offsets say which sub-tokens a span covers; the span's
vector at each representation (the embedding output and every layer) is its first piece's
state (Tenney et al.'s and BERT's NER choice) or the mean of its pieces.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import Tensor

from ptm_core.progress import batch_starts

logger = logging.getLogger(__name__)

Pooling = Literal["first", "mean"]
POOLINGS = ("first", "mean")


@dataclass
class LabeledText:
    """One text with labelled character spans.

    Attributes:
        text: the text, as the tokenizer reads it.
        spans: ``(start, end)`` character offsets, one per unit (``text[start:end]``).
        labels: one label per span.
        where: where the text came from, for messages (``file:line``).
    """

    text: str
    spans: list[tuple[int, int]]
    labels: list[str]
    where: str = ""


@dataclass
class SpanFeatures:
    """Pooled states of every kept unit at every representation.

    Attributes:
        features: ``(N, R, D)`` float32: ``N`` units, ``R`` = embedding output + layers.
        labels: the ``N`` labels.
        types: the ``N`` units' word types (the span's text, lower-cased): the control
            task gives each type one label.
        groups: ``(N,)`` the index of each unit's text (splits keep a text together).
        dropped: units left out, by reason (``"truncated"``, ``"no token"``).
    """

    features: Tensor
    labels: list[str]
    types: list[str]
    groups: Tensor
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def num_representations(self) -> int:
        return int(self.features.shape[1])


def _covering(offsets: Sequence[tuple[int, int]], start: int, end: int) -> list[int]:
    """Token positions whose characters overlap ``[start, end)`` (special tokens excluded)."""
    return [i for i, (a, b) in enumerate(offsets) if b > a and a < end and b > start]


def max_length_of(encoder: Any) -> int | None:
    """The longest row ``encoder`` takes (its learned positions), ``None`` for no limit."""
    config = getattr(encoder, "text_config", None) or getattr(encoder, "config", None)
    if config is None or getattr(config, "position_encoding", "absolute") != "absolute":
        return None
    value = getattr(config, "max_positions", None)
    return int(value) if value else None


@torch.no_grad()
def span_features(
    encoder: torch.nn.Module,
    backend: Any,
    texts: Sequence[LabeledText],
    *,
    pad_id: int,
    pooling: Pooling = "first",
    batch_size: int = 32,
    max_length: int | None = None,
    device: str | torch.device = "cpu",
) -> SpanFeatures:
    """Every representation's pooled state of every span of ``texts``.

    Args:
        encoder: a frozen encoder whose forward takes ``(input_ids, attention_mask=...,
            token_type_ids=..., output_hidden_states=True)`` and returns ``hidden_states``.
        backend: a Hugging Face ``tokenizers.Tokenizer`` (``encode_batch`` with offsets).
        texts: the labelled texts.
        pad_id: the padding id.
        pooling: ``"first"`` piece of each span or the ``"mean"`` of its pieces.
        batch_size: texts per forward pass.
        max_length: rows are cut to this many tokens (spans past it are dropped and
            counted); default :func:`max_length_of` the encoder.
        device: where the encoder runs (the features come back to the CPU).

    Raises:
        ValueError: an unknown pooling, or no span survived (names why).
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling {pooling!r} is not known; use one of {', '.join(POOLINGS)}")
    limit = max_length if max_length is not None else max_length_of(encoder)
    encoder.to(device).eval()
    rows: list[Tensor] = []
    labels: list[str] = []
    types: list[str] = []
    groups: list[int] = []
    dropped = {"truncated": 0, "no token": 0}
    for first in batch_starts(len(texts), batch_size, "layer features", "text"):
        chunk = texts[first : first + batch_size]
        encoded = backend.encode_batch([t.text for t in chunk], add_special_tokens=True)
        ids = [list(e.ids) for e in encoded]
        offsets = [[tuple(o) for o in e.offsets] for e in encoded]
        if limit is not None:
            # keep the final special token ([SEP]) so a cut row still looks like a row
            ids = [r if len(r) <= limit else [*r[: limit - 1], r[-1]] for r in ids]
            offsets = [o if len(o) <= limit else [*o[: limit - 1], (0, 0)] for o in offsets]
        length = max(len(r) for r in ids)
        batch = torch.full((len(ids), length), pad_id, dtype=torch.long)
        mask = torch.zeros((len(ids), length), dtype=torch.long)
        for i, row in enumerate(ids):
            batch[i, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[i, : len(row)] = 1
        batch, mask = batch.to(device), mask.to(device)
        out = encoder(
            batch,
            attention_mask=mask,
            token_type_ids=torch.zeros_like(batch),
            output_hidden_states=True,
        )
        hidden = torch.stack(list(out.hidden_states), dim=1).float().cpu()  # (B, R, L, D)
        for i, item in enumerate(chunk):
            full = len(encoded[i].ids)
            for (start, end), label in zip(item.spans, item.labels, strict=True):
                pieces = _covering(offsets[i], start, end)
                if not pieces:
                    kept_all = limit is None or full <= limit
                    dropped["no token" if kept_all else "truncated"] += 1
                    continue
                states = hidden[i, :, pieces, :]  # (R, P, D)
                rows.append(states[:, 0] if pooling == "first" else states.mean(dim=1))
                labels.append(label)
                types.append(item.text[start:end].lower())
                groups.append(first + i)
    dropped = {k: v for k, v in dropped.items() if v}
    if dropped:
        logger.info("layer features: spans left out: %s", dropped)
    if not rows:
        raise ValueError(
            f"no labelled span has a token (left out: {dropped or 'none'}); check the texts "
            "and that the tokenizer is the model's"
        )
    return SpanFeatures(
        torch.stack(rows), labels, types, torch.tensor(groups, dtype=torch.long), dropped
    )
