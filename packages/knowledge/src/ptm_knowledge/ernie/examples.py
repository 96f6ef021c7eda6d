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

Every step is linear in the corpus size: a corpus line of one huge sentence costs no
more than the same text split into many lines.

This in-memory builder is for small corpora and is the reference of the training path:
the ERNIE families' plans (:mod:`ptm_knowledge.ernie.plans`) read a prepared linked
corpus instead (:mod:`ptm_knowledge.ernie.prepared`) and build the same rows per index
(:class:`~ptm_knowledge.ernie.knowledge_store.KnowledgeRows`); tests check that both give
identical batches.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ptm_core.data.segments import build_segment_pair_examples, build_single_segment_examples
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer
from ptm_core.tokenization import VocabInfo
from ptm_knowledge.ernie.phrases import PhraseExtractor
from ptm_knowledge.linking.alignment import (
    NO_ENTITY,
    align_mentions_to_pieces,
    mention_piece_spans,
)
from ptm_knowledge.linking.corpus import LinkedDocument

logger = logging.getLogger(__name__)

# Stand-in ids for [CLS] and [SEP] while rows hold global positions (never >= 0).
_CLS, _SEP = -2, -3
_POSITION_VOCAB = VocabInfo(
    vocab_size=0, pad_id=-1, unk_id=-4, cls_id=_CLS, sep_id=_SEP, mask_id=-5
)


def knowledge_units(
    offsets: Sequence[tuple[int, int]],
    phrase_spans: Sequence[tuple[int, int]],
    entity_spans: Sequence[tuple[int, int]],
    next_unit: int,
) -> tuple[dict[str, list[int]], int]:
    """ERNIE-Baidu's masking units of one sentence: a unit id per piece, ``-1`` for none.

    Each phrase (of at least two pieces) and each entity mention becomes a unit over the
    pieces its characters cover; of overlapping spans of one kind the first is kept.

    Args:
        offsets: character span of each piece.
        phrase_spans: character spans of the phrases.
        entity_spans: character spans of the mentions.
        next_unit: the first unit id to give.

    Returns:
        ``{"phrase_units": ..., "entity_units": ...}`` and the next free unit id.
    """
    per_token = {key: [-1] * len(offsets) for key in ("phrase_units", "entity_units")}
    for key, spans in (("phrase_units", phrase_spans), ("entity_units", entity_spans)):
        for first, last in mention_piece_spans(offsets, spans):
            if last - first < 2 and key == "phrase_units":
                continue  # a one-piece phrase is a basic unit
            if any(u != -1 for u in per_token[key][first:last]):
                continue  # overlapping spans: keep the first
            per_token[key][first:last] = [next_unit] * (last - first)
            next_unit += 1
    return per_token, next_unit


