"""Words of a text for a word-substitution attack: spans, stop words, substitution.

A text is cut into word spans (letters and digits, with inner apostrophes and hyphens:
``don't``, ``well-made``); everything between them (spaces, punctuation) is kept as it is,
so replacing a word changes that word alone. Stop words are never attacked nor offered as
substitutes (Jin et al., 2020, skip them too: changing ``not`` or ``no`` would change the
meaning, not the surface).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

#: One word: letters/digits, joined by inner apostrophes or hyphens.
WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")

#: English stop words (NLTK's list, with the negations TextFooler also keeps fixed).
_STOP_WORDS = """a about above after again against ain all am an and any are aren aren't as at be
    because been before being below between both but by can couldn couldn't d did didn
    didn't do does doesn doesn't doing don don't down during each few for from further had
    hadn hadn't has hasn hasn't have haven haven't having he her here hers herself him
    himself his how i if in into is isn isn't it it's its itself just ll m ma me mightn
    mightn't more most mustn mustn't my myself needn needn't no nor not now o of off on
    once only or other our ours ourselves out over own re s same shan shan't she she's
    should should've shouldn shouldn't so some such t than that that'll the their theirs
    them themselves then there these they this those through to too under until up ve very
    was wasn wasn't we were weren weren't what when where which while who whom why will
    with won won't wouldn wouldn't y you you'd you'll you're you've your yours yourself
    yourselves never nothing nobody none neither cannot without"""
STOP_WORDS = frozenset(_STOP_WORDS.split())


@dataclass(frozen=True)
class WordSpan:
    """A word of a text and its ``[start, end)`` characters."""

    text: str
    start: int
    end: int


def word_spans(text: str) -> list[WordSpan]:
    """The words of ``text``, in order."""
    return [WordSpan(m.group(), m.start(), m.end()) for m in WORD.finditer(text)]


def is_attackable(word: str) -> bool:
    """A word the attack may replace: it has a letter and is no stop word."""
    return any(c.isalpha() for c in word) and word.lower() not in STOP_WORDS


def is_substitute(word: str, original: str) -> bool:
    """A usable substitute of ``original``: one whole word, with a letter, no stop word,
    not the original word in another case."""
    return (
        WORD.fullmatch(word) is not None
        and is_attackable(word)
        and word.lower() != original.lower()
    )


def match_case(word: str, like: str) -> str:
    """``word`` in the case pattern of ``like`` (``Good`` -> ``Fine``, ``GOOD`` -> ``FINE``)."""
    if len(like) > 1 and like.isupper():
        return word.upper()
    if like[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def with_words(text: str, spans: Sequence[WordSpan], changes: dict[int, str]) -> str:
    """``text`` with word ``i`` replaced by ``changes[i]`` (an empty string deletes it,
    with one space on its side, so no double space is left)."""
    pieces: list[str] = []
    last = 0
    for index in sorted(changes):
        span = spans[index]
        start, end = span.start, span.end
        new = changes[index]
        if not new:  # deletion: drop one neighbouring space too
            if end < len(text) and text[end] == " ":
                end += 1
            elif start > last and text[start - 1] == " ":
                start -= 1
        pieces.append(text[last:start])
        pieces.append(new)
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


__all__ = [
    "STOP_WORDS",
    "WORD",
    "WordSpan",
    "is_attackable",
    "is_substitute",
    "match_case",
    "with_words",
    "word_spans",
]
