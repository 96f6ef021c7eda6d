"""The mention guard: which alias matches may be linked at all, before any ranking.

An alias table built from a lexical KG (WordNet) holds "a" (the letter), "in" (the inch),
"one", "out" and "wild"; matching text against it blindly links articles, prepositions,
numbers, adjectives and adverbs to noun senses. The guard keeps a match only when it is
used as a noun (or name):

1. **Function words.** A match made only of spaCy stop words (``token.is_stop``),
   number-like tokens (``like_num``), punctuation or spaces is dropped, unless it is a
   *name*: capitalised in the text, matched by a capitalised KG alias, and not the first
   word of its sentence. So "a" and "In" are never linked, while "The Who", a band the
   KG spells with capitals, is linked mid-sentence; a sentence-initial "A" is not, since
   capitals there say nothing. (A judgement call: a band called "A" at the start of a
   sentence is missed.)
2. **Part of speech.** When the pipeline tags parts of speech (``doc.has_annotation("POS")``:
   a tagger + attribute ruler, or a morphologizer), the match's head (the parse's root when
   there is one, else its last token) must be ``NOUN`` or ``PROPN``. Without a tagger (the
   default ``spacy.blank`` pipeline) the lexical prior :class:`NounShare` stands in: a
   lower-case match whose noun share is below ``min_noun_share`` is dropped ("wild",
   "found", "eating") unless its neighbours show a noun phrase that it ends: a determiner
   or preposition before it and a function word, punctuation or the end of the text after
   it ("an *attempt* to", "the act of *eating*.", but not "a *wild* horse"). The prior
   knows words, not sentences: it passes a noun-heavy word used as a verb ("they *form* a
   ring") and drops a verb-heavy noun inside a compound ("a *return* ticket"); only a
   tagger sees those. A capitalised nationality word before a lower-case content word is
   read as an adjective ("an *Asian* soviet").
"""

from __future__ import annotations

from typing import Any, Literal

from ptm_knowledge.linking.noun_share import NounShare

GuardMode = Literal["pos", "none"]
GUARD_MODES = ("pos", "none")
NOUN_TAGS = frozenset({"NOUN", "PROPN"})
# Words before a noun phrase (determiners, possessives, prepositions; not "to", which
# also marks an infinitive): an untagged word between one of these and the end of its
# phrase is read as a noun whatever its prior ("an attempt to", "the act of eating.").
NOUN_PHRASE_OPENERS = frozenset(
    {"a", "an", "the", "this", "that", "these", "those", "my", "your", "his", "her", "its",
     "our", "their", "of", "for", "by", "in", "on", "at", "from", "with", "without", "about",
     "after", "before", "during", "into", "through", "("}
)  # fmt: skip
_DEMONSTRATIVES = frozenset({"this", "that", "these", "those"})
# Endings of nationality and region adjectives ("Indian", "European", "African", "Chinese",
# "Asiatic", "Spanish"); "-ic" alone would take "Arctic" and "Atlantic", nouns as well.
_NATIONALITY_ENDINGS = ("ian", "ean", "can", "ese", "atic", "ish")
# Adverbs of degree: after a word, they go on to another adjective.
_DEGREE_WORDS = frozenset(
    {"more", "most", "less", "least", "very", "so", "too", "rather", "quite", "much"}
)
# Right after a word, these open a new noun phrase: the word is a verb taking an object.
# ("that" is left out: "the attempt that failed" is a noun and a relative clause.)
_DETERMINERS = frozenset(
    {"a", "an", "the", "this", "these", "those", "his", "her", "its", "their", "my", "your",
     "our", "some", "any", "every", "each", "it", "them", "someone", "something"}
)  # fmt: skip
# Adjectives allowed between an opener and the word it opens ("a glaring blunder"), known
# by their endings (the prior lists nouns, not adjectives).
MODIFIERS = 2
_ADJECTIVE_ENDINGS = (
    "al", "ous", "ful", "ive", "ic", "able", "ible", "less", "ing", "ed", "ish", "ary", "ent",
    "ant", "ian", "ese", "est", "er",
)  # fmt: skip
# After a word, these may join it to a further modifier or noun ("a rapid, jerky movement",
# "a fast and loud song"): they do not end its noun phrase.
_JOINERS = frozenset({",", "-", "/", "and", "or", "but", "&"})
_ANNOTATIONS_KEY = "ptm_knowledge.linking.guard.annotations"
# A match preceded (across spaces) by one of these starts a sentence.
_SENTENCE_ENDS = frozenset(".!?:;\n\"'“”‘’()[]")


