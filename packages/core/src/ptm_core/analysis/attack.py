"""A greedy word-substitution attack on a text classifier (TextFooler; Jin et al., 2020).

For each example the classifier gets right:

1. **Word importance by deletion.** Each attackable word (a letter in it, no stop word) is
   deleted in turn; its importance is the drop of the true class's probability,
   ``p_y(x) - p_y(x without w)``, plus ``p_z(x without w) - p_z(x)`` when the deletion
   alone changes the prediction to ``z`` (Jin et al.'s eq. 2).
2. **Greedy substitution**, words in falling importance: the word's candidates (a
   :class:`~ptm_core.analysis.attack_candidates.CandidateSource`) are each put in its place.
   If some change the prediction, the best-ranked of them (most similar, most probable) is
   kept and the attack has succeeded; otherwise the candidate that lowers the true class's
   probability most is kept, if it lowers it at all.
3. It stops at success, when the words run out, or when the budget is spent: at most
   ``floor(share * words)`` words changed (``words`` counts every word of the attacked
   text, stop words included), and at most ``max_words`` when given.

Several budgets cost one run: the greedy path does not depend on the budget (a smaller one
stops earlier on the same path), so the attack runs once with the largest and
:meth:`AttackTrace.at` cuts the path at each budget (its queries too).

For a sentence pair the second text is attacked (the hypothesis, as Jin et al. do for NLI).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ptm_core.analysis.attack_candidates import CandidateSource
from ptm_core.analysis.attack_classifier import SequenceClassifier
from ptm_core.analysis.attack_words import WordSpan, is_attackable, with_words, word_spans
from ptm_core.finetune.data.examples import SentenceExample
from ptm_core.progress import track


def word_limit(share: float, words: int, max_words: int | None = None) -> int:
    """Words the attack may change in a text of ``words`` words."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"a budget is a share of the words in [0, 1], got {share}")
    limit = math.floor(share * words + 1e-9)  # 0.29 * 100 is 28.999...
    return limit if max_words is None else min(limit, max_words)


@dataclass(frozen=True)
class Substitution:
    """One word changed: its index among the text's words, old and new, the classifier's
    queries spent when it was kept, and the true class's probability after it."""

    index: int
    old: str
    new: str
    queries: int
    true_probability: float


@dataclass
class AttackTrace:
    """The greedy path of one example under the largest budget.

    Attributes:
        example: the example (``label`` the true class index).
        spans: the words of the attacked text.
        prediction: the class predicted on the clean text.
        probability: the true class's probability on the clean text.
        substitutions: the words changed, in order.
        succeeded: whether the last substitution changed the prediction.
        final_prediction: the class predicted after the last substitution.
        queries: all classifier queries (the clean prediction included).
    """

    example: SentenceExample
    spans: list[WordSpan]
    prediction: int
    probability: float
    substitutions: list[Substitution] = field(default_factory=list)
    succeeded: bool = False
    final_prediction: int = -1
    queries: int = 1

    @property
    def attacked_text(self) -> str:
        """The text the attack changes (the pair's second text, or the only one)."""
        return self.example.pair if self.example.pair is not None else self.example.text

    @property
    def label(self) -> int:
        """The true class index (:func:`attack_example` refuses unlabelled examples)."""
        label = self.example.label
        if label is None:
            raise ValueError(f"line {self.example.line}: the example has no label")
        return int(label)

    @property
    def correct(self) -> bool:
        """Whether the clean text was classified right (only those are attacked)."""
        return self.prediction == self.example.label

    def at(self, limit: int) -> dict[str, Any]:
        """The attack as it stands with at most ``limit`` words changed.

        Returns:
            ``{"status": "skipped" | "succeeded" | "failed", "changed": [...], "queries",
            "perturbed_share", "adversarial", "prediction"}``.
        """
        if not self.correct:
            return {
                "status": "skipped",
                "changed": [],
                "queries": 1,
                "perturbed_share": 0.0,
                "adversarial": self.attacked_text,
                "prediction": self.prediction,
            }
        kept = self.substitutions[:limit]
        won = self.succeeded and len(self.substitutions) <= limit
        if limit == 0:
            queries = 1  # a run with nothing to change only predicts
        elif won or len(self.substitutions) < limit:
            queries = self.queries
        else:  # that run stops right after its last allowed change
            queries = kept[-1].queries
        text = with_words(self.attacked_text, self.spans, {s.index: s.new for s in kept})
        return {
            "status": "succeeded" if won else "failed",
            "changed": [{"index": s.index, "old": s.old, "new": s.new} for s in kept],
            "queries": queries,
            "perturbed_share": len(kept) / max(len(self.spans), 1),
            "adversarial": text,
            # only the last substitution of a path can change the prediction
            "prediction": self.final_prediction if won else self.prediction,
        }


def _variant(example: SentenceExample, text: str) -> SentenceExample:
    if example.pair is not None:
        return SentenceExample(example.text, text, example.label, example.id, example.line)
    return SentenceExample(text, None, example.label, example.id, example.line)


