"""Featurizers: a list of examples in, one padded batch of tensors out.

Each featurizer tokenizes only the examples of the batch it is asked for (the fast
`tokenizers` backend encodes a batch of 32 sentences in well under a millisecond), so no
dataset is ever held as tensors. Rows are padded to the batch's longest row (dynamic
padding). Batch keys follow the fine-tuning contract: ``input_ids``, ``attention_mask``,
``token_type_ids`` (``(B, L)``, or ``(B, C, L)`` for multiple choice) and ``labels``.
Extractive QA, whose unit is a window of a context rather than an example, is in
:mod:`ptm_core.finetune.data.qa`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

import torch
from torch import Tensor

from ptm_core.finetune.data.examples import ChoiceExample, SentenceExample, TaggedExample
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer, num_special_tokens

Batch = dict[str, Tensor]
IGNORE_INDEX = -100


class Featurizer(Protocol):
    """Turns rows (examples, or QA windows) into one padded batch."""

    def featurize(self, rows: Sequence[Any]) -> Batch: ...


def pad_rows(rows: Sequence[Sequence[int]], value: int, length: int | None = None) -> Tensor:
    """``(N, L)`` long tensor of ``rows`` right-padded with ``value`` to ``length`` (default:
    the longest row)."""
    width = max((len(row) for row in rows), default=0) if length is None else length
    return torch.tensor([[*row, *([value] * (width - len(row)))] for row in rows], dtype=torch.long)


def _check_max_length(max_length: int, least: int) -> None:
    if max_length < least:
        raise ValueError(f"max_length={max_length} leaves no room for text; use at least {least}")


def _labels(examples: Sequence[Any], what: str) -> list[Any] | None:
    """The examples' labels, ``None`` when none has one; mixing is an error."""
    labels = [example.label for example in examples]
    missing = sum(label is None for label in labels)
    if missing == len(labels):
        return None
    if missing:
        line = next(e.line for e in examples if e.label is None)
        raise ValueError(
            f"{what}: the example on line {line} has no label but others in the batch do; "
            "label every example, or none (a file to predict on)"
        )
    return labels


class SentenceFeaturizer:
    """Single-sentence or sentence-pair inputs for classification and regression (BERT's
    ``[CLS] a [SEP] b [SEP]``; Devlin et al., 2019, section 4.1; other tokenizers put
    their own specials, e.g. RoBERTa's ``<s> a </s></s> b </s>``).

    Args:
        tokenizer: the model's tokenizer (any :class:`TaskTokenizer`).
        max_length: longest row, specials included; longer pairs lose tokens from the
            longer sentence first (``longest_first``, as BERT and HF).
        kind: ``classification`` (long labels) or ``regression`` (float32 labels).

    Returns (of :meth:`featurize`):
        ``input_ids``, ``attention_mask``, ``token_type_ids``: ``(B, L)``; ``labels``:
        ``(B,)`` when the examples have labels.
    """

    def __init__(
        self,
        tokenizer: TaskTokenizer,
        max_length: int = 128,
        *,
        kind: Literal["classification", "regression"] = "classification",
    ) -> None:
        _check_max_length(max_length, 3)
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.kind = kind

    def featurize(self, rows: Sequence[SentenceExample]) -> Batch:
        """One batch from ``rows`` (all single sentences or all pairs)."""
        pairs = [example.pair for example in rows]
        has_pair = [pair is not None for pair in pairs]
        if any(has_pair) and not all(has_pair):
            raise ValueError("a batch mixes single sentences and sentence pairs; use one kind")
        encoded = self.tokenizer.encode_batch(
            [example.text for example in rows],
            [p or "" for p in pairs] if all(has_pair) else None,
            max_length=self.max_length,
        )
        batch = {
            "input_ids": pad_rows([e.input_ids for e in encoded], self.tokenizer.vocab_info.pad_id),
            "attention_mask": pad_rows([e.attention_mask for e in encoded], 0),
            "token_type_ids": pad_rows([e.token_type_ids for e in encoded], 0),
        }
        labels = _labels(rows, "SentenceFeaturizer")
        if labels is not None:
            dtype = torch.float32 if self.kind == "regression" else torch.long
            batch["labels"] = torch.tensor(labels, dtype=dtype)
        return batch


