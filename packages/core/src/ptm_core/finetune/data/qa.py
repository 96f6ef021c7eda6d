"""Extractive QA: contexts cut into overlapping windows, and spans mapped back to text.

BERT's SQuAD setup (Devlin et al., 2019, section 4.2; ``run_squad.py``) as Hugging Face's
``run_qa.py`` implements it (``prepare_train_features``, ``postprocess_qa_predictions``):
each row is ``[CLS] question [SEP] context window [SEP]`` (or the tokenizer's own layout
of a pair, e.g. RoBERTa's ``<s> question </s></s> window </s>``); a context longer than
the room left is cut into windows that overlap by ``doc_stride`` tokens; the labels are the
answer's first and last token in the row, or 0 (``[CLS]``) when the answer is not wholly
inside the window or the question has none (SQuAD v2.0).

Windows are planned once (two ints each: which example, which first context token) and
built when indexed, re-tokenizing their example, so a 130k-question train set costs a few
megabytes, not tensors of every window.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from tokenizers import Encoding

from ptm_core.data.layouts import LazyRows
from ptm_core.finetune.data.examples import QAExample
from ptm_core.finetune.data.features import Batch, pad_rows
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer, num_special_tokens

Offset = tuple[int, int]


@dataclass(frozen=True)
class QAWindow:
    """One row of a QA example: the question and one window of its context.

    Args:
        index: position of the window in its :class:`QAWindows` (``feature_index``).
        example_index: position of its example in the examples.
        example_id: the question id.
        input_ids: ``[CLS] question [SEP] window [SEP]`` (the tokenizer's pair layout).
        token_type_ids: 0 for ``[CLS] question [SEP]``, 1 for ``window [SEP]`` (BERT; the
            tokenizer's own types otherwise, e.g. all 0 for RoBERTa and T5).
        offsets: per token, the ``(start, end)`` characters of the context it covers, or
            ``None`` outside the context (question, specials).
        start_position: the answer's first token in the row, ``null_index`` when not in
            this window.
        end_position: the answer's last token in the row, ``null_index`` when not in it.
        context: the example's context (offsets index into it).
        null_index: the "no answer" position: the classification token (``[CLS]``/``<s>``
            at 0; XLNet's ``<cls>`` last, as ``run_qa.py``'s ``cls_index``), else 0.
    """

    index: int
    example_index: int
    example_id: str
    input_ids: list[int]
    token_type_ids: list[int]
    offsets: list[Offset | None]
    start_position: int
    end_position: int
    context: str
    null_index: int = 0


class QAFeaturizer:
    """Windows of SQuAD examples, and their batches.

    Args:
        tokenizer: the model's tokenizer.
        max_length: longest row, specials included (384 in BERT's SQuAD runs).
        doc_stride: tokens that consecutive windows of a context share (128; the
            ``stride`` of Hugging Face ``run_qa.py``. BERT's ``run_squad.py`` names
            ``doc_stride`` the step between window starts instead, which is
            ``max_length - 3 - question tokens - doc_stride`` here).
        max_query_length: questions are cut to this many tokens (64).
    """

    def __init__(
        self,
        tokenizer: TaskTokenizer,
        max_length: int = 384,
        doc_stride: int = 128,
        max_query_length: int = 64,
    ) -> None:
        if doc_stride < 0:
            raise ValueError(f"doc_stride must be >= 0, got {doc_stride}")
        self.specials = num_special_tokens(tokenizer, pair=True)  # 3 for BERT, 4 for RoBERTa
        if max_length - self.specials - max_query_length <= doc_stride:
            raise ValueError(
                f"max_length={max_length} leaves {max_length - self.specials - max_query_length}"
                " context "
                f"tokens after a question of max_query_length={max_query_length}, not more "
                f"than doc_stride={doc_stride}, so windows would not advance; raise max_length "
                "or lower doc_stride/max_query_length"
            )
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length

    def windows(self, examples: Sequence[QAExample], chunk: int = 512) -> QAWindows:
        """Plan the windows of ``examples`` (tokenizes each once, keeps two ints a window).

        Returns:
            A lazy sequence of :class:`QAWindow`, grouped by example in example order.
        """
        example_index: list[int] = []
        window_start: list[int] = []
        for first in range(0, len(examples), chunk):
            part = [examples[i] for i in range(first, min(first + chunk, len(examples)))]
            questions, contexts = self._encode(part)
            for offset, (question, context) in enumerate(zip(questions, contexts, strict=True)):
                room = self.max_length - self.specials - len(question)
                for start in _window_starts(len(context), room, self.doc_stride):
                    example_index.append(first + offset)
                    window_start.append(start)
        return QAWindows(
            self, examples, np.asarray(example_index, np.int64), np.asarray(window_start, np.int64)
        )

    def _encode(self, examples: Sequence[QAExample]) -> tuple[list[list[int]], list[Encoding]]:
        """Question ids (cut to ``max_query_length``) and context encodings, no specials."""
        backend = self.tokenizer.backend
        questions = backend.encode_batch([e.question for e in examples], add_special_tokens=False)
        contexts = backend.encode_batch([e.context for e in examples], add_special_tokens=False)
        return [list(q.ids)[: self.max_query_length] for q in questions], contexts

    def featurize(self, rows: Sequence[QAWindow]) -> Batch:
        """One batch of windows: ``input_ids``, ``attention_mask``, ``token_type_ids``
        ``(B, L)``; ``start_positions``, ``end_positions`` ``(B,)``."""
        ids = [row.input_ids for row in rows]
        return {
            "input_ids": pad_rows(ids, self.tokenizer.vocab_info.pad_id),
            "attention_mask": pad_rows([[1] * len(row) for row in ids], 0),
            "token_type_ids": pad_rows([row.token_type_ids for row in rows], 0),
            "start_positions": torch.tensor([row.start_position for row in rows]),
            "end_positions": torch.tensor([row.end_position for row in rows]),
        }


def _window_starts(length: int, room: int, stride: int) -> list[int]:
    """First context token of each window: windows of ``room`` tokens, overlapping by
    ``stride``, until one reaches the end (one empty window for an empty context)."""
    starts = [0]
    while starts[-1] + room < length:
        starts.append(starts[-1] + room - stride)
    return starts


class QAWindows(LazyRows):
    """The planned windows of some QA examples, built when indexed (see
    :meth:`QAFeaturizer.windows`).

    Attributes:
        examples: the examples.
        example_index: ``(W,)`` which example each window belongs to (non-decreasing).
        window_start: ``(W,)`` its first context token.
    """

    CACHE = 64  # examples whose encodings are kept (consecutive windows share them)

    def __init__(
        self,
        featurizer: QAFeaturizer,
        examples: Sequence[QAExample],
        example_index: np.ndarray,
        window_start: np.ndarray,
    ) -> None:
        self.featurizer = featurizer
        self.examples = examples
        self.example_index = example_index
        self.window_start = window_start
        self._cache: dict[int, tuple[list[int], Encoding]] = {}

    def __len__(self) -> int:
        return len(self.example_index)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cache": {}}

    def _encoded(self, example: int) -> tuple[list[int], Encoding]:
        if example not in self._cache:
            if len(self._cache) >= self.CACHE:
                self._cache.pop(next(iter(self._cache)))
            questions, contexts = self.featurizer._encode([self.examples[example]])
            self._cache[example] = (questions[0], contexts[0])
        return self._cache[example]

    def windows_of(self, example: int) -> range:
        """Positions of the windows of example ``example``."""
        lo, hi = np.searchsorted(self.example_index, [example, example + 1])
        return range(int(lo), int(hi))

    def _build(self, index: int) -> QAWindow:
        example_index = int(self.example_index[index])
        example = self.examples[example_index]
        question, context = self._encoded(example_index)
        featurizer = self.featurizer
        room = featurizer.max_length - featurizer.specials - len(question)
        start = int(self.window_start[index])
        window_ids = list(context.ids)[start : start + room]
        window_offsets: list[Offset] = [
            trim_offset(example.context, int(s), int(e))
            for s, e in list(context.offsets)[start : start + room]
        ]
        input_ids, token_type_ids, special = featurizer.tokenizer.build_inputs(question, window_ids)
        # Row positions of the window's tokens: the text tokens after the question's.
        positions = [i for i, flag in enumerate(special) if not flag][len(question) :]
        first = positions[0] if positions else len(input_ids)
        offsets: list[Offset | None] = [None] * len(input_ids)
        for position, offset in zip(positions, window_offsets, strict=True):
            offsets[position] = offset
        vocab = featurizer.tokenizer.vocab_info
        null_index = 0  # T5 has no classification token (its cls_id is the end token's)
        if vocab.cls_id != vocab.sep_id:
            null_index = next(
                (i for i, t in enumerate(input_ids) if t == vocab.cls_id and special[i]), 0
            )
        start_position = end_position = null_index
        if not example.is_impossible and example.answers:
            span = _answer_tokens(context, example.answers[0].start, example.answers[0].end)
            if span is not None and start <= span[0] and span[1] < start + len(window_ids):
                start_position, end_position = first + span[0] - start, first + span[1] - start
        return QAWindow(
            index=index,
            example_index=example_index,
            example_id=example.id,
            input_ids=input_ids,
            token_type_ids=token_type_ids,
            offsets=offsets,
            start_position=start_position,
            end_position=end_position,
            context=example.context,
            null_index=null_index,
        )


def trim_offset(text: str, start: int, end: int) -> Offset:
    """``(start, end)`` without the white space at either end of ``text[start:end]``
    (byte-level BPE tokens carry the space before their word when the file does not trim
    offsets); an all-space token becomes empty at its end."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _answer_tokens(context: Encoding, start_char: int, end_char: int) -> tuple[int, int] | None:
    """First and last context token that the characters ``[start_char, end_char)`` touch,
    or ``None`` when no token does (an answer of white space only)."""
    offsets = context.offsets
    first = next((i for i, (_, end) in enumerate(offsets) if end > start_char), None)
    last = next((i for i in range(len(offsets) - 1, -1, -1) if offsets[i][0] < end_char), None)
    if first is None or last is None or last < first:
        return None
    return first, last


def postprocess_qa(
    features: QAWindows,
    start_logits: Sequence[Any] | np.ndarray | torch.Tensor,
    end_logits: Sequence[Any] | np.ndarray | torch.Tensor,
    n_best: int = 20,
    max_answer_length: int = 30,
    null_threshold: float = 0.0,
    version_2: bool = False,
    details: dict[str, dict[str, Any]] | None = None,
) -> dict[str, str]:
    """Answer text per question from the start/end logits of its windows.

    As Hugging Face ``postprocess_qa_predictions``: in every window of a question, the
    ``n_best`` highest start and end logits are paired; a pair is kept when both tokens lie
    in the context, the end is not before the start and the span has at most
    ``max_answer_length`` tokens; its score is ``start_logit + end_logit``. The best pair's
    characters (through the tokens' offsets) are the answer. With ``version_2``, the null
    score is the smallest ``start_logits[n] + end_logits[n]`` over the windows (``n``: the
    window's ``null_index``, 0 unless the classification token comes last as in XLNet), and the
    answer is ``""`` when ``null score - best span score > null_threshold`` (or no span
    is valid). Without it, a question with no valid span also gets ``""``.

    Args:
        features: the windows the logits were computed on.
        start_logits: per window (by ``feature_index``), its start logits: a ``(W, L)``
            array or tensor, or a sequence of 1-D arrays at least as long as the window.
        end_logits: the same for the end.
        n_best: start and end candidates per window.
        max_answer_length: longest answer, in tokens.
        null_threshold: how much the null score must beat the best span (v2.0).
        version_2: predict "no answer" (SQuAD v2.0).
        details: when given, filled with ``{question id: {"score", "start", "end"}}``:
            the answer's probability (the softmax of its window's start logits at the
            start times that of its end logits at the end, as a ``transformers`` QA
            pipeline scores), its character span in the context (``None`` for ``""``).

    Returns:
        ``{question id: answer text}`` for every example of ``features``.
    """
    if len(start_logits) != len(features) or len(end_logits) != len(features):
        raise ValueError(
            f"{len(start_logits)} start and {len(end_logits)} end logit rows for "
            f"{len(features)} windows; give one row per window, ordered by feature_index"
        )
    answers: dict[str, str] = {}
    for example_index, example in enumerate(features.examples):
        best: tuple[float, int, int] | None = None
        probability = 0.0
        null_score: float | None = None
        for position in features.windows_of(example_index):
            window = features[position]
            size = len(window.input_ids)
            starts = _logits_row(start_logits[position], size, position)
            ends = _logits_row(end_logits[position], size, position)
            null = float(starts[window.null_index] + ends[window.null_index])
            null_score = null if null_score is None else min(null_score, null)
            if details is not None:
                log_starts = starts - np.logaddexp.reduce(starts)
                log_ends = ends - np.logaddexp.reduce(ends)
            top_starts = np.argsort(starts, kind="stable")[::-1][:n_best]
            top_ends = np.argsort(ends, kind="stable")[::-1][:n_best]
            for s in top_starts.tolist():
                start_span = window.offsets[s]
                if start_span is None:
                    continue
                for e in top_ends.tolist():
                    end_span = window.offsets[e]
                    if end_span is None or e < s or e - s + 1 > max_answer_length:
                        continue
                    score = float(starts[s] + ends[e])
                    if best is None or score > best[0]:
                        best = (score, start_span[0], end_span[1])
                        if details is not None:
                            probability = float(np.exp(log_starts[s] + log_ends[e]))
        if best is None or (
            version_2 and null_score is not None and null_score - best[0] > null_threshold
        ):
            answers[example.id] = ""
            if details is not None:
                details[example.id] = {"score": None, "start": None, "end": None}
        else:
            answers[example.id] = example.context[best[1] : best[2]]
            if details is not None:
                details[example.id] = {"score": probability, "start": best[1], "end": best[2]}
    return answers


def _logits_row(row: Any, size: int, position: int) -> np.ndarray:
    values = (
        row.detach().float().cpu().numpy() if isinstance(row, torch.Tensor) else np.asarray(row)
    )
    if values.ndim != 1 or values.shape[0] < size:
        raise ValueError(
            f"logits of window {position} have shape {values.shape}, but the window has "
            f"{size} tokens; give each window's logits (padding may follow)"
        )
    return values[:size].astype(np.float64)


def squad_references(examples: Sequence[QAExample]) -> dict[str, list[str]]:
    """Gold answers per question id, for :func:`ptm_core.finetune.metrics.compute_metrics`
    (an empty list for an unanswerable question)."""
    return {e.id: [a.text for a in e.answers] for e in examples}


__all__ = [
    "QAFeaturizer",
    "QAWindow",
    "QAWindows",
    "postprocess_qa",
    "squad_references",
    "trim_offset",
]
