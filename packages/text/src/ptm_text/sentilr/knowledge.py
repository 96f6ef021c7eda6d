"""SentiLARE's word-level linguistic knowledge: a coarse POS tag and a polarity per word.

SentiLARE (Ke et al., 2020, thu-coai/SentiLARE ``preprocess/prep_sent.py``) tags each word
with Stanford's tagger, maps the Penn tag to SentiWordNet's four classes (verb, adjective,
adverb, noun; every other tag is "other") and looks the lemma up in SentiWordNet 3.0 with a
gloss-aware attention over its senses; the score's sign is the word's polarity. None of
those resources ships offline here, so ptm substitutes (``docs/guides/sentilr.md``):

- **POS**: a spaCy pipeline the user names (``sentilr.pos_pipeline``, e.g.
  ``en_core_web_sm`` when installed), its universal tags mapped as the reference maps Penn
  tags; otherwise :class:`LexicalPosTagger`: the most frequent part of speech of the word
  in WordNet 3.0's index files (Debian ``wordnet-base``, ``/usr/share/wordnet``; sense
  counts from the tagged SemCor corpus decide between a word's parts of speech), and
  where WordNet is absent a small rule set (closed-class word list + suffixes). Neither
  looks at the context, so "a book" and "book a table" get the same tag.
- **Polarity**: VADER's lexicon (Hutto & Gilbert, 2014; ``vader_lexicon.txt`` inside the
  ``vaderSentiment`` wheel, 7,500 words and emoticons rated -4..4 by ten people): mean
  rating above ``threshold`` positive, below ``-threshold`` negative, else neutral. As in
  the reference, only content words (POS not "other") are looked up. VADER has no senses,
  so a word has one polarity in every context, where SentiWordNet's gloss attention chose
  the sense; and it rates far fewer words (7.5k vs 117k synsets).

Ids follow the reference (``pos_tag_ids_map`` and its ``senti_list``): POS ``v a r n u``
= 0..4, polarity negative 0, positive 1, neutral 2.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

POS_NAMES = ("verb", "adjective", "adverb", "noun", "other")
VERB, ADJECTIVE, ADVERB, NOUN, OTHER = range(5)
POLARITY_NAMES = ("negative", "positive", "neutral")
NEGATIVE, POSITIVE, NEUTRAL = range(3)

WORDNET_DIR = Path("/usr/share/wordnet")
_WORDNET_FILES = {"noun": NOUN, "verb": VERB, "adj": ADJECTIVE, "adv": ADVERB}
# spaCy's universal tags, mapped as the reference maps Penn tags (VB*, JJ*, RB*, NN*).
_UPOS = {"VERB": VERB, "AUX": VERB, "ADJ": ADJECTIVE, "ADV": ADVERB, "NOUN": NOUN, "PROPN": NOUN}
# Closed classes a Penn tagger never tags VB/JJ/RB/NN: determiners, pronouns, prepositions,
# conjunctions, modals, particles (the rule set's "other").
_CLOSED = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "some",
        "any",
        "each",
        "every",
        "no",
        "all",
        "both",
        "either",
        "neither",
        "i",
        "me",
        "my",
        "mine",
        "you",
        "your",
        "yours",
        "he",
        "him",
        "his",
        "she",
        "her",
        "hers",
        "it",
        "its",
        "we",
        "us",
        "our",
        "ours",
        "they",
        "them",
        "their",
        "theirs",
        "myself",
        "yourself",
        "himself",
        "herself",
        "itself",
        "ourselves",
        "themselves",
        "who",
        "whom",
        "whose",
        "which",
        "what",
        "where",
        "when",
        "why",
        "how",
        "there",
        "here",
        "of",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "about",
        "against",
        "between",
        "into",
        "through",
        "during",
        "before",
        "after",
        "above",
        "below",
        "to",
        "from",
        "up",
        "down",
        "out",
        "off",
        "over",
        "under",
        "again",
        "further",
        "then",
        "once",
        "and",
        "but",
        "or",
        "nor",
        "so",
        "yet",
        "if",
        "because",
        "as",
        "until",
        "while",
        "than",
        "can",
        "could",
        "may",
        "might",
        "must",
        "shall",
        "should",
        "will",
        "would",
        "not",
        "n't",
        "'s",
    ]
)
_AUXILIARY = frozenset(
    [
        "be",
        "am",
        "is",
        "are",
        "was",
        "were",
        "been",
        "being",
        "have",
        "has",
        "had",
        "do",
        "does",
        "did",
    ]
)
_SUFFIXES = (
    (("ly",), ADVERB),
    (("ous", "ful", "ive", "able", "ible", "less", "ish", "ic", "al", "ent", "ant"), ADJECTIVE),
    (("ing", "ed", "ize", "ise", "ify"), VERB),
    (("tion", "sion", "ment", "ness", "ity", "ism", "er", "or", "ist", "ship", "ance"), NOUN),
)
# -ly adjectives the suffix rule would call adverbs.
_LY_ADJECTIVES = frozenset(
    [
        "friendly",
        "lovely",
        "lonely",
        "ugly",
        "silly",
        "likely",
        "early",
        "daily",
        "costly",
        "holy",
        "lively",
        "elderly",
        "deadly",
        "curly",
        "jolly",
        "smelly",
        "oily",
        "chilly",
        "cowardly",
        "kindly",
        "timely",
        "unlikely",
        "unfriendly",
    ]
)
_WORD = re.compile(r"[A-Za-z]")


@dataclass(frozen=True)
class WordKnowledge:
    """The knowledge of one text: its words with a POS id and a polarity id each."""

    words: tuple[str, ...]
    pos: tuple[int, ...]
    polarity: tuple[int, ...]


class LexicalPosTagger:
    """Coarse POS of a word out of context: WordNet 3.0's index files, else rules.

    With the index files (``index.noun``, ``index.verb``, ``index.adj``, ``index.adv`` in
    ``wordnet_dir``), a word's tag is its part of speech with the most tagged senses
    (``tagsense_cnt``; ties and zero counts: most synsets, then the order noun, verb,
    adjective, adverb), looked up as written, then through WordNet's detachment rules
    (``cats`` -> ``cat``, ``stopped`` -> ``stop``). Words in no index, numbers and
    punctuation are "other". Closed-class words are "other" before any lookup, and forms of
    *be*, *have*, *do* are verbs, as a Penn tagger tags them.

    Args:
        wordnet_dir: folder of WordNet's ``index.*`` files; ``None`` or a folder without
            them: the rule set (suffixes: ``-ly`` adverb, ``-ous``/``-ful``/... adjective,
            ``-ing``/``-ed`` verb, ``-tion``/``-ness``/... noun; a word of ``rated``
            without a suffix cue adjective, as most rated sentiment words are; other
            alphabetic words noun).
        rated: the words of the polarity lexicon (the rule set's adjective guess).
    """

    def __init__(
        self, wordnet_dir: str | Path | None = WORDNET_DIR, rated: Collection[str] = ()
    ) -> None:
        self.rated = rated
        self.index = read_wordnet_index(Path(wordnet_dir)) if wordnet_dir else None
        self.source = (
            f"WordNet 3.0 index files in {wordnet_dir}" if self.index else "the suffix rule set"
        )

    def __call__(self, words: Sequence[str]) -> list[int]:
        return [self.tag(word) for word in words]

    def tag(self, word: str) -> int:
        lower = word.lower()
        if lower in _AUXILIARY:
            return VERB
        if lower in _CLOSED or not _WORD.search(lower):
            return OTHER
        if self.index is not None:
            return _wordnet_pos(self.index, lower)
        if lower in _LY_ADJECTIVES:
            return ADJECTIVE
        for suffixes, pos in _SUFFIXES:
            if any(lower.endswith(s) and len(lower) - len(s) >= 3 for s in suffixes):
                return pos
        return ADJECTIVE if lower in self.rated else NOUN


# WordNet's morphy detachment rules (wn.morphy's MORPHOLOGICAL_SUBSTITUTIONS).
_DETACH = {
    NOUN: (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
           ("men", "man"), ("ies", "y")),
    VERB: (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""),
           ("ing", "e"), ("ing", "")),
    ADJECTIVE: (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    ADVERB: (),
}  # fmt: skip


def _wordnet_pos(wordnet: WordNetIndex, word: str) -> int:
    index = wordnet.lemmas
    best: tuple[int, int, int] | None = None
    chosen = OTHER
    for rank, (pos, rules) in enumerate(_DETACH.items()):  # noun, verb, adjective, adverb
        forms = [word] + [word[: -len(a)] + b for a, b in rules if word.endswith(a)]
        irregular = wordnet.exceptions.get(word, {}).get(pos)
        if irregular is not None:  # an .exc line: the base form comes first
            forms.insert(0, irregular)
        for form in forms:
            counts = index.get(form, {}).get(pos)
            if counts is not None:
                key = (counts[0], counts[1], -rank)  # tagged senses, synsets, order
                if best is None or key > best:
                    best, chosen = key, pos
                break
    return chosen


@dataclass(frozen=True)
class WordNetIndex:
    """``lemmas``: lemma -> {pos: (tagsense_cnt, synset_cnt)}; ``exceptions``: inflected
    form -> {pos: base form} (the ``*.exc`` lists)."""

    lemmas: dict[str, dict[int, tuple[int, int]]]
    exceptions: dict[str, dict[int, str]]


@cache
def read_wordnet_index(directory: Path) -> WordNetIndex | None:
    """The :class:`WordNetIndex` of WordNet's ``index.*`` files, or ``None`` when
    ``directory`` lacks any of them.

    An index line reads ``lemma pos synset_cnt p_cnt [ptr_symbol...] sense_cnt
    tagsense_cnt synset_offset...`` (wndb(5WN)); license lines start with a space. The
    exception lists (``noun.exc``, ``verb.exc``, ...: ``inflected base``) are read when
    present, so ``stopped`` finds ``stop``.
    """
    paths = {pos: directory / f"index.{name}" for name, pos in _WORDNET_FILES.items()}
    if not all(path.is_file() for path in paths.values()):
        return None
    index: dict[str, dict[int, tuple[int, int]]] = {}
    exceptions: dict[str, dict[int, str]] = {}
    for pos, path in paths.items():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line or line[0] == " ":
                continue
            fields = line.split()
            try:
                synsets, pointers = int(fields[2]), int(fields[3])
                tagged = int(fields[5 + pointers])
            except (IndexError, ValueError):
                raise ValueError(
                    f"{path}:{number}: not a WordNet index line (lemma pos synset_cnt p_cnt "
                    "ptr... sense_cnt tagsense_cnt offsets...)"
                ) from None
            index.setdefault(fields[0].replace("_", " "), {})[pos] = (tagged, synsets)
    for name, pos in _WORDNET_FILES.items():
        path = directory / f"{name}.exc"
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                fields = line.split()
                if len(fields) >= 2:
                    exceptions.setdefault(fields[0], {})[pos] = fields[1].replace("_", " ")
    return WordNetIndex(index, exceptions)


class SpacyPosTagger:
    """Coarse POS from a spaCy pipeline's universal tags (``VERB``/``AUX`` verb, ``ADJ``
    adjective, ``ADV`` adverb, ``NOUN``/``PROPN`` noun, every other tag "other"), tagging
    the words in their sentence.

    Args:
        pipeline: an installed pipeline's name or folder (``en_core_web_sm``); it must set
            ``token.pos_`` (a tagger or morphologizer).
    """

    def __init__(self, pipeline: str) -> None:
        try:
            import spacy
            from spacy.tokens import Doc
        except ImportError:
            raise ImportError(
                f"sentilr.pos_pipeline={pipeline!r} needs spaCy: pip install spacy (or set "
                "sentilr.pos_pipeline=null for the WordNet/rule tagger)"
            ) from None
        try:
            self.nlp = spacy.load(pipeline)
        except OSError as error:
            raise OSError(
                f"sentilr.pos_pipeline={pipeline!r}: spaCy cannot load it ({error}); install "
                "the pipeline or set sentilr.pos_pipeline=null for the WordNet/rule tagger"
            ) from None
        self.doc = Doc
        self.source = f"spaCy pipeline {pipeline}"

    def __call__(self, words: Sequence[str]) -> list[int]:
        if not words:
            return []
        doc = self.nlp(self.doc(self.nlp.vocab, words=list(words)))
        if not doc.has_annotation("POS"):
            raise ValueError(f"{self.source} sets no token.pos_: use a pipeline with a tagger")
        return [_UPOS.get(token.pos_, OTHER) for token in doc]


@cache
def vader_lexicon() -> dict[str, float]:
    """VADER's word -> mean rating (-4..4), read from the ``vaderSentiment`` wheel."""
    text = resources.files("vaderSentiment").joinpath("vader_lexicon.txt").read_text("utf-8")
    lexicon = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) >= 2:
            lexicon[fields[0]] = float(fields[1])
    return lexicon


