"""Pre-training rows from a linked corpus, carrying per-token knowledge annotations.

Rows are laid out by ptm-core's own builders (single segments, or NSP segment pairs):
each word piece of the corpus is replaced by its global position, the core builder
arranges (and truncates) positions exactly as it would arrange token ids, and the
positions are mapped back to token ids and to the per-token annotations:

* ``phrase_units`` / ``entity_units``: row-local unit ids for ERNIE-Baidu masking (``-1``
  none); a unit cut by a row boundary or by truncation is dropped (its pieces become
  single units), so no row ever holds part of a unit;
* ``entity_ids``: the ERNIE-THU alignment, the entity index on the first piece of each
  mention and ``-1`` elsewhere.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from ptm_core.data.segments import build_segment_pair_examples, build_single_segment_examples
from ptm_core.tokenization import VocabInfo, WordPieceTokenizer
from ptm_knowledge.ernie.phrases import PhraseExtractor
from ptm_knowledge.linking.alignment import (
    NO_ENTITY,
    align_mentions_to_pieces,
    mention_piece_spans,
)
from ptm_knowledge.linking.corpus import LinkedDocument

# Stand-in ids for [CLS] and [SEP] while rows hold global positions (never >= 0).
_CLS, _SEP = -2, -3
_POSITION_VOCAB = VocabInfo(
    vocab_size=0, pad_id=-1, unk_id=-4, cls_id=_CLS, sep_id=_SEP, mask_id=-5
)


def annotate_documents(
    documents: Sequence[LinkedDocument],
    tokenizer: WordPieceTokenizer,
    *,
    phrases: PhraseExtractor | None = None,
    entity_index: Mapping[str, int] | None = None,
) -> tuple[list[list[list[int]]], dict[str, list[int]]]:
    """Tokenise every sentence and annotate its pieces.

    Returns:
        ``(position_documents, annotations)``: documents as lists of sentences of global
        piece positions, and per-position lists ``token_ids``, ``phrase_units``,
        ``entity_units`` (global unit ids) and ``entity_ids`` (-1 none).
    """
    sentences = [s for d in documents for s in d.sentences]
    encodings = tokenizer.encode_batch(sentences) if sentences else []
    table: dict[str, list[int]] = {
        "token_ids": [],
        "phrase_units": [],
        "entity_units": [],
        "entity_ids": [],
    }
    next_unit = 0
    out: list[list[list[int]]] = []
    k = 0
    for doc in documents:
        doc_positions: list[list[int]] = []
        for index, text in enumerate(doc.sentences):
            enc = encodings[k]
            k += 1
            # Drop [CLS]/[SEP]: the row builder adds its own.
            body = [i for i, s in enumerate(enc.special_tokens_mask) if not s]
            offsets = [enc.offsets[i] for i in body]
            mentions = doc.sentence_mentions(index)
            per_token = {
                "phrase_units": [-1] * len(body),
                "entity_units": [-1] * len(body),
            }
            span_sets = {
                "phrase_units": phrases.phrase_spans(text) if phrases is not None else [],
                "entity_units": [(s, e) for s, e, _ in mentions],
            }
            for key, spans in span_sets.items():
                for first, last in mention_piece_spans(offsets, spans):
                    if last - first < 2 and key == "phrase_units":
                        continue  # a one-piece phrase is a basic unit
                    if any(u != -1 for u in per_token[key][first:last]):
                        continue  # overlapping spans: keep the first
                    per_token[key][first:last] = [next_unit] * (last - first)
                    next_unit += 1
            entity_ids = (
                align_mentions_to_pieces(offsets, mentions, entity_index)
                if entity_index is not None
                else [NO_ENTITY] * len(body)
            )
            start = len(table["token_ids"])
            table["token_ids"].extend(enc.input_ids[i] for i in body)
            table["phrase_units"].extend(per_token["phrase_units"])
            table["entity_units"].extend(per_token["entity_units"])
            table["entity_ids"].extend(entity_ids)
            doc_positions.append(list(range(start, start + len(body))))
        out.append(doc_positions)
    return out, table


def _materialise(
    row: dict[str, Any], table: Mapping[str, list[int]], vocab: VocabInfo, keys: Sequence[str]
) -> dict[str, Any]:
    positions = row["input_ids"]
    real = {_CLS: vocab.cls_id, _SEP: vocab.sep_id}
    example = {k: v for k, v in row.items() if k != "input_ids"}
    example["input_ids"] = [real.get(p, table["token_ids"][p] if p >= 0 else p) for p in positions]
    for key in keys:
        values = [table[key][p] if p >= 0 else -1 for p in positions]
        if key.endswith("_units"):
            values = _whole_units_only(values, positions, table[key])
        example[key] = values
    return example


def _whole_units_only(values: list[int], positions: list[int], column: Sequence[int]) -> list[int]:
    """Row-local unit ids; units not wholly inside the row become -1."""
    present: dict[int, int] = {}
    for v in values:
        if v != -1:
            present[v] = present.get(v, 0) + 1
    size: dict[int, int] = {}
    for unit in present:
        # Unit pieces are contiguous in the global table; count them around the row's copy.
        first = positions[values.index(unit)]
        n = 0
        while first + n < len(column) and column[first + n] == unit:
            n += 1
        back = 1
        while first - back >= 0 and column[first - back] == unit:
            back += 1
        size[unit] = n + back - 1
    local = {u: i for i, u in enumerate(u for u in present if present[u] == size[u])}
    return [local.get(v, -1) if v != -1 else -1 for v in values]


def build_knowledge_examples(
    documents: Sequence[LinkedDocument],
    tokenizer: WordPieceTokenizer,
    max_length: int,
    *,
    phrases: PhraseExtractor | None = None,
    entity_index: Mapping[str, int] | None = None,
    segment_pairs: bool = False,
    rng: random.Random | None = None,
    random_next_prob: float = 0.5,
    short_seq_prob: float = 0.1,
) -> list[dict[str, Any]]:
    """Rows with ``input_ids``, ``token_type_ids``, ``special_tokens_mask`` and annotations.

    Args:
        documents: the linked corpus.
        tokenizer: the word-piece tokenizer.
        max_length: row length including special tokens.
        phrases: phrase extractor for ``phrase_units`` (ERNIE-Baidu).
        entity_index: entity id -> embedding row, for ``entity_ids`` (ERNIE-THU).
        segment_pairs: NSP segment pairs (``next_sentence_label``) instead of single
            segments.
        rng: randomness of the pair builder.
        random_next_prob, short_seq_prob: as :func:`build_segment_pair_examples`.
    """
    position_docs, table = annotate_documents(
        documents, tokenizer, phrases=phrases, entity_index=entity_index
    )
    if segment_pairs:
        rng = rng or random.Random(0)
        rows = build_segment_pair_examples(
            position_docs,
            _POSITION_VOCAB,
            max_length,
            rng,
            random_next_prob=random_next_prob,
            short_seq_prob=short_seq_prob,
        )
    else:
        rows = build_single_segment_examples(position_docs, _POSITION_VOCAB, max_length)
    keys = ["phrase_units", "entity_units", "entity_ids"]
    return [_materialise(row, table, tokenizer.vocab_info, keys) for row in rows]
