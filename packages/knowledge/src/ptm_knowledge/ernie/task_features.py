"""ERNIE-THU fine-tuning, data side: linked rows -> batches with token-aligned entities."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import torch

from ptm_core.finetune.data.features import Batch, pad_rows
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer
from ptm_knowledge.ernie.task_links import (
    LinkedExample,
)
from ptm_knowledge.linking.alignment import NO_ENTITY, align_mentions_to_pieces


class ErnieFeaturizer:
    """BERT sentence (pair) inputs plus one entity index per word piece (ERNIE-THU).

    The text is encoded as :class:`~ptm_core.finetune.data.SentenceFeaturizer` encodes it;
    each mention's entity goes on the first piece of its mention
    (:func:`~ptm_knowledge.linking.align_mentions_to_pieces`); mentions of entities
    outside ``entity_index`` are dropped.

    Args:
        tokenizer: the model's tokenizer.
        entity_index: entity id -> row of the model's KG embedding table.
        max_length: longest row, specials included.
        kind: ``classification`` (long labels) or ``regression`` (float labels).

    Returns (of :meth:`featurize`):
        ``input_ids``, ``attention_mask``, ``token_type_ids``, ``entity_ids`` (``-1`` =
        none): ``(B, L)``; ``labels`` ``(B,)`` when the examples have labels.
    """

    def __init__(
        self,
        tokenizer: TaskTokenizer,
        entity_index: Mapping[str, int],
        max_length: int = 128,
        *,
        kind: Literal["classification", "regression"] = "classification",
    ) -> None:
        self.tokenizer = tokenizer
        self.entity_index = dict(entity_index)
        self.max_length = max_length
        self.kind = kind

    def featurize(self, rows: Sequence[LinkedExample]) -> Batch:
        """One batch from ``rows`` (all single sentences or all pairs)."""
        examples = [row.example for row in rows]
        has_pair = [e.pair is not None for e in examples]
        if any(has_pair) and not all(has_pair):
            raise ValueError("a batch mixes single sentences and sentence pairs; use one kind")
        encoded = self.tokenizer.encode_batch(
            [e.text for e in examples],
            [e.pair or "" for e in examples] if all(has_pair) else None,
            max_length=self.max_length,
        )
        entity_rows = []
        for row, enc in zip(rows, encoded, strict=True):
            ids = [NO_ENTITY] * len(enc)
            texts = _text_of_token(enc.special_tokens_mask)
            for segment, spans in ((0, row.mentions), (1, row.pair_mentions)):
                outside = [
                    int(special or text != segment)
                    for special, text in zip(enc.special_tokens_mask, texts, strict=True)
                ]
                aligned = align_mentions_to_pieces(enc.offsets, spans, self.entity_index, outside)
                ids = [a if a != NO_ENTITY else i for i, a in zip(ids, aligned, strict=True)]
            entity_rows.append(ids)
        batch = {
            "input_ids": pad_rows([e.input_ids for e in encoded], self.tokenizer.vocab_info.pad_id),
            "attention_mask": pad_rows([e.attention_mask for e in encoded], 0),
            "token_type_ids": pad_rows([e.token_type_ids for e in encoded], 0),
            "entity_ids": pad_rows(entity_rows, NO_ENTITY),
        }
        labels = [e.label for e in examples]
        if all(label is not None for label in labels):
            dtype = torch.float32 if self.kind == "regression" else torch.long
            batch["labels"] = torch.tensor(labels, dtype=dtype)
        elif any(label is not None for label in labels):
            line = next(e.line for e in examples if e.label is None)
            raise ValueError(
                f"ErnieFeaturizer: the example on line {line} has no label but others in the "
                "batch do; label every example, or none (a file to predict on)"
            )
        return batch


def _text_of_token(special_tokens_mask: Sequence[int]) -> list[int]:
    """Which text (0 or 1) each token belongs to, counted by the runs of specials between
    them: token types cannot tell, as RoBERTa's ``<s> a </s></s> b </s>`` has one type."""
    text, out, seen_text, after_gap = 0, [], False, False
    for special in special_tokens_mask:
        if special:
            after_gap = seen_text
        else:
            if after_gap:
                text, after_gap = text + 1, False
            seen_text = True
        out.append(text)
    return out


__all__ = [
    "ErnieFeaturizer",
]