class MentionGuard:
    """Decides whether an alias match may be linked, and how noun-like it is.

    Args:
        noun_share: the lexical part-of-speech prior used when the pipeline has no tagger;
            ``None`` keeps only the function-word rule on untagged text.
        min_noun_share: matches whose noun share is lower are dropped.
    """

    def __init__(self, noun_share: NounShare | None, min_noun_share: float = 0.5) -> None:
        if not 0.0 <= min_noun_share <= 1.0:
            raise ValueError(f"min_noun_share must be in [0, 1], got {min_noun_share}")
        self.noun_share = noun_share
        self.min_noun_share = min_noun_share

    def noun_likeness(self, doc: Any, start: int, end: int, alias: str) -> float | None:
        """``None`` when ``doc[start:end]`` (matched by KG ``alias``) must not be linked;
        else how sure the guard is that it is a noun: 1.0 for a tagged noun, the noun share
        for an untagged word the prior lists, 1.0 for one it does not list or one that ends
        a noun phrase."""
        span = doc[start:end]
        name = _is_name(doc, start, span.text, alias)
        if not name and all(t.is_stop or t.like_num or t.is_punct or t.is_space for t in span):
            return None
        tagged, parsed, _ = _annotations(doc)
        if tagged:
            head = span.root if parsed else span[-1]
            return 1.0 if head.pos_ in NOUN_TAGS else None
        if _is_proper_adjective(doc, start, end):
            return None
        if self.noun_share is None:
            return 1.0
        # names too: "European" and "American" are mostly adjectives ("a European shrub")
        share = self.noun_share.get(span.text)
        if share is None:
            return 1.0
        if _ends_noun_phrase(doc, start, end) or _is_gerund_subject(doc, start, end):
            return 1.0
        return share if share >= self.min_noun_share else None


def _ends_noun_phrase(doc: Any, start: int, end: int) -> bool:
    """A phrase opener before ``doc[start:end]`` (at most ``MODIFIERS`` content words
    between: "a glaring *blunder*") and nothing that could continue the noun phrase (a
    content word) right after it."""
    if end < len(doc) and not _ends_phrase(doc[end]):
        return False
    for index in range(start - 1, max(-1, start - 2 - MODIFIERS), -1):
        token = doc[index]
        if token.lower_ in NOUN_PHRASE_OPENERS:
            return True
        if not (token.is_alpha and token.is_lower and token.lower_.endswith(_ADJECTIVE_ENDINGS)):
            return False  # "a unit of inductance equal to": a noun in between
    return False


def _ends_phrase(after: Any) -> bool:
    """Whether the token after a word ends the word's noun phrase: a function word, space
    or punctuation, but not one that joins it to more ("a rapid, jerky movement") nor a
    determiner, which opens the object of a verb ("by signing a check")."""
    if after.is_space:
        return True
    if after.text in _JOINERS or after.lower_ in _JOINERS or after.lower_ in _DETERMINERS:
        return False
    if after.lower_ in _DEGREE_WORDS:
        return False  # "with longer more slender limbs": a comparison goes on
    return bool(after.is_stop or after.is_punct)


def _is_proper_adjective(doc: Any, start: int, end: int) -> bool:
    """A capitalised word with a nationality ending right before a lower-case content word:
    "an *Asian* soviet", "*West Indian* shrub", "*Spanish* bayonets" (an adjective, not the
    person or the language)."""
    last = doc[end - 1]
    if not (last.text[:1].isupper() and last.lower_.endswith(_NATIONALITY_ENDINGS)):
        return False
    if end == len(doc):
        return False
    after = doc[end]
    return bool(after.is_alpha and after.is_lower and not after.is_stop)


def _is_gerund_subject(doc: Any, start: int, end: int) -> bool:
    """A one-word "-ing" match that starts its sentence or follows a phrase opener: a
    gerund used as a noun ("*Fastening* by dowels", "the act of *saving* goods")."""
    if end - start != 1 or not doc[start].lower_.endswith("ing"):
        return False
    if end < len(doc) and doc[end].lower_ in _DETERMINERS:
        return False  # "by signing a check": a verb with its object
    if start == 0 or _sentence_initial(doc, start):
        return True
    previous = doc[start - 1].lower_
    # "those causing influenza": after a demonstrative, "-ing" is mostly a participle
    return previous in NOUN_PHRASE_OPENERS and previous not in _DEMONSTRATIVES


def _annotations(doc: Any) -> tuple[bool, bool, bool]:
    """Whether ``doc`` has POS tags, a parse and sentence starts, worked out once per doc
    (``has_annotation`` reads every token) and kept in its ``user_data``."""
    flags = doc.user_data.get(_ANNOTATIONS_KEY)
    if flags is None:
        flags = tuple(doc.has_annotation(a) for a in ("POS", "DEP", "SENT_START"))
        doc.user_data[_ANNOTATIONS_KEY] = flags
    return flags


def _sentence_initial(doc: Any, start: int) -> bool:
    if start == 0:
        return True
    if _annotations(doc)[2]:
        return bool(doc[start].is_sent_start)
    previous = doc[start - 1]
    return previous.text[-1:] in _SENTENCE_ENDS or "\n" in previous.whitespace_


def _is_name(doc: Any, start: int, text: str, alias: str) -> bool:
    """Capitalised in the text and in the KG alias, and not the sentence's first word."""
    return text[:1].isupper() and alias[:1].isupper() and not _sentence_initial(doc, start)