class LexiconPolarity:
    """Word polarity from a rated lexicon (VADER's by default).

    Args:
        threshold: ratings above it are positive, below ``-threshold`` negative (0: any
            non-zero rating is polar, as the reference reads SentiWordNet's score sign).
        lexicon: ``word -> rating``; default :func:`vader_lexicon`.
    """

    def __init__(self, threshold: float = 0.0, lexicon: dict[str, float] | None = None) -> None:
        if threshold < 0:
            raise ValueError(f"sentilr.polarity_threshold={threshold} must be >= 0")
        self.threshold = threshold
        self.lexicon = vader_lexicon() if lexicon is None else lexicon
        self.source = "VADER lexicon (vaderSentiment)" if lexicon is None else "given lexicon"

    def __call__(self, words: Sequence[str], pos: Sequence[int]) -> list[int]:
        out = []
        for word, tag in zip(words, pos, strict=True):
            rating = self.lexicon.get(word.lower(), 0.0) if tag != OTHER else 0.0
            out.append(
                POSITIVE
                if rating > self.threshold
                else NEGATIVE
                if rating < -self.threshold
                else NEUTRAL
            )
        return out


class KnowledgeAnnotator:
    """Words -> :class:`WordKnowledge` (POS, then polarity).

    Args:
        pos_pipeline: a spaCy pipeline for POS (:class:`SpacyPosTagger`); ``None`` for
            :class:`LexicalPosTagger`.
        wordnet_dir: WordNet's folder for :class:`LexicalPosTagger`.
        polarity_threshold: :class:`LexiconPolarity`'s threshold.
    """

    def __init__(
        self,
        pos_pipeline: str | None = None,
        wordnet_dir: str | Path | None = WORDNET_DIR,
        polarity_threshold: float = 0.0,
    ) -> None:
        self.polarity = LexiconPolarity(polarity_threshold)
        self.tagger: Callable[[Sequence[str]], list[int]] = (
            SpacyPosTagger(pos_pipeline)
            if pos_pipeline
            else LexicalPosTagger(wordnet_dir, rated=self.polarity.lexicon)
        )

    @property
    def sources(self) -> dict[str, str]:
        """Where the POS tags and polarities come from (logged and saved with a run)."""
        return {"pos": getattr(self.tagger, "source", "?"), "polarity": self.polarity.source}

    def __call__(self, words: Sequence[str]) -> WordKnowledge:
        pos = self.tagger(words)
        return WordKnowledge(tuple(words), tuple(pos), tuple(self.polarity(words, pos)))