def annotate_documents(
    documents: Sequence[LinkedDocument],
    tokenizer: TaskTokenizer,
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
        # One pass over the document's mentions (``sentence_mentions`` per sentence would
        # rescan them all for every sentence: quadratic in a long document).
        by_sentence: list[list[tuple[int, int, str]]] = [[] for _ in doc.sentences]
        for m in doc.mentions:
            if 0 <= m.sentence < len(by_sentence):  # as sentence_mentions: others unused
                by_sentence[m.sentence].append((m.start, m.end, m.entity_id))
        doc_positions: list[list[int]] = []
        for index, text in enumerate(doc.sentences):
            enc = encodings[k]
            k += 1
            # Drop [CLS]/[SEP]: the row builder adds its own.
            body = [i for i, s in enumerate(enc.special_tokens_mask) if not s]
            offsets = [enc.offsets[i] for i in body]
            mentions = by_sentence[index]
            per_token, next_unit = knowledge_units(
                offsets,
                phrases.phrase_spans(text) if phrases is not None else [],
                [(s, e) for s, e, _ in mentions],
                next_unit,
            )
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


@dataclass(frozen=True)
class MentionCoverage:
    """How many linked mentions reach the rows (ERNIE-THU's token-entity alignment).

    Attributes:
        mentions: mentions in the linked corpus.
        known: mentions whose entity is in ``entity_index`` (has a KG embedding).
        aligned: word pieces carrying an entity after alignment (a mention that covers
            no piece, or shares its first piece with another mention, is lost here).
        in_rows: of those pieces, the ones that made it into at least one row (the rest
            were cut by truncation or left out by the row builder).
    """

    mentions: int
    known: int
    aligned: int
    in_rows: int

    def describe(self) -> str:
        """One line of counts for logs and error messages."""
        return (
            f"{self.mentions:,} linked mentions, {self.known:,} with an entity in the KG "
            f"embeddings, {self.aligned:,} aligned to a word piece, {self.in_rows:,} in "
            "training rows"
        )


class KnowledgeExamples(list[dict[str, Any]]):
    """The rows of :func:`build_knowledge_examples` (a plain list) plus their
    :class:`MentionCoverage` (``None`` without an ``entity_index``)."""

    coverage: MentionCoverage | None = None


# Below this share of linked mentions reaching the rows, ERNIE-THU warns (dEA and the
# aggregators see little knowledge); at zero it refuses to train.
MIN_MENTION_FRACTION = 0.1


def check_mention_coverage(
    coverage: MentionCoverage,
    *,
    entity_source: str | Path | None = None,
    max_length: int | None = None,
    min_fraction: float = MIN_MENTION_FRACTION,
) -> None:
    """Refuse a linked corpus none of whose mentions reach ERNIE-THU's rows; warn on few.

    Without aligned entities the dEA loss is a constant 0.0 and the aggregators see no
    knowledge: a run would look healthy and learn plain BERT. The counts say where the
    mentions were lost, and the message names the likely cause.

    Args:
        coverage: the counts from :func:`build_knowledge_examples`.
        entity_source: where the KG embeddings came from (a directory, or a note such
            as "TransE on <kg>"), for the message.
        max_length: the row length, for the message.
        min_fraction: share of mentions in rows below which a warning is logged.

    Raises:
        ValueError: no mention of the corpus is in any training row.
    """
    source = f"the KG embeddings ({entity_source})" if entity_source else "the KG embeddings"
    counts = coverage.describe()
    if coverage.mentions == 0:
        cause = (
            "the linked corpus has no mentions: link it against the KG first "
            "(ptm link --kg <kg>), and check that the KG's names occur in the text"
        )
    elif coverage.known == 0:
        cause = (
            f"0 of {coverage.mentions:,} linked mentions have an entity in {source}: the "
            "linked corpus and the KG embeddings were made from different KGs; re-run "
            "ptm link / ptm embed-kg with the same --kg (or set data.kg to the KG the "
            "corpus was linked with)"
        )
    elif coverage.aligned == 0:
        cause = (
            f"none of the {coverage.known:,} known mentions covers a word piece: the mention "
            "offsets do not match the sentences (was the corpus edited after linking?)"
        )
    else:
        cause = (
            f"the {coverage.aligned:,} aligned mentions were all cut from the rows by "
            f"truncation (max_length={max_length}); use longer rows"
        )
    if coverage.in_rows == 0:
        raise ValueError(f"ERNIE-THU would train on no entity: {counts}; {cause}")
    fraction = coverage.in_rows / coverage.mentions
    if fraction < min_fraction:
        worst = min(
            ("known", coverage.known / coverage.mentions),
            ("aligned", coverage.aligned / max(coverage.known, 1)),
            ("in_rows", coverage.in_rows / max(coverage.aligned, 1)),
            key=lambda item: item[1],
        )[0]
        hints = {
            "known": f"most entities are missing from {source} (different KGs?)",
            "aligned": "most mentions cover no word piece (offsets off the text?)",
            "in_rows": f"most aligned mentions were cut by truncation (max_length={max_length})",
        }
        logger.warning(
            "ERNIE-THU: only %.1f%% of the linked mentions reach the training rows (%s): %s",
            100 * fraction,
            counts,
            hints[worst],
        )
    else:
        logger.info("ERNIE-THU: %s", counts)


def _one_row_sentences(documents: list[list[list[int]]], budget: int) -> list[list[list[int]]]:
    """Sentences cut into pieces of at most ``budget`` positions.

    The single-segment builder fills rows from the concatenated sentences of a
    document, so the rows are the same; but it re-slices the rest of a sentence for
    every row, which is quadratic in the length of one huge sentence.
    """
    return [[s[i : i + budget] for s in doc for i in range(0, len(s), budget)] for doc in documents]


def _coverage(
    documents: Sequence[LinkedDocument],
    entity_index: Mapping[str, int],
    table: Mapping[str, list[int]],
    rows: Sequence[Mapping[str, Any]],
) -> MentionCoverage:
    entity_column = table["entity_ids"]
    in_rows = {
        p for row in rows for p in row["input_ids"] if p >= 0 and entity_column[p] != NO_ENTITY
    }
    return MentionCoverage(
        mentions=sum(len(d.mentions) for d in documents),
        known=sum(m.entity_id in entity_index for d in documents for m in d.mentions),
        aligned=sum(e != NO_ENTITY for e in entity_column),
        in_rows=len(in_rows),
    )


def build_knowledge_examples(
    documents: Sequence[LinkedDocument],
    tokenizer: TaskTokenizer,
    max_length: int,
    *,
    phrases: PhraseExtractor | None = None,
    entity_index: Mapping[str, int] | None = None,
    segment_pairs: bool = False,
    rng: random.Random | None = None,
    random_next_prob: float = 0.5,
    short_seq_prob: float = 0.1,
) -> KnowledgeExamples:
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

    Returns:
        The rows (a list); with ``entity_index``, ``.coverage`` counts the mentions that
        reach them (:class:`MentionCoverage`).
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
        rows = build_single_segment_examples(
            _one_row_sentences(position_docs, max(max_length - 2, 1)),
            _POSITION_VOCAB,
            max_length,
        )
    keys = ["phrase_units", "entity_units", "entity_ids"]
    examples = KnowledgeExamples(
        _materialise(row, table, tokenizer.vocab_info, keys) for row in rows
    )
    if entity_index is not None:
        examples.coverage = _coverage(documents, entity_index, table, rows)
    return examples
