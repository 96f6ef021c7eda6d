"""Linking against gold mentions: precision, recall and F1 of spans and of span + entity,
an error breakdown, the NIL threshold calibrated on held-out gold, and WordNet's gloss gold.

Gold and predictions are linked corpora (``data_specs/linked_corpus``), matched by
document id. Every linked mention (at or above the threshold) falls in exactly one class:

* **correct**: the span of a gold mention, with its entity;
* **wrong entity**: the span of a gold mention, another entity;
* **wrong span**: overlaps a gold mention, other boundaries;
* **spurious**: overlaps no gold mention of a *complete* gold document;
* **unjudged**: overlaps no gold mention of a *partial* one (``"complete": false``): the
  gold cannot tell whether it is right, so it is counted and left out of precision.

A gold mention not linked correctly is **missed**. Precision is over the judged links
(all but the unjudged), recall over the gold mentions; the span level counts a link right
when its span is a gold span, whatever the entity.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ptm_knowledge.linking.corpus import LinkedDocument, SentenceMention

if TYPE_CHECKING:
    from ptm_knowledge.kg.wordnet import WordNet

Outcome = Literal["correct", "wrong_entity", "wrong_span", "spurious", "unjudged"]
OUTCOMES: tuple[Outcome, ...] = ("correct", "wrong_entity", "wrong_span", "spurious", "unjudged")
# Error examples kept in a report (the counts are always whole).
MAX_EXAMPLES = 50


def _ratio(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else 0.0


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


@dataclass
class LinkingReport:
    """What :func:`evaluate_linking` measured.

    Attributes:
        threshold: links scoring below it were dropped (``None``: none dropped).
        gold: gold mentions.
        counts: links per outcome (``correct``, ``wrong_entity``, ``wrong_span``,
            ``spurious``, ``unjudged``).
        missed: gold mentions not linked correctly.
        examples: up to :data:`MAX_EXAMPLES` errors, each with document, sentence, span,
            text, the linked and the gold entity.
    """

    threshold: float | None
    gold: int
    counts: dict[str, int]
    missed: int
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def linked(self) -> int:
        """Links at or above the threshold."""
        return sum(self.counts.values())

    @property
    def judged(self) -> int:
        """Links the gold can judge (all but the unjudged)."""
        return self.linked - self.counts["unjudged"]

    def scores(self, level: Literal["span", "entity"]) -> dict[str, float]:
        """Precision, recall and F1 at one level: ``span`` or ``entity`` (span + entity)."""
        right = self.counts["correct"]
        if level == "span":
            right += self.counts["wrong_entity"]
        precision = _ratio(right, self.judged)
        recall = _ratio(right, self.gold)
        return {"precision": precision, "recall": recall, "f1": _f1(precision, recall)}

    def to_dict(self) -> dict[str, Any]:
        """The report's JSON form."""
        return {
            "threshold": self.threshold,
            "gold_mentions": self.gold,
            "linked": self.linked,
            "judged": self.judged,
            "span": _rounded(self.scores("span")),
            "span_and_entity": _rounded(self.scores("entity")),
            "errors": {
                "wrong_span": self.counts["wrong_span"],
                "wrong_entity": self.counts["wrong_entity"],
                "spurious": self.counts["spurious"],
                "missed": self.missed,
                "unjudged": self.counts["unjudged"],
            },
            "examples": self.examples,
        }


def _rounded(scores: dict[str, float]) -> dict[str, float]:
    return {key: round(value, 4) for key, value in scores.items()}


