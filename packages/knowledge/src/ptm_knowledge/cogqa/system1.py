"""System 1 of CogQA: a span reader on the core Transformer encoder.

Ding et al. (2019), "Cognitive Graph for Multi-Hop Reading Comprehension at Scale", §3.1:
System 1 reads ``[CLS] question [SEP] clues [SEP] paragraph [SEP]`` and predicts, with
start/end pointer heads, the spans of *next-hop* entities and of *answer* candidates in
the paragraph (top-k spans whose score beats the ``[CLS]`` "no span" score by a
threshold), and gives the node's semantic vector as the output at the first token.

Tokenisation is word level (``\\w+`` runs and single punctuation marks, lower-cased) so
spans map back to exact character ranges of the sentence; the vocabulary is built from
the training text (:meth:`WordVocab.build`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ptm_core import TransformerEncoder
from ptm_core.encoders import TransformerSize, builders
from ptm_knowledge.cogqa.graph import ReadResult, Span
from ptm_knowledge.cogqa_settings import ReaderConfig

__all__ = [
    "CogQAReader",
    "ReaderConfig",
    "ReaderInput",
    "WordVocab",
    "encode_reader_input",
    "find_span",
    "words",
]

_WORD = re.compile(r"\w+|[^\w\s]")
SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]")
PAD, UNK, CLS, SEP = 0, 1, 2, 3


def words(text: str) -> list[tuple[str, int, int]]:
    """``(lower-cased word, char start, char end)`` for each word of ``text``."""
    return [(m.group().lower(), m.start(), m.end()) for m in _WORD.finditer(text)]


class WordVocab:
    """Word-level vocabulary with ``[PAD] [UNK] [CLS] [SEP]`` at ids 0..3."""

    def __init__(self, tokens: Sequence[str]) -> None:
        self.tokens = list(tokens)
        self.ids = {tok: i for i, tok in enumerate(self.tokens)}

    @classmethod
    def build(cls, texts: Iterable[str], *, min_count: int = 1) -> WordVocab:
        """Vocabulary of every word seen ``min_count`` times, sorted for determinism."""
        counts: dict[str, int] = {}
        for text in texts:
            for word, _, _ in words(text):
                counts[word] = counts.get(word, 0) + 1
        kept = sorted(w for w, c in counts.items() if c >= min_count and w not in SPECIALS)
        return cls([*SPECIALS, *kept])

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, text: str) -> list[int]:
        """Ids of the words of ``text`` (unknown words -> ``[UNK]``)."""
        return [self.ids.get(w, UNK) for w, _, _ in words(text)]


@dataclass
class ReaderInput:
    """One encoded ``[CLS] q [SEP] clues [SEP] paragraph [SEP]`` sequence.

    Attributes:
        input_ids: ``[L]`` token ids.
        token_type_ids: ``[L]``; 0 for question and clues, 1 for the paragraph.
        positions: per token, ``(sentence index, char start, char end)`` for paragraph
            tokens and ``None`` elsewhere (spans may only use paragraph tokens).
        words: lower-cased paragraph words (``""`` for other tokens), to locate gold spans.
    """

    input_ids: list[int]
    token_type_ids: list[int]
    positions: list[tuple[int, int, int] | None]
    words: list[str]


def encode_reader_input(
    vocab: WordVocab,
    question: str,
    clues: Sequence[str],
    paragraph: Sequence[str],
    *,
    max_length: int = 128,
    max_question: int = 24,
    max_clues: int = 40,
) -> ReaderInput:
    """Encode one System 1 input; question, clues, then paragraph are cut to fit."""
    q = vocab.encode(question)[:max_question]
    c = vocab.encode(" ".join(clues))[:max_clues]
    ids = [CLS, *q, SEP, *c, SEP]
    types = [0] * len(ids)
    positions: list[tuple[int, int, int] | None] = [None] * len(ids)
    texts = [""] * len(ids)
    budget = max_length - len(ids) - 1
    for s_index, sentence in enumerate(paragraph):
        for word, start, end in words(sentence):
            if budget <= 0:
                break
            ids.append(vocab.ids.get(word, UNK))
            types.append(1)
            positions.append((s_index, start, end))
            texts.append(word)
            budget -= 1
    ids.append(SEP)
    types.append(1)
    positions.append(None)
    texts.append("")
    return ReaderInput(ids, types, positions, texts)


def find_span(inp: ReaderInput, sentence: int, text: str) -> tuple[int, int]:
    """Token ``(start, end)`` (inclusive) of the first occurrence of ``text``'s words in
    paragraph sentence ``sentence``; ``(0, 0)``, the ``[CLS]`` "no span" target, when the
    text is absent or was cut off."""
    target = [w for w, _, _ in words(text)]
    tokens = [i for i, p in enumerate(inp.positions) if p is not None and p[0] == sentence]
    n = len(target)
    for k in range(len(tokens) - n + 1 if n else 0):
        window = tokens[k : k + n]
        if [inp.words[i] for i in window] == target:
            return window[0], window[-1]
    return 0, 0


# Columns of the span head output.
HOP_START, HOP_END, ANS_START, ANS_END = 0, 1, 2, 3


class CogQAReader(nn.Module):
    """System 1: core encoder + start/end pointers for hop spans and answer spans.

    Args:
        vocab: the word vocabulary.
        config: sizes and decoding settings.
        encoder: a core encoder to use (e.g. built by a Hydra ``model/`` config or loaded
            with ``from_pretrained``); ``None`` builds one from ``config``'s sizes.
    """

    def __init__(
        self,
        vocab: WordVocab,
        config: ReaderConfig | None = None,
        encoder: TransformerEncoder | None = None,
    ) -> None:
        super().__init__()
        self.vocab = vocab
        c = config or ReaderConfig()
        if encoder is None:
            size = TransformerSize(
                vocab_size=len(vocab),
                hidden_size=c.hidden_size,
                num_layers=c.num_layers,
                num_heads=c.num_heads,
                intermediate_size=c.intermediate_size,
                max_positions=c.max_length,
                dropout=c.dropout,
                attention_dropout=c.dropout,
                pad_token_id=PAD,
            )
            encoder = builders.bert(size)
        if encoder.config.vocab_size < len(vocab) or encoder.config.max_positions < c.max_length:
            raise ValueError(
                f"encoder has vocab_size={encoder.config.vocab_size}, max_positions="
                f"{encoder.config.max_positions} but the reader needs {len(vocab)} words and "
                f"{c.max_length} positions; build it with those sizes (or lower max_length)"
            )
        # The encoder's width wins over config.hidden_size (a copy: configs may be shared).
        self.config = dataclasses.replace(c, hidden_size=encoder.config.hidden_size)
        self.encoder = encoder
        self.span_head = nn.Linear(encoder.config.hidden_size, 4)

    def encode(self, question: str, clues: Sequence[str], paragraph: Sequence[str]) -> ReaderInput:
        """Encode one input with this reader's vocabulary and length limit."""
        return encode_reader_input(
            self.vocab, question, clues, paragraph, max_length=self.config.max_length
        )

    @staticmethod
    def collate(inputs: Sequence[ReaderInput]) -> dict[str, torch.Tensor]:
        """Pad to a batch: ``input_ids``, ``token_type_ids``, ``attention_mask`` ``[B, L]``
        and ``span_mask`` ``[B, L]`` (True at paragraph tokens, where spans may lie)."""
        length = max(len(x.input_ids) for x in inputs)
        ids = torch.full((len(inputs), length), PAD, dtype=torch.long)
        types = torch.zeros_like(ids)
        mask = torch.zeros_like(ids)
        span_mask = torch.zeros(len(inputs), length, dtype=torch.bool)
        for b, x in enumerate(inputs):
            n = len(x.input_ids)
            ids[b, :n] = torch.tensor(x.input_ids)
            types[b, :n] = torch.tensor(x.token_type_ids)
            mask[b, :n] = 1
            span_mask[b, :n] = torch.tensor([p is not None for p in x.positions])
        return {
            "input_ids": ids,
            "token_type_ids": types,
            "attention_mask": mask,
            "span_mask": span_mask,
        }

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Span logits ``[B, L, 4]`` (hop start/end, answer start/end; positions outside
        the paragraph except ``[CLS]`` are ``-inf``) and first-token vectors ``[B, D]``."""
        out = self.encoder(
            batch["input_ids"],
            attention_mask=batch["attention_mask"],
            token_type_ids=batch["token_type_ids"],
        )
        hidden = out.last_hidden_state
        logits = self.span_head(hidden)
        allowed = batch["span_mask"].clone()
        allowed[:, 0] = True  # [CLS] = "no span"
        logits = logits.masked_fill(~allowed.unsqueeze(-1), float("-inf"))
        return logits, hidden[:, 0]

    def loss(self, batch: dict[str, torch.Tensor], targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy of the four pointers; ``targets`` ``[B, 4]`` token indices
        (0 = no span), columns as :data:`HOP_START` ... :data:`ANS_END`."""
        logits, _ = self(batch)
        losses = [nn.functional.cross_entropy(logits[:, :, k], targets[:, k]) for k in range(4)]
        return torch.stack(losses).mean()

    def decode(
        self,
        inp: ReaderInput,
        logits: torch.Tensor,
        paragraph: Sequence[str],
        start_col: int,
        end_col: int,
        threshold: float,
    ) -> list[Span]:
        """Top-k spans of one head whose score beats ``[CLS]`` by the threshold.

        Args:
            inp: the encoded input.
            logits: ``[L, 4]`` span logits of this input.
            paragraph: its sentences (span texts are cut from them).
            start_col / end_col: the head's columns.
            threshold: minimum margin over the ``[CLS]`` score.
        """
        n = len(inp.input_ids)
        start, end = logits[:n, start_col], logits[:n, end_col]
        null = float(start[0] + end[0])
        score = start[:, None] + end[None, :]  # [L, L]: span (i, j)
        sent = torch.tensor([p[0] if p is not None else -1 for p in inp.positions])
        i = torch.arange(n)
        ok = (
            (sent[:, None] == sent[None, :])
            & (sent[:, None] >= 0)
            & (i[None, :] >= i[:, None])
            & (i[None, :] - i[:, None] < self.config.max_span_length)
        )
        score = score.masked_fill(~ok, float("-inf"))
        spans: list[Span] = []
        values, flat = score.flatten().sort(descending=True)
        for value, index in zip(values.tolist(), flat.tolist(), strict=True):
            if len(spans) >= self.config.top_k or value - null <= threshold:
                break
            a, b = divmod(index, n)
            pa, pb = inp.positions[a], inp.positions[b]
            assert pa is not None and pb is not None
            text = paragraph[pa[0]][pa[1] : pb[2]]
            if all(s.text != text for s in spans):
                spans.append(Span(text, pa[0], value - null))
        return spans

    @torch.no_grad()
    def read(self, question: str, clues: Sequence[str], paragraph: Sequence[str]) -> ReadResult:
        """Hop and answer spans of one paragraph (the :class:`SpanReader` protocol)."""
        was_training = self.training
        self.eval()
        inp = self.encode(question, clues, paragraph)
        logits, _ = self(self.collate([inp]))
        self.train(was_training)
        return ReadResult(
            hop_spans=self.decode(
                inp, logits[0], paragraph, HOP_START, HOP_END, self.config.hop_threshold
            ),
            answer_spans=self.decode(
                inp, logits[0], paragraph, ANS_START, ANS_END, self.config.threshold
            ),
        )

    def embed(
        self, items: Sequence[tuple[str, Sequence[str], Sequence[str]]], *, grad: bool = False
    ) -> torch.Tensor:
        """Semantic vectors ``[N, D]`` (first-token outputs) of ``(question, clues,
        paragraph)`` items; a node without paragraph is read with an empty one.

        Args:
            items: ``(question, clues, paragraph)`` per node.
            grad: ``False`` (inference, the default): eval mode, no autograd graph, so
                the vectors are constants. ``True`` (joint training of System 1 and
                System 2): the current mode is kept (dropout on in training) and the
                vectors carry gradients back into the encoder.

        Returns:
            ``[N, D]`` vectors, ``D`` the encoder width.
        """
        if not items:
            return torch.zeros(0, self.config.hidden_size)
        batch = self.collate([self.encode(q, c, p) for q, c, p in items])
        if grad:
            return self(batch)[1]
        was_training = self.training
        self.eval()
        with torch.no_grad():
            _, vectors = self(batch)
        self.train(was_training)
        return vectors
