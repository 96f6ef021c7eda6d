"""Turn tokenised documents into pre-training examples (segment pairs or single segments)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from ptm_core.tokenization import VocabInfo

# A document as lists of word-piece ids, one list per sentence.
TokenizedDocument = Sequence[Sequence[int]]
Example = dict[str, Any]


def _encode_pair(a: list[int], b: list[int] | None, vocab: VocabInfo) -> Example:
    ids = [vocab.cls_id, *a, vocab.sep_id]
    types = [0] * len(ids)
    if b is not None:
        ids += [*b, vocab.sep_id]
        types += [1] * (len(b) + 1)
    special = [0] * len(ids)
    special[0] = 1
    special[len(a) + 1] = 1
    special[-1] = 1
    return {"input_ids": ids, "token_type_ids": types, "special_tokens_mask": special}


def truncate_pair(a: list[int], b: list[int], max_tokens: int, rng: random.Random) -> None:
    """Trim the longer segment, one token at a time from a random end, in place (BERT).

    The same random draws as trimming token by token (so seeded results do not change),
    but only the counts move in the loop and each list is cut once: O(len(a) + len(b)),
    where deleting from the front one token at a time was quadratic on a long sentence.
    """
    length_a, length_b = len(a), len(b)
    cut = [[0, 0], [0, 0]]  # per segment: tokens from the front, from the back
    while length_a + length_b > max_tokens:
        side = 0 if length_a > length_b else 1
        cut[side][0 if rng.random() < 0.5 else 1] += 1
        if side == 0:
            length_a -= 1
        else:
            length_b -= 1
    for segment, (front, back) in ((a, cut[0]), (b, cut[1])):
        if back:
            del segment[len(segment) - back :]
        if front:
            del segment[:front]


def build_segment_pair_examples(
    documents: Sequence[TokenizedDocument],
    vocab: VocabInfo,
    max_length: int,
    rng: random.Random,
    *,
    random_next_prob: float = 0.5,
    short_seq_prob: float = 0.1,
) -> list[Example]:
    """Cut documents into ``[CLS] A [SEP] B [SEP]`` pairs for NSP (Devlin et al., 2019).

    Follows Google's ``create_instances_from_document``: sentences are accumulated into a
    chunk up to a target length (shorter with probability ``short_seq_prob``), A is the
    first ``a_end`` sentences, B the rest. One change makes the label rate exact: the
    label is drawn first, with probability ``random_next_prob`` of "random". The reference
    forces "random" whenever a chunk holds a single sentence, which pushes the negative
    rate above one half; here a true pair is completed by the next sentence or, at a
    document's end, by splitting the sentence at a random token. Random B segments start
    at a random sentence of a *different* document, and the sentences of the chunk not
    used as A go back to be used again.

    Args:
        documents: tokenised documents (sentences of word-piece ids, no special tokens).
        vocab: special ids.
        max_length: total length including ``[CLS]`` and two ``[SEP]``.
        rng: seeded random source.
        random_next_prob: probability of a random B.
        short_seq_prob: probability of a target length drawn from ``[2, max_length - 3]``.

    Returns:
        Examples with ``input_ids``, ``token_type_ids``, ``special_tokens_mask``,
        ``next_sentence_label`` (1 = random B) and ``meta_documents`` ``(a_doc, b_doc)``.

    Raises:
        ValueError: fewer than two non-empty documents while negatives are requested, or
            ``max_length`` too small.
    """
    if max_length < 5:
        raise ValueError(f"max_length must be at least 5 for a segment pair, got {max_length}")
    docs = [[list(s) for s in doc if len(s)] for doc in documents]
    non_empty = [i for i, d in enumerate(docs) if d]
    if random_next_prob > 0 and len(non_empty) < 2:
        raise ValueError(
            "next-sentence prediction needs at least two non-empty documents for its random "
            f"segments, got {len(non_empty)}; separate documents with a blank line"
        )
    max_tokens = max_length - 3
    examples: list[Example] = []
    for doc_index in non_empty:
        document = docs[doc_index]
        target = max_tokens
        if rng.random() < short_seq_prob:
            target = rng.randint(2, max_tokens)
        chunk: list[list[int]] = []
        length = 0
        is_random = False
        i = 0
        while i < len(document):
            if not chunk:
                is_random = rng.random() < random_next_prob  # one label per chunk
            chunk.append(document[i])
            length += len(document[i])
            at_end = i == len(document) - 1
            need_more = not is_random and len(chunk) < 2 and not at_end
            if (at_end or length >= target) and not need_more:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                a = [t for s in chunk[:a_end] for t in s]
                if is_random:
                    other = rng.randrange(len(non_empty) - 1)
                    other_index = non_empty[other + (non_empty[other] >= doc_index)]
                    other_doc = docs[other_index]
                    b: list[int] = []
                    for sentence in other_doc[rng.randrange(len(other_doc)) :]:
                        b.extend(sentence)
                        if len(b) >= max(target - len(a), 1):
                            break
                    i -= len(chunk) - a_end  # unused sentences are used again
                    b_doc = other_index
                elif len(chunk) >= 2:
                    b = [t for s in chunk[a_end:] for t in s]
                    b_doc = doc_index
                else:
                    sentence = chunk[0]
                    if len(sentence) < 2:
                        chunk, length = [], 0
                        i += 1
                        continue
                    cut = rng.randint(1, len(sentence) - 1)
                    a, b, b_doc = sentence[:cut], sentence[cut:], doc_index
                truncate_pair(a, b, max_tokens, rng)
                if a and b:
                    example = _encode_pair(a, b, vocab)
                    example["next_sentence_label"] = int(is_random)
                    example["meta_documents"] = (doc_index, b_doc)
                    examples.append(example)
                chunk, length = [], 0
                if target != max_tokens and rng.random() >= short_seq_prob:
                    target = max_tokens
            i += 1
    return examples


def build_single_segment_examples(
    documents: Sequence[TokenizedDocument],
    vocab: VocabInfo,
    max_length: int,
) -> list[Example]:
    """Pack consecutive sentences of each document into ``[CLS] tokens [SEP]`` rows.

    RoBERTa's DOC-SENTENCES layout: full rows that never cross a document boundary; a
    sentence longer than a row is split across rows.

    Args:
        documents: tokenised documents.
        vocab: special ids.
        max_length: row length including ``[CLS]`` and ``[SEP]``.

    Returns:
        Examples with ``input_ids``, ``token_type_ids``, ``special_tokens_mask``.
    """
    if max_length < 3:
        raise ValueError(f"max_length must be at least 3, got {max_length}")
    budget = max_length - 2
    examples: list[Example] = []
    for document in documents:
        row: list[int] = []
        for sentence in document:
            start = 0  # an offset, not `tokens = tokens[space:]`: a long sentence stays O(n)
            while start < len(sentence):
                space = budget - len(row)
                row.extend(sentence[start : start + space])
                start += space
                if len(row) == budget:
                    examples.append(_encode_pair(row, None, vocab))
                    row = []
        if row:
            examples.append(_encode_pair(row, None, vocab))
    return examples
