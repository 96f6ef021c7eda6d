"""Entity linking with spaCy: alias-table mention detection, candidate ranking, threshold."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ptm_knowledge.kg.graph import KnowledgeGraph
from ptm_knowledge.linking.aliases import AliasTable, CaseMode, ContextBags
from ptm_knowledge.linking.guard import GUARD_MODES, GuardMode, MentionGuard
from ptm_knowledge.linking.noun_share import NounShare

# Joins a phrase's token texts into one dict key (NUL never occurs in a KG cell).
_TOKEN_JOIN = "\x00"
Disambiguation = Literal["context", "overlap"]
DISAMBIGUATIONS = ("context", "overlap")
# Calibrated on held-out WordNet gloss gold: benchmarks/results/wordnet_linking.md.
DEFAULT_THRESHOLD = 0.32
# The settings that reproduce the linker before #38 (no guard, the alias prior alone can
# link), for before/after comparisons.
LEGACY_SETTINGS: dict[str, Any] = {
    "guard": "none",
    "disambiguation": "overlap",
    "threshold": 0.3,
    "prior_weight": 0.5,
}


# Endings of singulars that look plural: "glass", "genus" (not the plural of "genu", the
# knee), "analysis", "kudos".
_NOT_PLURAL = ("ss", "us", "is", "os", "ys")


def saved_linker_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Linker settings as a saved record gives them back (an ERNIE-THU task folder's).

    A record written before #38 has no ``guard`` key: it was linked by the linker of then,
    so :data:`LEGACY_SETTINGS` fill in the keys it does not set, and the task text is
    linked again as it was at training time.
    """
    options = dict(options or {})
    return options if "guard" in options else {**LEGACY_SETTINGS, **options}


def _fold(word: str) -> str:
    """A crude plural fold for context overlap and plural aliases: "rays" -> "ray"."""
    return (
        word[:-1] if len(word) > 3 and word[-1] == "s" and not word.endswith(_NOT_PLURAL) else word
    )