def _importance(
    classifier: SequenceClassifier,
    trace: AttackTrace,
    probabilities: Sequence[float],
) -> list[int]:
    """Attackable word indices, most important first (ties: earlier word first)."""
    label = trace.label
    candidates = [i for i, s in enumerate(trace.spans) if is_attackable(s.text)]
    if not candidates:
        return []
    deleted = [
        _variant(trace.example, with_words(trace.attacked_text, trace.spans, {i: ""}))
        for i in candidates
    ]
    scores = classifier.probabilities(deleted)
    trace.queries += len(deleted)
    importance = []
    for row, index in zip(scores.tolist(), candidates, strict=True):
        score = probabilities[label] - row[label]
        other = max(range(len(row)), key=row.__getitem__)
        if other != label:
            score += row[other] - probabilities[other]
        importance.append((-score, index))
    return [index for _score, index in sorted(importance)]


def attack_example(
    classifier: SequenceClassifier,
    source: CandidateSource,
    example: SentenceExample,
    limit: int,
) -> AttackTrace:
    """The greedy attack of one labelled example with at most ``limit`` words changed."""
    if example.label is None:
        raise ValueError(f"line {example.line}: the example has no label")
    label = int(example.label)
    text = example.pair if example.pair is not None else example.text
    spans = word_spans(text)
    clean = classifier.probabilities([example])[0].tolist()
    prediction = max(range(len(clean)), key=clean.__getitem__)
    trace = AttackTrace(example, spans, prediction, clean[label], final_prediction=prediction)
    if prediction != label or limit == 0:
        return trace
    current: dict[int, str] = {}
    true_probability = clean[label]
    for index in _importance(classifier, trace, clean):
        if len(trace.substitutions) >= limit:
            break
        now = with_words(text, spans, current)
        now_spans = word_spans(now)
        if len(now_spans) != len(spans):  # a substitute is always one word
            raise AssertionError(f"line {example.line}: words shifted after a substitution")
        candidates = source(now, now_spans, index)
        if not candidates:
            continue
        variants = [
            _variant(example, with_words(text, spans, {**current, index: word}))
            for word in candidates
        ]
        scores = classifier.probabilities(variants)
        trace.queries += len(variants)
        predictions = scores.argmax(-1).tolist()
        flipped = [j for j, p in enumerate(predictions) if p != label]
        if flipped:
            best = flipped[0]  # the source ranks its candidates (most similar first)
        else:
            best = int(scores[:, label].argmin())
            if float(scores[best, label]) >= true_probability:
                continue
        true_probability = float(scores[best, label])
        current[index] = candidates[best]
        trace.substitutions.append(
            Substitution(
                index, spans[index].text, candidates[best], trace.queries, true_probability
            )
        )
        if flipped:
            trace.succeeded = True
            trace.final_prediction = int(predictions[best])
            break
    return trace


def run_attack(
    classifier: SequenceClassifier,
    source: CandidateSource,
    examples: Sequence[SentenceExample],
    budgets: Sequence[float],
    *,
    max_words: int | None = None,
) -> tuple[list[AttackTrace], dict[float, dict[str, Any]]]:
    """Attack every example once under the largest budget and report each budget.

    Args:
        classifier: the model under attack.
        source: where substitutes come from.
        examples: labelled examples (``read`` of the classifier).
        budgets: shares of each text's words that may change (``0`` changes nothing).
        max_words: also at most this many words per text.

    Returns:
        ``(traces, {budget: summary})`` with :func:`summarize`'s summaries.
    """
    if not budgets:
        raise ValueError("give at least one budget (a share of the words, e.g. 0.2)")
    if max_words is not None and max_words < 0:
        raise ValueError(f"max_words must be >= 0, got {max_words}")
    for share in budgets:
        word_limit(share, 1)
    largest = max(budgets)
    traces = []
    for example in track(examples, "attack", len(examples), "example"):
        limit = word_limit(largest, len(word_spans(_attacked(example))), max_words)
        traces.append(attack_example(classifier, source, example, limit))
    return traces, {share: summarize(traces, share, max_words) for share in budgets}


def _attacked(example: SentenceExample) -> str:
    return example.pair if example.pair is not None else example.text


def summarize(
    traces: Sequence[AttackTrace], share: float, max_words: int | None = None
) -> dict[str, Any]:
    """The attack's figures at one budget.

    Returns:
        ``examples``, ``clean_accuracy``, ``attacked_accuracy`` (right after the attack),
        ``attacked`` (examples right before it), ``succeeded``, ``success_rate`` (over the
        attacked), ``perturbed_share`` (mean share of words changed in successful attacks,
        as Jin et al. report it), ``perturbed_share_all`` (over all attacked),
        ``queries_per_example`` (mean over the attacked, the clean prediction included).
    """
    outcomes = [t.at(word_limit(share, len(t.spans), max_words)) for t in traces]
    attacked = [o for o in outcomes if o["status"] != "skipped"]
    won = [o for o in attacked if o["status"] == "succeeded"]
    n = max(len(traces), 1)
    return {
        "budget": share,
        "examples": len(traces),
        "attacked": len(attacked),
        "succeeded": len(won),
        "clean_accuracy": len(attacked) / n,
        "attacked_accuracy": (len(attacked) - len(won)) / n,
        "success_rate": len(won) / len(attacked) if attacked else 0.0,
        "perturbed_share": sum(o["perturbed_share"] for o in won) / len(won) if won else 0.0,
        "perturbed_share_all": (
            sum(o["perturbed_share"] for o in attacked) / len(attacked) if attacked else 0.0
        ),
        "queries_per_example": (
            sum(o["queries"] for o in attacked) / len(attacked) if attacked else 0.0
        ),
    }


__all__ = [
    "AttackTrace",
    "Substitution",
    "attack_example",
    "run_attack",
    "summarize",
    "word_limit",
]
