"""K-BERT's knowledge layer: sentence tree, soft positions and visible matrix.

Liu et al., 2020, "K-BERT: Enabling Language Representation with Knowledge Graph" (AAAI).
A sentence is turned into a *sentence tree*: each word that names a KG subject carries
branches (its objects, optionally prefixed by the predicate). The tree is flattened as
``word, its branches, next word, ...``; *soft positions* give every branch the positions
that follow its word, and the *visible matrix* stops a branch from influencing any token
outside its own word, so injected knowledge cannot change the meaning of the rest of the
sentence ("knowledge noise").

Differences from the reference code (github.com/autoliuweijie/K-BERT, ``brain/knowgraph.py``):

* branches are taken in the order ``knowledge`` lists them (the original drew them from a
  Python set, so which ``max_entities`` objects survived changed from run to run);
* subjects may span several words (longest match starting at a word wins);
* when the tree is longer than ``max_length``, whole knowledge branches are dropped
  before any sentence token (all sentence units are reserved first, then branches are kept
  in reading order while they fit); the original cut the flattened tree,
  so injected knowledge could push the end of the sentence out. Only when the sentence
  alone is longer than ``max_length`` are sentence tokens cut (from the end).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

PAD = "[PAD]"
CLS = "[CLS]"
SEP = "[SEP]"
# Units that are never split, never looked up in the knowledge and never get branches.
SPECIAL_TOKENS = frozenset({"[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]"})

Splitter = Callable[[str], list[str]]


@dataclass(frozen=True)
class SentenceTree:
    """One flattened sentence tree.

    Attributes:
        tokens: the ``L`` units (word pieces, or whole words with ``split=lambda s: [s]``).
        soft_positions: ``[L]`` long; position ids for the encoder.
        visible_matrix: ``[L, L]`` bool; ``True`` where row token may attend column token.
        is_knowledge: ``[L]`` bool; ``True`` for branch (injected) tokens.
        word_index: ``[L]`` long; index in ``words`` of the word a token belongs to (for a
            branch: the last word of the subject it hangs on; for a multi-word subject's
            trunk units: their own word); ``-1`` for padding.
        segment_ids: ``[L]`` long; 0 up to and including the first ``[SEP]``, then 1
            (branches take their word's segment); 0 for padding.
        num_dropped_branches: branches left out to respect ``max_length``.
        subject: ``[L]`` long; the subject span each token belongs to (-1 on padding).
        branch_id: ``[L]`` long; the branch of each knowledge token (-1 on the trunk and
            padding). With ``is_knowledge`` they are what ``visible_matrix`` is built from
            (:meth:`~ptm_core.modules.attention_structure.AttentionStructure.kbert`).
    """

    tokens: list[str]
    soft_positions: Tensor
    visible_matrix: Tensor
    is_knowledge: Tensor
    word_index: Tensor
    segment_ids: Tensor
    num_dropped_branches: int = 0
    subject: Tensor | None = None
    branch_id: Tensor | None = None

    def __len__(self) -> int:
        return len(self.tokens)


def pair_words(first: Sequence[str], second: Sequence[str] | None = None) -> list[str]:
    """BERT's layout as a word list: ``[CLS] first [SEP]`` or ``[CLS] first [SEP] second [SEP]``."""
    words = [CLS, *first, SEP]
    if second is not None:
        words += [*second, SEP]
    return words


def _match_subjects(
    words: Sequence[str], knowledge: Mapping[str, Sequence[str]]
) -> list[tuple[int, int]]:
    """Greedy left-to-right spans ``[start, end)``; at each word the longest subject wins.

    A table with ``max_subject_words`` (:class:`~ptm_knowledge.kbert.KBertKnowledge`) gives
    the longest subject directly; a plain dict is scanned once per sentence.
    """
    longest = getattr(knowledge, "max_subject_words", None)
    if longest is None:
        longest = max((len(k.split(" ")) for k in knowledge), default=0)
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(words):
        end = i + 1
        if words[i] not in SPECIAL_TOKENS:
            for j in range(min(len(words), i + longest), i, -1):
                if any(w in SPECIAL_TOKENS for w in words[i:j]):
                    continue
                if " ".join(words[i:j]) in knowledge:
                    end = j
                    break
        spans.append((i, end))
        i = end
    return spans


def build_sentence_tree(
    words: Sequence[str],
    knowledge: Mapping[str, Sequence[str]],
    *,
    max_entities: int,
    max_length: int,
    split: Splitter | None = None,
    pad: bool = False,
) -> SentenceTree:
    """Build K-BERT's sentence tree, soft positions and visible matrix.

    Rules (K-BERT paper, section 3, and its reference code):

    * layout: word units, then the word's branches in ``knowledge`` order (at most
      ``max_entities``), then the next word; a subject may span several words, its branches
      follow its last word;
    * soft positions: trunk units count 0, 1, 2, ...; each branch restarts at the last soft
      position of its subject + 1 (so it shares positions with the words that follow);
    * visible matrix: trunk units see every trunk unit and the branches of their own
      subject; a branch unit sees its own branch and its subject's trunk units; every token
      sees itself; ``[PAD]`` sees nothing and nothing sees it.

    Args:
        words: the segmented sentence; special tokens (``[CLS]``, ``[SEP]``, ...) are kept
            whole and never get knowledge. Use :func:`pair_words` for BERT's layout.
        knowledge: subject string (words joined by one space) -> objects in priority order
            (each object a string, a predicate may be prefixed: ``"capital China"``).
        max_entities: at most this many branches per subject.
        max_length: the tree's maximum length; whole branches are dropped first (the
            sentence is reserved, then branches are kept in reading order while they fit),
            sentence units are cut (from the end) only if the sentence
            alone is too long.
        split: turns a word or object into units; required (use
            :func:`wordpiece_splitter` for a tokenizer's word pieces, ``lambda s: [s]`` for
            whole words).
        pad: pad with ``[PAD]`` up to ``max_length``.

    Returns:
        A :class:`SentenceTree` of length ``L <= max_length`` (``== max_length`` with ``pad``).

    Raises:
        ValueError: ``split`` missing, or ``max_entities``/``max_length`` out of range.
    """
    if split is None:
        raise ValueError(
            "build_sentence_tree needs split=: pass wordpiece_splitter(tokenizer) for word "
            "pieces or split=lambda s: [s] to keep whole words"
        )
    if max_entities < 0 or max_length < 1:
        raise ValueError(
            f"max_entities must be >= 0 and max_length >= 1, got {max_entities}, {max_length}"
        )
    spans = _match_subjects(words, knowledge)
    # Per span: trunk units with their word index, and the candidate branches.
    trunk: list[list[tuple[str, int]]] = []
    branches: list[list[list[str]]] = []
    for start, end in spans:
        units = []
        for w in range(start, end):
            pieces = [words[w]] if words[w] in SPECIAL_TOKENS else split(words[w])
            units += [(p, w) for p in pieces]
        trunk.append(units)
        name = " ".join(words[start:end])
        objects = () if words[start] in SPECIAL_TOKENS else knowledge.get(name, ())
        chosen = [split(o) for o in list(objects)[:max_entities]]
        branches.append([b for b in chosen if b])
    # Fit into max_length: sentence units first, then whole branches in reading order.
    budget = max_length
    kept_trunk: list[list[tuple[str, int]]] = []
    for units in trunk:
        kept_trunk.append(units[:budget])
        budget -= len(kept_trunk[-1])
    dropped = 0
    kept_branches: list[list[list[str]]] = []
    for units, spans_branches in zip(kept_trunk, branches, strict=True):
        keep = []
        for branch in spans_branches:
            if units and len(branch) <= budget:
                keep.append(branch)
                budget -= len(branch)
            else:
                dropped += 1
        kept_branches.append(keep)
    # Flatten. branch_id: -1 on the trunk; subject: which span a token belongs to.
    tokens: list[str] = []
    positions: list[int] = []
    word_index: list[int] = []
    subject: list[int] = []
    branch_id: list[int] = []
    next_position = 0
    n_branches = 0
    for span_id, (units, span_branches) in enumerate(zip(kept_trunk, kept_branches, strict=True)):
        for unit, w in units:
            tokens.append(unit)
            positions.append(next_position)
            word_index.append(w)
            subject.append(span_id)
            branch_id.append(-1)
            next_position += 1
        for branch in span_branches:
            for offset, unit in enumerate(branch):
                tokens.append(unit)
                positions.append(next_position + offset)  # last trunk position + 1 + offset
                word_index.append(units[-1][1])
                subject.append(span_id)
                branch_id.append(n_branches)
            n_branches += 1
    real = len(tokens)
    if pad and real < max_length:
        extra = max_length - real
        tokens += [PAD] * extra
        positions += [0] * extra
        word_index += [-1] * extra
        subject += [-1] * extra
        branch_id += [-1] * extra
    is_real = torch.arange(len(tokens)) < real
    branches_t = torch.tensor(branch_id, dtype=torch.long)
    subjects_t = torch.tensor(subject, dtype=torch.long)
    is_knowledge = (branches_t >= 0) & is_real
    words_t = torch.tensor(word_index, dtype=torch.long)
    return SentenceTree(
        tokens=tokens,
        soft_positions=torch.tensor(positions, dtype=torch.long),
        visible_matrix=visible_matrix(is_knowledge, subjects_t, branches_t, is_real),
        is_knowledge=is_knowledge,
        word_index=words_t,
        segment_ids=_segments(tokens, words_t, real),
        num_dropped_branches=dropped,
        subject=subjects_t,
        branch_id=branches_t,
    )


def visible_matrix(
    is_knowledge: Tensor, subject: Tensor, branch_id: Tensor, is_real: Tensor
) -> Tensor:
    """K-BERT's visible matrix, vectorised.

    Args:
        is_knowledge: ``[L]`` bool, branch tokens.
        subject: ``[L]`` long, the subject span (trunk word) each token belongs to.
        branch_id: ``[L]`` long, the branch of each knowledge token (-1 on the trunk).
        is_real: ``[L]`` bool, ``False`` on padding.

    Returns:
        ``[L, L]`` bool, ``True`` where row may attend column.
    """
    trunk = ~is_knowledge & is_real
    same_subject = subject[:, None] == subject[None, :]
    both_trunk = trunk[:, None] & trunk[None, :]
    # A trunk unit and a branch of the same subject see each other (either direction).
    trunk_branch = same_subject & (trunk[:, None] ^ trunk[None, :])
    same_branch = (branch_id[:, None] == branch_id[None, :]) & is_knowledge[:, None]
    visible = both_trunk | trunk_branch | same_branch
    visible |= torch.eye(len(is_real), dtype=torch.bool)
    return visible & is_real[:, None] & is_real[None, :]


def _segments(tokens: list[str], word_index: Tensor, real: int) -> Tensor:
    """0 up to the first ``[SEP]`` of the trunk, 1 after it (by word index)."""
    segments = torch.zeros(len(tokens), dtype=torch.long)
    sep_words = [int(word_index[i]) for i in range(real) if tokens[i] == SEP]
    if sep_words:
        segments[:real] = (word_index[:real] > sep_words[0]).long()
    return segments


def wordpiece_splitter(tokenizer: object) -> Splitter:
    """``split`` for :func:`build_sentence_tree`: a tokenizer's pieces of one word or object.

    WordPiece and Unigram/SentencePiece pieces are the tokenizer's own for the string. A
    byte-level BPE tokenizer (RoBERTa) marks the space before a word inside its piece
    (``Ġworld``), so each word is encoded with a space before it, as ``transformers``
    encodes words already split (``is_split_into_words`` with ``add_prefix_space``).

    Args:
        tokenizer: a :class:`ptm_core.tokenization.WordPieceTokenizer` or a
            :class:`ptm_core.finetune.data.task_tokenizer.HFTokenizer`.
    """
    backend = tokenizer.backend  # type: ignore[attr-defined]
    pre_tokenizer = json.loads(backend.to_str()).get("pre_tokenizer")
    space = " " if '"ByteLevel"' in json.dumps(pre_tokenizer) else ""

    def split(text: str) -> list[str]:
        return list(backend.encode(space + text, add_special_tokens=False).tokens)

    return split