def pair_documents(
    predicted: Iterable[LinkedDocument], gold: Iterable[LinkedDocument]
) -> list[tuple[LinkedDocument, LinkedDocument]]:
    """``(prediction, gold)`` per gold document, matched by id.

    Raises:
        ValueError: an id in one set and not the other, or a document whose sentences differ.
    """
    by_id = {doc.doc_id: doc for doc in predicted}
    gold_docs = list(gold)
    gold_ids = {doc.doc_id for doc in gold_docs}
    missing = [doc.doc_id for doc in gold_docs if doc.doc_id not in by_id]
    extra = [doc_id for doc_id in by_id if doc_id not in gold_ids]
    for ids, where, fix in (
        (missing, "in the gold but not in the predictions", "link every gold document"),
        (extra, "in the predictions but not in the gold", "predict the gold documents only"),
    ):
        if ids:
            shown = ", ".join(repr(i) for i in ids[:3]) + (" ..." if len(ids) > 3 else "")
            raise ValueError(f"{len(ids)} document id(s) {where}: {shown}; {fix}")
    pairs = []
    for doc in gold_docs:
        prediction = by_id[doc.doc_id]
        if prediction.sentences != doc.sentences:
            raise ValueError(
                f"document {doc.doc_id!r}: the predictions' sentences differ from the gold's; "
                "link the gold file's own sentences"
            )
        pairs.append((prediction, doc))
    return pairs


def classify(
    prediction: LinkedDocument, gold: LinkedDocument
) -> list[tuple[Outcome, SentenceMention, str | None]]:
    """Each link of ``prediction`` with its outcome and the gold entity it met (if any)."""
    spans: dict[tuple[int, int, int], str] = {
        (m.sentence, m.start, m.end): m.entity_id for m in gold.mentions
    }
    out: list[tuple[Outcome, SentenceMention, str | None]] = []
    for mention in prediction.mentions:
        key = (mention.sentence, mention.start, mention.end)
        outcome: Outcome
        if key in spans:
            expected: str | None = spans[key]
            outcome = "correct" if expected == mention.entity_id else "wrong_entity"
        else:
            overlapping = [
                entity
                for (sentence, start, end), entity in spans.items()
                if sentence == mention.sentence and start < mention.end and mention.start < end
            ]
            expected = overlapping[0] if overlapping else None
            if overlapping:
                outcome = "wrong_span"
            elif gold.complete:
                outcome = "spurious"
            else:
                outcome = "unjudged"
        out.append((outcome, mention, expected))
    return out


def _score(mention: SentenceMention) -> float:
    # A prediction file without scores (another linker's output): every link counts.
    return 1.0 if mention.score is None else float(mention.score)


def evaluate_linking(
    predicted: Iterable[LinkedDocument],
    gold: Iterable[LinkedDocument],
    *,
    threshold: float | None = None,
) -> LinkingReport:
    """Score linked documents against gold ones (module docstring: the outcomes).

    Args:
        predicted: linked documents (``ptm link`` output, or the linker's own).
        gold: gold documents with the same ids and sentences.
        threshold: drop links scoring below it (links without a score are kept).
    """
    counts: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
    gold_total = 0
    examples: list[dict[str, Any]] = []
    for prediction, reference in pair_documents(predicted, gold):
        gold_total += len(reference.mentions)
        for outcome, mention, expected in classify(prediction, reference):
            if threshold is not None and _score(mention) < threshold:
                continue
            counts[outcome] += 1
            if outcome not in ("correct", "unjudged") and len(examples) < MAX_EXAMPLES:
                examples.append(
                    {
                        "id": reference.doc_id,
                        "sentence": mention.sentence,
                        "start": mention.start,
                        "end": mention.end,
                        "text": reference.sentences[mention.sentence][mention.start : mention.end],
                        "error": outcome,
                        "linked": mention.entity_id,
                        "gold": expected,
                    }
                )
    return LinkingReport(threshold, gold_total, counts, gold_total - counts["correct"], examples)


