"""Phrases for ERNIE-Baidu phrase-level masking: spaCy noun chunks or learned collocations.

ERNIE 1.0 (Sun et al., 2019) takes phrases from a chunker. ``spacy.blank`` pipelines have
no parser, so :func:`build_phrase_extractor` uses noun chunks when the pipeline has a
parser and otherwise phrases learned from the corpus itself by collocation statistics
(:class:`CollocationPhrases`: frequent word n-grams with high pointwise mutual
information), or a phrase lexicon the user supplies (:meth:`CollocationPhrases.from_lexicon`).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

_WORD = re.compile(r"[^\W\d_][\w'’-]*", re.UNICODE)


class PhraseExtractor(Protocol):
    """Anything that returns phrase character spans of a sentence."""

    def phrase_spans(self, text: str) -> list[tuple[int, int]]: ...


class NounChunkPhrases:
    """Multi-word noun chunks of a spaCy pipeline with a dependency parser.

    Args:
        nlp: a pipeline whose ``pipe_names`` include ``"parser"``.
    """

    def __init__(self, nlp: Any) -> None:
        if "parser" not in nlp.pipe_names:
            raise ValueError(
                "noun chunks need a spaCy pipeline with a parser; install a trained pipeline "
                "or use CollocationPhrases"
            )
        self.nlp = nlp

    def phrase_spans(self, text: str) -> list[tuple[int, int]]:
        doc = self.nlp(text)
        return [(c.start_char, c.end_char) for c in doc.noun_chunks if len(c) > 1]


class CollocationPhrases:
    """Word n-grams that occur together far more often than chance.

    Learning (:meth:`learn`): count lower-cased words and adjacent word pairs within
    sentences; a pair ``(a, b)`` is a collocation when it occurs at least ``min_count``
    times and ``PMI = log(c(ab) N / (c(a) c(b))) >= min_pmi``, and neither word is a stop
    word. Chains of collocations ("second world" + "world war") form longer phrases at
    match time. Matching (:meth:`phrase_spans`) is greedy left to right, longest first.

    Args:
        phrases: word tuples (lower-case) that are phrases.
        max_length: longest phrase in words.
    """

    def __init__(self, phrases: Iterable[Sequence[str]], max_length: int = 4) -> None:
        self.pairs = {tuple(p[i : i + 2]) for p in phrases for i in range(len(p) - 1)}
        self.max_length = max_length

    @classmethod
    def from_lexicon(cls, phrases: Iterable[str], max_length: int = 4) -> CollocationPhrases:
        """Phrases given as strings ("nobel prize", "black sea")."""
        return cls([tuple(_words(p)) for p in phrases], max_length)

    @classmethod
    def learn(
        cls,
        sentences: Iterable[str],
        *,
        min_count: int = 2,
        min_pmi: float = 3.0,
        stop_words: frozenset[str] | None = None,
        max_length: int = 4,
    ) -> CollocationPhrases:
        """Learn collocations from sentences (see the class docstring)."""
        if stop_words is None:
            from spacy.lang.en.stop_words import STOP_WORDS

            stop_words = frozenset(STOP_WORDS)
        unigrams: Counter[str] = Counter()
        bigrams: Counter[tuple[str, str]] = Counter()
        for sentence in sentences:
            words = [w.lower() for w in _words(sentence)]
            unigrams.update(words)
            bigrams.update(itertools.pairwise(words))
        total = sum(unigrams.values()) or 1
        kept = []
        for (a, b), count in bigrams.items():
            if count < min_count or a in stop_words or b in stop_words:
                continue
            pmi = math.log(count * total / (unigrams[a] * unigrams[b]))
            if pmi >= min_pmi:
                kept.append((a, b))
        return cls(kept, max_length)

    def phrase_spans(self, text: str) -> list[tuple[int, int]]:
        words = [(m.group().lower(), m.start(), m.end()) for m in _WORD.finditer(text)]
        spans: list[tuple[int, int]] = []
        i = 0
        while i < len(words):
            j = i
            while (
                j + 1 < len(words)
                and j + 1 - i < self.max_length
                and (words[j][0], words[j + 1][0]) in self.pairs
            ):
                j += 1
            if j > i:
                spans.append((words[i][1], words[j][2]))
            i = j + 1
        return spans

    def __len__(self) -> int:
        return len(self.pairs)


def _words(text: str) -> list[str]:
    return [m.group() for m in _WORD.finditer(text)]


def build_phrase_extractor(
    nlp: Any, sentences: Iterable[str], **learn_kwargs: Any
) -> PhraseExtractor:
    """Noun chunks when ``nlp`` has a parser, else collocations learned from ``sentences``."""
    if nlp is not None and "parser" in getattr(nlp, "pipe_names", ()):
        return NounChunkPhrases(nlp)
    return CollocationPhrases.learn(sentences, **learn_kwargs)