@dataclass(frozen=True)
class Mention:
    """A linked mention.

    Attributes:
        start: character offset of the first character in the text.
        end: character offset one past the last character.
        text: ``text[start:end]``.
        entity_id: the chosen entity.
        score: ranking score in ``[0, 1]`` (at least the linker's threshold).
        candidates: every candidate's ``(entity_id, score)``, best first.
    """

    start: int
    end: int
    text: str
    entity_id: str
    score: float
    candidates: tuple[tuple[str, float], ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The linked-corpus JSON form (``data_specs/linked_corpus``)."""
        return {
            "start": self.start,
            "end": self.end,
            "text": self.text,
            "entity": self.entity_id,
            "score": round(self.score, 4),
        }


class EntityLinker:
    """Link mentions of knowledge-graph entities in text (the ERNIE-THU preprocessing step).

    ERNIE (Zhang et al., 2019) links with TAGME; this linker needs only the KG's alias
    table. Pipeline (``docs/knowledge/linking.md`` has the details and measurements):

    1. **Mention detection**: every surface form of the alias table is tokenized once with
       the pipeline's tokenizer into a phrase index (token texts -> alias key; lower-cased
       texts in ``insensitive`` mode), and a document's token sequences are looked up in
       it, as spaCy's ``PhraseMatcher``/``entity_ruler`` would match them. Overlapping
       matches are resolved to the longest one, then the earliest ("Danube Delta" over
       "Danube"). Unlike ``entity_ruler`` patterns (a spaCy ``Doc`` per alias), the index
       is one dict of strings, so it scales to a 1M-entity KG.
    2. **Guard** (``guard="pos"``, :class:`~ptm_knowledge.linking.guard.MentionGuard`):
       function words (spaCy stop words, numbers, punctuation) are never linked unless
       they are names, and a match must be a noun: its head tagged ``NOUN``/``PROPN`` when
       the pipeline has a tagger, else a noun share (``pos_prior``) of at least
       ``min_noun_share``.
    3. **Candidates**: the entities sharing the matched alias, with their priors; with
       ``disambiguation="context"`` a plural alias also offers its singular's entities,
       and an ambiguous alias's priors are weighted by KG popularity (degree).
    4. **Ranking**: ``overlap = n / (n + overlap_smoothing)``, where ``n`` counts distinct
       content words within ``context_window`` tokens of the mention that also occur in
       the entity's context bag (its type, description and its KG neighbours' names).
       ``disambiguation="context"``: ``score = prior_weight * prior * noun + (1 -
       prior_weight) * overlap`` with ``noun`` the guard's noun likeness, and plural "s"
       folded on both sides ("wolves"/"wolf" do not meet, "rays"/"ray" do).
       ``disambiguation="overlap"`` (the linker before #38): ``score = prior_weight *
       prior + (1 - prior_weight) * overlap``.
    5. **NIL threshold**: the best candidate is kept if its score is at least
       ``threshold``. With ``prior_weight`` below ``threshold`` no alias is linked on its
       prior alone: even an unambiguous one needs a context word in common with the
       entity. The default was calibrated on held-out WordNet gloss gold
       (``benchmarks/results/wordnet_linking.md``).

    ``guard="none", disambiguation="overlap", threshold=0.3, prior_weight=0.5``
    (:data:`LEGACY_SETTINGS`) gives the output of the linker before #38 exactly.

    Args:
        kg: the knowledge graph (entity table with aliases; triples are optional).
        nlp: a spaCy pipeline; default ``spacy.blank("en")``. A trained pipeline works as
            well: documents go through it, and the guard reads its part-of-speech tags.
        case: alias matching: ``"smart"`` (capitalised aliases match exactly, lower-case
            ones also capitalised), ``"sensitive"`` or ``"insensitive"``.
        threshold: minimum score of a linked mention (the NIL threshold).
        prior_weight: weight of the alias prior against context overlap.
        context_window: tokens on each side of a mention used as its context.
        overlap_smoothing: the ``k`` of ``n / (n + k)``.
        guard: ``"pos"`` (default) or ``"none"`` (link every alias match).
        disambiguation: ``"context"`` (default) or ``"overlap"`` (before #38).
        pos_prior: the noun-share prior for untagged text: ``"english"`` (built in, from
            WordNet 3.0), a TSV path (``word<TAB>share``), a :class:`NounShare`, or
            ``None`` (the guard keeps only its function-word rule on untagged text).
        min_noun_share: lowest noun share of a linked untagged word.
    """

    def __init__(
        self,
        kg: KnowledgeGraph,
        nlp: Any = None,
        *,
        case: CaseMode = "smart",
        threshold: float = DEFAULT_THRESHOLD,
        prior_weight: float = 0.5,
        context_window: int = 40,
        overlap_smoothing: float = 2.0,
        guard: GuardMode = "pos",
        disambiguation: Disambiguation = "context",
        pos_prior: str | Path | NounShare | None = "english",
        min_noun_share: float = 0.5,
    ) -> None:
        import spacy

        if not 0.0 <= prior_weight <= 1.0:
            raise ValueError(f"prior_weight must be in [0, 1], got {prior_weight}")
        if guard not in GUARD_MODES:
            raise ValueError(f"guard must be one of {GUARD_MODES}, got {guard!r}")
        if disambiguation not in DISAMBIGUATIONS:
            raise ValueError(
                f"disambiguation must be one of {DISAMBIGUATIONS}, got {disambiguation!r}"
            )
        self.kg = kg
        self.nlp = nlp if nlp is not None else spacy.blank("en")
        self.case = case
        self.threshold = threshold
        self.prior_weight = prior_weight
        self.context_window = context_window
        self.overlap_smoothing = overlap_smoothing
        self.disambiguation = disambiguation
        self._fold = disambiguation == "context"
        self._indptr: np.ndarray | None = None
        self.guard: MentionGuard | None = None
        if guard == "pos":
            prior = pos_prior
            if prior is not None and not isinstance(prior, NounShare):
                prior = NounShare.load(prior)
            self.guard = MentionGuard(prior, min_noun_share)
        self.aliases = AliasTable(kg, case, tokenize=self.content_words)
        # alias key id -> the key (the KG's spelling), for the guard's name rule
        self._alias_keys = list(self.aliases.key_index) if self.guard or self._fold else []
        self._lower = case == "insensitive"
        # phrase (token texts joined) -> alias key id; first token -> longest phrase length
        self.phrases: dict[str, int] = {}
        self.longest: dict[str, int] = {}
        pending: list[tuple[str, int]] = []
        # with the guard, a form spelt as the KG spells it beats a capitalised variant
        self._overwrite = self.guard is not None
        for item in self.aliases.surface_variants(exact_wins=self._overwrite):
            pending.append(item)
            if len(pending) == 4096:
                self._add_phrases(pending)
                pending = []
        self._add_phrases(pending)

    def _add_phrases(self, items: list[tuple[str, int]]) -> None:
        tokenizer: Any = self.nlp.tokenizer
        texts = [text for text, _ in items]
        for (_, key_id), doc in zip(items, tokenizer.pipe(texts, batch_size=1024), strict=True):
            words = [t.lower_ if self._lower else t.text for t in doc]
            if not words:
                continue
            if self._overwrite:
                self.phrases[_TOKEN_JOIN.join(words)] = key_id
            else:
                self.phrases.setdefault(_TOKEN_JOIN.join(words), key_id)
            if len(words) > self.longest.get(words[0], 0):
                self.longest[words[0]] = len(words)

    def content_words(self, text: str) -> list[str]:
        """Lower-case alphabetic non-stop-words of ``text`` (for context bags), plural "s"
        folded with ``disambiguation="context"``."""
        words = [
            t.lower_ for t in self.nlp.make_doc(text) if t.is_alpha and not t.is_stop and len(t) > 2
        ]
        return [_fold(w) for w in words] if self._fold else words

    def matches(self, doc: Any) -> list[tuple[int, int, int]]:
        """``(start token, end token, alias key id)`` of the alias matches kept in ``doc``:
        every match, then the longest first (the earliest among equals), dropping those that
        overlap one kept before; in document order."""
        words = [t.lower_ if self._lower else t.text for t in doc]
        found: list[tuple[int, int, int]] = []
        phrases, longest, n = self.phrases, self.longest, len(words)
        for start, word in enumerate(words):
            most = longest.get(word)
            if most is None:
                continue
            for length in range(min(most, n - start), 0, -1):
                key_id = phrases.get(_TOKEN_JOIN.join(words[start : start + length]))
                if key_id is not None:
                    found.append((start, start + length, key_id))
        found.sort(key=lambda m: (m[0] - m[1], m[0]))
        taken: set[int] = set()
        kept = []
        for start, end, key_id in found:
            if start in taken or end - 1 in taken:
                continue
            kept.append((start, end, key_id))
            taken.update(range(start, end))
        kept.sort()
        return kept

    def _rank(
        self, content: list[str | None], start: int, end: int, key_id: int, noun: float = 1.0
    ) -> list[tuple[str, float]]:
        lo = max(0, start - self.context_window)
        hi = min(len(content), end + self.context_window)
        context = {w for w in (*content[lo:start], *content[end:hi]) if w is not None}
        entities, priors = self._candidates(key_id)
        bags = self.aliases.context_bags
        bag_of = bags.bag if isinstance(bags, ContextBags) else None
        ids = self.kg.entities.ids
        scored = []
        for entity, prior in zip(entities.tolist(), priors.tolist(), strict=True):
            entity_id = ids[entity]
            bag = bag_of(entity) if bag_of is not None else bags.get(entity_id, frozenset())
            n = len(context & bag)
            overlap = n / (n + self.overlap_smoothing)
            score = self.prior_weight * prior * noun + (1 - self.prior_weight) * overlap
            scored.append((entity_id, score))
        scored.sort(key=lambda item: -item[1])
        return scored

    def _candidates(self, key_id: int) -> tuple[np.ndarray, np.ndarray]:
        """Entity indices and priors of an alias key. With context ranking, a plural alias
        ("bones", the castanets) also offers its singular's entities ("bone"), which
        the plural is far more often the plural of, and the priors of an ambiguous alias
        are weighted by popularity."""
        entities, priors = self.aliases.candidate_rows(key_id)
        if not self._fold:
            return entities, priors
        key = self._alias_keys[key_id]
        singular = self.aliases.key_index.get(key[:-1]) if _fold(key) != key else None
        if singular is not None:
            more, more_priors = self.aliases.candidate_rows(singular)
            entities = np.concatenate([entities, more])
            priors = np.concatenate([priors, more_priors]) / 2
            entities, first = np.unique(entities, return_index=True)
            priors = priors[first]
        if len(entities) > 1:
            priors = self._popular(entities, priors)
        return entities, priors

    def _popular(self, entities: np.ndarray, priors: np.ndarray) -> np.ndarray:
        """Priors of an ambiguous alias scaled by entity popularity, ``1 + log(1 + degree)``
        in the KG, and renormalised: a KG relates its common senses more ("horse" the
        animal has dozens of kinds and parts, the gymnastics horse two)."""
        if self._indptr is None:
            # a plain view: indexing the KG's memory-mapped array builds a memmap per call
            self._indptr = np.asarray(self.kg.adjacency.indptr)
        indptr = self._indptr
        degree = (indptr[entities + 1] - indptr[entities]).astype(np.float64)
        weighted = priors * (1.0 + np.log1p(degree))
        return weighted / weighted.sum()

    def mentions_of(self, doc: Any) -> list[Mention]:
        """Linked mentions of an already processed spaCy ``Doc``."""
        matches = self.matches(doc)
        if not matches:
            return []
        content: list[str | None] = [
            t.lower_ if t.is_alpha and not t.is_stop and len(t) > 2 else None for t in doc
        ]
        if self._fold:
            content = [None if w is None else _fold(w) for w in content]
        out: list[Mention] = []
        for start, end, key_id in matches:
            noun = 1.0
            if self.guard is not None:
                likeness = self.guard.noun_likeness(doc, start, end, self._alias_keys[key_id])
                if likeness is None:
                    continue
                if self.disambiguation == "context":
                    noun = likeness
            ranked = self._rank(content, start, end, key_id, noun)
            best, score = ranked[0]
            if score < self.threshold:
                continue
            span = doc[start:end]
            out.append(
                Mention(span.start_char, span.end_char, span.text, best, score, tuple(ranked))
            )
        return out

    def link(self, text: str) -> list[Mention]:
        """Linked mentions of one text."""
        return self.mentions_of(self.nlp(text))

    def link_batch(self, texts: Iterable[str], batch_size: int = 64) -> Iterator[list[Mention]]:
        """Linked mentions of many texts, processed in batches with ``nlp.pipe``."""
        for doc in self.nlp.pipe(texts, batch_size=batch_size):
            yield self.mentions_of(doc)


def linking_scores(
    predicted: Sequence[Sequence[Mention | tuple[int, int, str]]],
    gold: Sequence[Sequence[Mention | tuple[int, int, str]]],
) -> dict[str, float]:
    """Strict precision, recall and F1: a prediction counts if span and entity both match.

    Args:
        predicted: per text, mentions or ``(start, end, entity_id)`` tuples.
        gold: per text, the gold mentions in the same form.
    """
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted texts but {len(gold)} gold texts")

    def keyed(items: Sequence[Mention | tuple[int, int, str]]) -> set[tuple[int, int, str]]:
        out: set[tuple[int, int, str]] = set()
        for m in items:
            out.add((m.start, m.end, m.entity_id) if isinstance(m, Mention) else (m[0], m[1], m[2]))
        return out

    tp = fp = fn = 0
    for p, g in zip(predicted, gold, strict=True):
        ps, gs = keyed(p), keyed(g)
        tp += len(ps & gs)
        fp += len(ps - gs)
        fn += len(gs - ps)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "tp": tp, "fp": fp, "fn": fn}