def calibrate_nil_threshold(
    predicted: Iterable[LinkedDocument],
    gold: Iterable[LinkedDocument],
    *,
    strict: bool = False,
) -> tuple[float, list[dict[str, float]]]:
    """The NIL threshold: the link score that maximises span + entity F1 on held-out gold.

    Every distinct score is tried (a link's outcome does not depend on the threshold, so
    one pass sorts them and the sweep is cumulative); ties go to the lowest threshold.

    Args:
        predicted: links made with threshold 0, so that every candidate link has a score.
        gold: the held-out gold documents.
        strict: count unjudged links (partial gold) as wrong. On partial gold an unjudged
            link costs nothing, so the F1-best threshold without ``strict`` links all.

    Returns:
        ``(threshold, table)``; the table has ``threshold``, ``precision``, ``recall``,
        ``f1`` and ``linked`` per tried threshold, highest threshold first.
    """
    scored: list[tuple[float, Outcome]] = []
    gold_total = 0
    for prediction, reference in pair_documents(predicted, gold):
        gold_total += len(reference.mentions)
        scored += [(_score(m), outcome) for outcome, m, _ in classify(prediction, reference)]
    scored.sort(key=lambda item: -item[0])
    table: list[dict[str, float]] = []
    correct = judged = linked = 0
    for i, (score, outcome) in enumerate(scored):
        linked += 1
        correct += outcome == "correct"
        judged += strict or outcome != "unjudged"
        if i + 1 < len(scored) and scored[i + 1][0] == score:
            continue
        precision, recall = _ratio(correct, judged), _ratio(correct, gold_total)
        table.append(
            {
                # floored, so that a link scoring exactly this stays above it
                "threshold": math.floor(score * 1e4) / 1e4,
                "precision": round(precision, 4),
                "recall": round(recall, 4),
                "f1": round(_f1(precision, recall), 4),
                "linked": linked,
            }
        )
    if not table:
        raise ValueError("no links to calibrate on: link the gold documents with threshold 0")
    best = max(table, key=lambda row: (row["f1"], -row["threshold"]))
    return best["threshold"], table


def _clean(text: str) -> str:
    return " ".join(text.split())


def wordnet_gloss_gold(wordnet: WordNet) -> list[LinkedDocument]:
    """A partial gold from WordNet's noun glosses: one document per noun synset S (its
    definition, whitespace collapsed), whose mentions are the occurrences of a lemma of a
    noun synset T that S points to (any relation), as T; longest first, no overlaps.

    Limits (``docs/knowledge/evaluate-linking.md``): only the synsets S points to are
    labelled, so a correct link to any other synset is unjudged (``complete: false``);
    lemmas are matched as written (case and inflection: "dogs" is no mention of "dog");
    a lemma of T that names another sense in the gloss is still labelled T.
    """
    nouns = {s.id: s for s in wordnet if s.pos == "n"}
    documents = []
    for synset in nouns.values():
        text = _clean(synset.definition)
        found: list[tuple[int, int, str]] = []
        for target in dict.fromkeys(p.target for p in synset.pointers if p.target in nouns):
            for lemma in nouns[target].lemmas:
                pattern = r"(?<![\w-])" + re.escape(lemma.replace("_", " ")) + r"(?![\w-])"
                found += [(m.start(), m.end(), target) for m in re.finditer(pattern, text)]
        found.sort(key=lambda f: (f[0] - f[1], f[0]))
        taken: set[int] = set()
        mentions = []
        for start, end, target in found:
            if not taken.intersection(range(start, end)):
                taken.update(range(start, end))
                mentions.append(SentenceMention(0, start, end, target))
        mentions.sort(key=lambda m: m.start)
        documents.append(LinkedDocument(synset.id, [text], mentions, complete=False))
    return documents


def link_gold_documents(linker: Any, gold: Sequence[LinkedDocument]) -> list[LinkedDocument]:
    """The gold documents' sentences linked by ``linker`` (an :class:`EntityLinker`)."""
    from ptm_knowledge.linking.corpus import linked_from_mentions

    sentences = [s for doc in gold for s in doc.sentences]
    linked = iter(linker.link_batch(sentences))
    return [
        linked_from_mentions(doc.doc_id, doc.sentences, [next(linked) for _ in doc.sentences])
        for doc in gold
    ]
