"""Sequence packing: several short examples in one row, so padding costs nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Example = dict[str, Any]

# Per-token keys carried over from the examples into the packed rows.
PACKED_KEYS = (
    "input_ids",
    "token_type_ids",
    "special_tokens_mask",
    "mlm_labels",
    "sentence_starts",
)


def pack_examples(examples: Sequence[Example], max_length: int) -> list[Example]:
    """Concatenate consecutive examples into rows of at most ``max_length`` tokens.

    Each packed row carries ``position_ids`` that restart at 0 for every example and
    ``document_ids`` (0, 1, 2, ... per example in the row); the batch builder turns the
    latter into a block-diagonal ``[B, L, L]`` attention mask, so every example sees
    exactly its own tokens, as if it were alone in a padded row (the outputs are equal:
    ``tests/core/data/test_packing.py``). Examples longer than ``max_length`` are an error.

    Args:
        examples: single-segment (or pair) examples with ``input_ids`` and optional
            ``token_type_ids``, ``special_tokens_mask``, ``mlm_labels``.
        max_length: row length.

    Returns:
        Packed examples; keys starting with ``meta_`` and per-example scalars are dropped
        (sentence-level labels cannot be packed).
    """
    rows: list[Example] = []
    current: Example = {}

    def flush() -> None:
        if current.get("input_ids"):
            rows.append(dict(current))
        current.clear()

    for example in examples:
        length = len(example["input_ids"])
        if length > max_length:
            raise ValueError(
                f"an example of {length} tokens does not fit a packed row of {max_length}"
            )
        if current and len(current["input_ids"]) + length > max_length:
            flush()
        if not current:
            current.update({key: [] for key in PACKED_KEYS if key in example})
            current["position_ids"], current["document_ids"] = [], []
            current["_count"] = 0
        for key in PACKED_KEYS:
            if key in current:
                current[key].extend(example[key])
        current["position_ids"].extend(range(length))
        current["document_ids"].extend([current["_count"]] * length)
        current["_count"] += 1
    flush()
    for row in rows:
        row.pop("_count", None)
    return rows
