"""K-BERT's inputs and its Mask-Transformer.

Liu et al., 2020, "K-BERT: Enabling Language Representation with Knowledge Graph". The
Mask-Transformer is the plain core :class:`~ptm_core.TransformerEncoder` fed with
``position_ids`` = soft positions and ``attention_mask`` = the visible matrix, so any
checkpoint ``TransformerEncoder.from_pretrained`` loads (ptm or Hugging Face BERT) becomes
a K-BERT without re-pre-training. Fine-tuning uses the core task heads
(:class:`ptm_core.finetune.model.TaskModel`): :meth:`KBertFeaturizer.featurize` gives
batches whose ``attention_mask`` is the visible matrix and whose ``position_ids`` are the
soft positions, which ``TaskModel`` hands to the encoder.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import torch
from torch import Tensor

from ptm_core import TransformerEncoder
from ptm_core.modules.attention_structure import AttentionStructure
from ptm_core.objectives import IGNORE_INDEX
from ptm_knowledge.kbert.sentence_tree import (
    CLS,
    SEP,
    SPECIAL_TOKENS,
    SentenceTree,
    build_sentence_tree,
    wordpiece_splitter,
)

KGMode = Literal["full", "none"]
VisibleMode = Literal["on", "off"]
_WORD = re.compile(r"\w+(?:['\-]\w+)*|[^\w\s]")


def segment_words(text: str) -> list[str]:
    """Split ``text`` into words and punctuation marks (``"Paris."`` -> ``["Paris", "."]``)."""
    return _WORD.findall(text)


class KBertFeaturizer:
    """Sentences (+ labels) -> K-BERT model inputs, with the paper's ablations built in.

    Args:
        tokenizer: the encoder's tokenizer (pieces, ids and the special-token layout):
            a :class:`ptm_core.tokenization.WordPieceTokenizer`, or a RoBERTa/XLM-R
            folder's :class:`ptm_core.finetune.data.task_tokenizer.HFTokenizer`
            (``load_task_tokenizer``); with one token type, segments are all 0.
        knowledge: subject -> objects in priority order (see :func:`knowledge_from_graph`).
        max_entities: branches per subject.
        max_length: tree length (sentence units are kept before knowledge).
        kg: ``"none"`` ignores ``knowledge`` (the model is then plain BERT).
        visible_matrix: ``"off"`` lets every real token see every real token (soft
            positions kept), the ablation showing why the matrix exists.
        structured_mask: give the visible matrix as an
            :class:`~ptm_core.modules.attention_structure.AttentionStructure` (per-token
            ``[B, L]`` subject/branch tensors, no ``[B, L, L]`` tensor; the encoder's
            attention backend runs it) instead of the ``visible_matrix`` tensor. Same
            visibility; off by default.
    """

    def __init__(
        self,
        tokenizer: Any,
        knowledge: Mapping[str, Sequence[str]],
        *,
        max_entities: int = 2,
        max_length: int = 128,
        kg: KGMode = "full",
        visible_matrix: VisibleMode = "on",
        structured_mask: bool = False,
    ) -> None:
        if kg not in ("full", "none"):
            raise ValueError(f"kg must be 'full' or 'none', got {kg!r}")
        if visible_matrix not in ("on", "off"):
            raise ValueError(f"visible_matrix must be 'on' or 'off', got {visible_matrix!r}")
        self.tokenizer = tokenizer
        self.knowledge: Mapping[str, Sequence[str]] = knowledge if kg == "full" else {}
        self.max_entities = max_entities
        self.max_length = max_length
        self.kg = kg
        self.visible_matrix = visible_matrix
        self.structured_mask = structured_mask
        self.split = wordpiece_splitter(tokenizer)
        vocab = tokenizer.vocab_info
        self.unk_id = vocab.unk_id
        self.pad_id = vocab.pad_id
        self._special_ids = {CLS: vocab.cls_id, SEP: vocab.sep_id}
        self._single = _layout(tokenizer, pair=False)
        self._pair = _layout(tokenizer, pair=True)
        # RoBERTa/XLM-R have one token type: their pairs are told apart by the specials.
        self.segments = any(tokenizer.build_inputs([-1], [-2])[1])

    def words(self, words: Sequence[str], second: Sequence[str] | None = None) -> list[str]:
        """The tokenizer's layout as a word list, its specials as ``[CLS]``/``[SEP]``
        markers: BERT's ``[CLS] a [SEP] b [SEP]``, RoBERTa's ``<s> a </s></s> b </s>``."""
        out: list[str] = []
        for part in self._single if second is None else self._pair:
            out.extend(words if part == "A" else (second or []) if part == "B" else [part])
        return out

    def tree(self, words: Sequence[str], second: Sequence[str] | None = None) -> SentenceTree:
        """The sentence tree of :meth:`words` (``[CLS] words [SEP] (second [SEP])``)."""
        return build_sentence_tree(
            self.words(words, second),
            self.knowledge,
            max_entities=self.max_entities,
            max_length=self.max_length,
            split=self.split,
        )

    def encode(
        self,
        words: Sequence[str],
        second: Sequence[str] | None = None,
        *,
        label: int | None = None,
        word_labels: Sequence[int] | None = None,
    ) -> dict[str, Tensor]:
        """One example's unpadded tensors (``[L]``, and ``visible_matrix`` ``[L, L]``).

        Args:
            words: first sentence's words (without ``[CLS]``/``[SEP]``).
            second: optional second sentence.
            label: sentence label (classification).
            word_labels: one tag per word of ``words`` then ``second`` (tagging); the first
                trunk piece of each word carries it, branch tokens and other pieces get
                ``IGNORE_INDEX``.
        """
        tree = self.tree(words, second)
        ids = [self._special_ids.get(t, self.tokenizer.token_to_id(t)) for t in tree.tokens]
        segments = tree.segment_ids if self.segments else torch.zeros_like(tree.segment_ids)
        item = {
            "input_ids": torch.tensor([self.unk_id if i is None else i for i in ids]),
            "position_ids": tree.soft_positions,
            "token_type_ids": segments,
            "visible_matrix": tree.visible_matrix,
            "is_knowledge": tree.is_knowledge,
            "word_start": _word_starts(tree),
        }
        if self.structured_mask:
            assert tree.subject is not None and tree.branch_id is not None
            item["kbert_subject"] = tree.subject
            item["kbert_branch"] = tree.branch_id
        if label is not None:
            item["labels"] = torch.tensor(label)
        if word_labels is not None:
            # Word index in the layout -> index in word_labels (specials carry no tag).
            all_words = self.words(words, second)
            tag_of: list[int] = []
            k = 0
            for w in all_words:
                if w in SPECIAL_TOKENS:
                    tag_of.append(IGNORE_INDEX)
                else:
                    tag_of.append(int(word_labels[k]))
                    k += 1
            if k != len(word_labels):
                raise ValueError(f"word_labels has {len(word_labels)} tags for {k} words")
            tags = torch.full((len(tree),), IGNORE_INDEX)
            starts = item["word_start"].nonzero().flatten()
            tags[starts] = torch.tensor([tag_of[int(tree.word_index[i])] for i in starts])
            item["labels"] = tags
        return item

    def collate(self, items: Sequence[Mapping[str, Tensor]]) -> dict[str, Tensor]:
        """Pad to the longest item: ``[B, L]`` tensors, ``visible_matrix`` ``[B, L, L]``.

        ``attention_mask`` is the ``[B, L]`` padding mask; ``visible_matrix`` is left out
        when ``kg="none"`` or ``visible_matrix="off"`` (the encoder then uses the padding
        mask, i.e. plain BERT attention).
        """
        length = max(len(item["input_ids"]) for item in items)
        batch_size = len(items)
        out: dict[str, Tensor] = {
            "input_ids": torch.full((batch_size, length), self.pad_id),
            "attention_mask": torch.zeros(batch_size, length, dtype=torch.long),
            "position_ids": torch.zeros(batch_size, length, dtype=torch.long),
            "token_type_ids": torch.zeros(batch_size, length, dtype=torch.long),
            "is_knowledge": torch.zeros(batch_size, length, dtype=torch.bool),
            "word_start": torch.zeros(batch_size, length, dtype=torch.bool),
        }
        use_matrix = self.kg == "full" and self.visible_matrix == "on"
        use_structure = use_matrix and "kbert_subject" in items[0]
        if use_structure:  # the tree per token; task_batch makes the AttentionStructure
            use_matrix = False
            for key in ("kbert_subject", "kbert_branch"):
                out[key] = torch.full((batch_size, length), -1, dtype=torch.long)
        if use_matrix:
            out["visible_matrix"] = torch.zeros(batch_size, length, length, dtype=torch.bool)
        token_labels = "labels" in items[0] and items[0]["labels"].dim() == 1
        if token_labels:
            out["labels"] = torch.full((batch_size, length), IGNORE_INDEX)
        elif "labels" in items[0]:
            out["labels"] = torch.stack([item["labels"] for item in items])
        for b, item in enumerate(items):
            n = len(item["input_ids"])
            for key in ("input_ids", "position_ids", "token_type_ids", "is_knowledge"):
                out[key][b, :n] = item[key]
            out["word_start"][b, :n] = item["word_start"]
            out["attention_mask"][b, :n] = 1
            if use_matrix:
                out["visible_matrix"][b, :n, :n] = item["visible_matrix"]
            if use_structure:
                out["kbert_subject"][b, :n] = item["kbert_subject"]
                out["kbert_branch"][b, :n] = item["kbert_branch"]
            if token_labels:
                out["labels"][b, :n] = item["labels"]
        return out

    def featurize(self, rows: Sequence[Any]) -> dict[str, Tensor]:
        """Examples -> one :class:`~ptm_core.finetune.model.TaskModel` batch (the core
        ``Featurizer`` protocol, so :class:`~ptm_core.finetune.data.task_batches.TaskBatches`
        batches K-BERT rows).

        Args:
            rows: :class:`~ptm_knowledge.kbert.tsv.LabeledSentence` (``words``, ``second``,
                ``label``) or :class:`~ptm_knowledge.kbert.tsv.TaggedSentence` (``words``,
                ``tags``) examples.

        Returns:
            :meth:`task_batch` of the collated rows.
        """
        items = [
            self.encode(row.words, word_labels=row.tags)
            if hasattr(row, "tags")
            else self.encode(row.words, row.second, label=row.label)
            for row in rows
        ]
        return self.task_batch(self.collate(items))

    @staticmethod
    def task_batch(batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """A :meth:`collate` batch as :class:`~ptm_core.finetune.model.TaskModel` reads it.

        ``attention_mask`` becomes the ``[B, L, L]`` visible matrix when there is one (the
        ``[B, L]`` padding mask otherwise: ``kg="none"`` / ``visible_matrix="off"``),
        ``position_ids`` stay the soft positions, and token labels on branch tokens
        (``is_knowledge``) are set to ``IGNORE_INDEX`` so injected knowledge is never
        trained on or scored. ``is_knowledge`` and ``word_start`` are kept (the model
        ignores them). A ``structured_mask`` batch gets the visible matrix as an
        :class:`~ptm_core.modules.attention_structure.AttentionStructure` instead.
        """
        out = {
            k: v
            for k, v in batch.items()
            if k not in ("visible_matrix", "kbert_subject", "kbert_branch")
        }
        if "visible_matrix" in batch:
            out["attention_mask"] = batch["visible_matrix"]
        elif "kbert_subject" in batch:
            out["attention_mask"] = kbert_structure(batch)  # type: ignore[assignment]
        labels = batch.get("labels")
        if labels is not None and labels.dim() == 2:
            out["labels"] = labels.masked_fill(batch["is_knowledge"], IGNORE_INDEX)
        return out


def _layout(tokenizer: Any, *, pair: bool) -> list[str]:
    """The tokenizer's specials around one text or a pair: ``"A"``/``"B"`` for the texts,
    ``[CLS]``/``[SEP]`` markers for its cls and sep tokens (read off ``build_inputs``)."""
    vocab = tokenizer.vocab_info
    ids = tokenizer.build_inputs([-1], [-2] if pair else None)[0]
    names = {-1: "A", -2: "B", vocab.cls_id: CLS, vocab.sep_id: SEP}
    unknown = [i for i in ids if i not in names]
    if unknown:
        raise ValueError(
            f"the tokenizer puts special id {unknown[0]} around the texts, neither its cls "
            f"({vocab.cls_id}) nor its sep ({vocab.sep_id}) token; K-BERT's sentence tree "
            "needs a BERT- or RoBERTa-style tokenizer"
        )
    return [names[i] for i in ids]


def _word_starts(tree: SentenceTree) -> Tensor:
    """``[L]`` bool: first trunk unit of each non-special word."""
    starts = torch.zeros(len(tree), dtype=torch.bool)
    seen: set[int] = set()
    for i, token in enumerate(tree.tokens):
        w = int(tree.word_index[i])
        if tree.is_knowledge[i] or w < 0 or w in seen or token in SPECIAL_TOKENS:
            continue
        seen.add(w)
        starts[i] = True
    return starts


def kbert_structure(batch: Mapping[str, Tensor]) -> AttentionStructure:
    """The visible matrix of a ``structured_mask`` :meth:`KBertFeaturizer.collate` batch as
    an :class:`~ptm_core.modules.attention_structure.AttentionStructure`; its ``.dense()``
    equals the ``visible_matrix`` the featurizer builds otherwise."""
    return AttentionStructure.kbert(
        batch["is_knowledge"],
        batch["kbert_subject"],
        batch["kbert_branch"],
        batch["attention_mask"].bool(),
    )


def mask_transformer(encoder: TransformerEncoder, batch: Mapping[str, Tensor]) -> Tensor:
    """Run the core encoder as K-BERT's Mask-Transformer; returns ``[B, L, D]``.

    Uses ``batch["visible_matrix"]`` (``[B, L, L]`` bool) when present, the structure of a
    ``structured_mask`` batch (:func:`kbert_structure`), else the ``[B, L]`` padding mask;
    ``position_ids`` are the soft positions.
    """
    mask: Tensor | AttentionStructure | None = batch.get("visible_matrix")
    if mask is None and "kbert_subject" in batch:
        mask = kbert_structure(batch)
    output = encoder(
        batch["input_ids"],
        attention_mask=mask if mask is not None else batch["attention_mask"],
        position_ids=batch["position_ids"],
        token_type_ids=batch.get("token_type_ids"),
    )
    return output.last_hidden_state