class TaggingFeaturizer:
    """Word-level tags on word pieces (BERT's NER setup, Devlin et al., 2019, section 5.3).

    Words are split into pieces with the backend's pre-tokenized mode (``word_ids`` say
    which word each piece came from; as ``transformers``' ``is_split_into_words``); each
    word's tag goes on its first piece and every other position gets ``-100`` (no loss):
    continuation pieces, the specials (``[CLS]``/``[SEP]``, ``<s>``/``</s>``, ...) and
    padding. Rows longer than ``max_length`` are cut; the words that lose their first
    piece then have no label (:meth:`truncated_words` counts them).

    Args:
        tokenizer: the model's tokenizer.
        max_length: longest row, specials included.

    Returns (of :meth:`featurize`):
        ``input_ids``, ``attention_mask``, ``token_type_ids``: ``(B, L)``; ``labels``
        ``(B, L)`` when the examples have tags.
    """

    def __init__(self, tokenizer: TaskTokenizer, max_length: int = 128) -> None:
        _check_max_length(max_length, 3)
        self.tokenizer = tokenizer
        self.max_length = max_length

    def encode(self, rows: Sequence[TaggedExample]) -> list[tuple[list[int], list[int], int]]:
        """Per example: ``(input_ids, labels, words without a label)``; labels are tag
        indices at first pieces and -100 elsewhere (all -100 when the example has no tags)."""
        backend = self.tokenizer.backend
        encodings = backend.encode_batch(
            [list(example.words) for example in rows],
            is_pretokenized=True,
            add_special_tokens=False,
        )
        room = self.max_length - num_special_tokens(self.tokenizer, pair=False)
        out = []
        for example, encoding in zip(rows, encodings, strict=True):
            ids = list(encoding.ids)[:room]
            word_ids = list(encoding.word_ids)[:room]
            labels = [IGNORE_INDEX] * len(ids)
            previous = None
            labelled = 0
            for position, word in enumerate(word_ids):
                if word is not None and word != previous:
                    labelled += 1
                    if example.tags is not None:
                        labels[position] = example.tags[word]
                previous = word
            input_ids, _types, special = self.tokenizer.build_inputs(ids)
            pieces = iter(labels)
            row_labels = [IGNORE_INDEX if flag else next(pieces) for flag in special]
            out.append((input_ids, row_labels, len(example.words) - labelled))
        return out

    def featurize(self, rows: Sequence[TaggedExample]) -> Batch:
        """One batch from ``rows``."""
        encoded = self.encode(rows)
        ids = [input_ids for input_ids, _, _ in encoded]
        batch = {
            "input_ids": pad_rows(ids, self.tokenizer.vocab_info.pad_id),
            "attention_mask": pad_rows([[1] * len(row) for row in ids], 0),
            "token_type_ids": pad_rows([[0] * len(row) for row in ids], 0),
        }
        tagged = [example.tags is not None for example in rows]
        if any(tagged):
            if not all(tagged):
                raise ValueError("a batch mixes tagged and untagged sentences; tag all or none")
            batch["labels"] = pad_rows([labels for _, labels, _ in encoded], IGNORE_INDEX)
        return batch

    def truncated_words(self, rows: Sequence[TaggedExample], chunk: int = 1024) -> int:
        """How many words of ``rows`` get no label: cut off by ``max_length``, or made of
        characters the tokenizer drops (e.g. a lone control character)."""
        total = 0
        for start in range(0, len(rows), chunk):
            part = [rows[i] for i in range(start, min(start + chunk, len(rows)))]
            total += sum(cut for _, _, cut in self.encode(part))
        return total


def aligned_tags(
    labels: Tensor, predictions: Tensor, label_names: Sequence[str]
) -> tuple[list[list[str]], list[list[str]]]:
    """Gold and predicted tag names at the labelled positions (each word's first piece),
    the lists seqeval scores.

    Args:
        labels: ``(B, L)`` gold tag indices, -100 where there is none.
        predictions: ``(B, L)`` predicted tag indices (``logits.argmax(-1)``).
        label_names: tag names by index.

    Returns:
        ``(references, predictions)``: per sentence, one tag name per labelled word.
    """
    references: list[list[str]] = []
    predicted: list[list[str]] = []
    for gold_row, pred_row in zip(labels.tolist(), predictions.tolist(), strict=True):
        keep = [i for i, gold in enumerate(gold_row) if gold != IGNORE_INDEX]
        references.append([label_names[gold_row[i]] for i in keep])
        predicted.append([label_names[pred_row[i]] for i in keep])
    return references, predicted


class ChoiceFeaturizer:
    """Multiple-choice inputs (BERT on SWAG, Devlin et al., 2019, section 4.4): for each
    ending, ``[CLS] context [SEP] start ending [SEP]``; the head scores each row and a
    softmax runs over the choices.

    Args:
        tokenizer: the model's tokenizer.
        max_length: longest row, specials included.

    Returns (of :meth:`featurize`):
        ``input_ids``, ``attention_mask``, ``token_type_ids``: ``(B, C, L)``; ``labels``
        ``(B,)`` when the examples have labels.
    """

    def __init__(self, tokenizer: TaskTokenizer, max_length: int = 128) -> None:
        _check_max_length(max_length, 3)
        self.tokenizer = tokenizer
        self.max_length = max_length

    def featurize(self, rows: Sequence[ChoiceExample]) -> Batch:
        """One batch from ``rows`` (all with the same number of endings)."""
        choices = {len(example.endings) for example in rows}
        if len(choices) != 1:
            raise ValueError(
                f"a batch mixes examples with {sorted(choices)} endings; give every example "
                "the same number of endings"
            )
        (count,) = choices
        firsts = [example.context for example in rows for _ in range(count)]
        seconds = [
            f"{example.start} {ending}".strip() for example in rows for ending in example.endings
        ]
        encoded = self.tokenizer.encode_batch(firsts, seconds, max_length=self.max_length)
        shape = (len(rows), count, -1)
        batch = {
            "input_ids": pad_rows([e.input_ids for e in encoded], self.tokenizer.vocab_info.pad_id),
            "attention_mask": pad_rows([e.attention_mask for e in encoded], 0),
            "token_type_ids": pad_rows([e.token_type_ids for e in encoded], 0),
        }
        batch = {key: value.reshape(shape) for key, value in batch.items()}
        labels = _labels(rows, "ChoiceFeaturizer")
        if labels is not None:
            batch["labels"] = torch.tensor(labels, dtype=torch.long)
        return batch


__all__ = [
    "IGNORE_INDEX",
    "ChoiceFeaturizer",
    "Featurizer",
    "SentenceFeaturizer",
    "TaggingFeaturizer",
    "aligned_tags",
    "pad_rows",
]
