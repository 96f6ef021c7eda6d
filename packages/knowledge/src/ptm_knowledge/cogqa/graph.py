"""The cognitive graph of CogQA and its breadth-first growth.

CogQA (Ding et al., 2019, "Cognitive Graph for Multi-Hop Reading Comprehension at Scale")
grows a directed graph while reading: each visited node's paragraph is read by System 1
with the question and the node's *clues* (the sentences of its predecessors that mention
it); the spans found become next-hop nodes (with a paragraph to read) and answer nodes,
connected by edges from the node that mentioned them. This module holds that logic and is
independent of the neural reader: anything with a ``read`` method of the
:class:`SpanReader` protocol drives it (tests use a hand-made reader).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ptm_knowledge.cogqa.evaluation import normalize_answer
from ptm_knowledge.cogqa.examples import MultiHopExample


@dataclass(frozen=True)
class Span:
    """A span found by the reader: its text, sentence index in the paragraph, score."""

    text: str
    sentence: int
    score: float = 0.0


@dataclass
class ReadResult:
    """What System 1 extracts from one paragraph: next-hop spans and answer spans."""

    hop_spans: list[Span] = field(default_factory=list)
    answer_spans: list[Span] = field(default_factory=list)


class SpanReader(Protocol):
    """System 1 as seen by the graph: read ``[CLS] question [SEP] clues [SEP] paragraph``."""

    def read(self, question: str, clues: Sequence[str], paragraph: Sequence[str]) -> ReadResult:
        """Return the top-k hop and answer spans above the reader's threshold."""
        ...


@dataclass(frozen=True)
class Clue:
    """A sentence of a predecessor that mentions a node: ``(title, sentence index, text)``."""

    title: str
    sentence: int
    text: str


@dataclass
class CogNode:
    """A node of the cognitive graph.

    Args:
        title: entity title (a context paragraph's title when resolved, else the span text).
        depth: hops from the question (question entities have depth 0).
        is_question: linked from the question.
        is_hop: extracted as a next-hop span.
        is_answer: extracted as an answer span (a candidate answer).
        answer_score: best answer-span score that produced it (``-inf`` if none).
        clues: predecessor sentences that mention it, in discovery order.
        parent: index of the node that first mentioned it (``None`` for question nodes).
        read: whether its paragraph was read by System 1.
    """

    title: str
    depth: int
    is_question: bool = False
    is_hop: bool = False
    is_answer: bool = False
    answer_score: float = float("-inf")
    clues: list[Clue] = field(default_factory=list)
    parent: int | None = None
    read: bool = False


@dataclass
class CognitiveGraph:
    """Nodes plus directed edges ``(src, dst, sentence index in src's paragraph)``."""

    nodes: list[CogNode] = field(default_factory=list)
    edges: list[tuple[int, int, int]] = field(default_factory=list)

    def find(self, title: str) -> int | None:
        """Index of the node whose normalised title equals ``title``'s, or ``None``."""
        key = normalize_answer(title)
        for i, node in enumerate(self.nodes):
            if normalize_answer(node.title) == key:
                return i
        return None

    def answer_nodes(self) -> list[int]:
        """Indices of candidate answer nodes."""
        return [i for i, node in enumerate(self.nodes) if node.is_answer]

    def titles(self) -> list[str]:
        """Node titles in index order."""
        return [node.title for node in self.nodes]

    def edge_index(self) -> list[tuple[int, int]]:
        """Distinct ``(src, dst)`` pairs (the adjacency ``A`` of System 2)."""
        return sorted({(s, d) for s, d, _ in self.edges})

    def supporting_facts(self, node: int) -> list[tuple[str, int]]:
        """The ``(title, sentence)`` facts on the discovery path from the question to ``node``."""
        facts: list[tuple[str, int]] = []
        current: int | None = node
        seen: set[int] = set()
        while current is not None and current not in seen:
            seen.add(current)
            parent = self.nodes[current].parent
            if parent is not None:
                sentence = next(s for src, dst, s in self.edges if src == parent and dst == current)
                facts.append((self.nodes[parent].title, sentence))
            current = parent
        return facts[::-1]


def _surface_forms(example: MultiHopExample) -> list[tuple[str, str]]:
    """``(surface form, title)`` for every context title and alias, longest form first."""
    forms = [(title, title) for title, _ in example.context]
    for title, aliases in example.aliases.items():
        forms += [(alias, title) for alias in aliases if example.paragraph(title) is not None]
    return sorted(forms, key=lambda f: (-len(f[0]), f[0]))


def link_question_entities(example: MultiHopExample) -> list[str]:
    """Context titles mentioned in the question by title or alias (longest match wins).

    Matching is case-insensitive on word boundaries; matched character ranges cannot
    overlap, so "Paris Observatory" blocks "Paris".

    Returns:
        Titles in order of first mention.
    """
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, str]] = []
    question = example.question
    for form, title in _surface_forms(example):
        pattern = re.compile(r"(?<!\w)" + re.escape(form) + r"(?!\w)", re.IGNORECASE)
        for match in pattern.finditer(question):
            start, end = match.span()
            if any(start < e and s < end for s, e in taken):
                continue
            taken.append((start, end))
            found.append((start, title))
    out: list[str] = []
    for _, title in sorted(found):
        if title not in out:
            out.append(title)
    return out


def resolve_title(example: MultiHopExample, text: str) -> str:
    """The context title whose title or alias equals ``text`` after normalisation, else ``text``."""
    key = normalize_answer(text)
    for form, title in _surface_forms(example):
        if normalize_answer(form) == key:
            return title
    return text


def grow_cognitive_graph(
    example: MultiHopExample,
    reader: SpanReader,
    *,
    max_depth: int = 2,
    max_nodes: int = 16,
) -> CognitiveGraph:
    """Grow the cognitive graph breadth-first from the question's entities.

    Every node popped from the frontier whose title has a paragraph and whose depth is
    below ``max_depth`` is read with its clues; each hop span adds (or reaches) a node
    and, if new, pushes it on the frontier; each answer span adds (or marks) an answer
    node. Both add an edge from the reading node and a clue (the sentence the span came
    from) to the target.

    Args:
        example: question and context paragraphs.
        reader: System 1.
        max_depth: nodes at this depth are not read (2 = read the question entities and
            their next hops: enough for 2-hop bridge questions).
        max_nodes: stop adding nodes past this size.

    Returns:
        The grown graph.
    """
    graph = CognitiveGraph()
    frontier: deque[int] = deque()
    queued: set[int] = set()
    for title in link_question_entities(example):
        graph.nodes.append(CogNode(title=title, depth=0, is_question=True))
        frontier.append(len(graph.nodes) - 1)
        queued.add(len(graph.nodes) - 1)
    while frontier:
        index = frontier.popleft()
        node = graph.nodes[index]
        paragraph = example.paragraph(node.title)
        if paragraph is None or node.depth >= max_depth:
            continue
        node.read = True
        result = reader.read(example.question, [c.text for c in node.clues], paragraph)
        for span, kind in [(s, "hop") for s in result.hop_spans] + [
            (s, "answer") for s in result.answer_spans
        ]:
            title = resolve_title(example, span.text) if kind == "hop" else span.text
            target = graph.find(title)
            if target == index:
                continue
            if target is None:
                if len(graph.nodes) >= max_nodes:
                    continue
                graph.nodes.append(CogNode(title=title, depth=node.depth + 1, parent=index))
                target = len(graph.nodes) - 1
            if kind == "hop" and target not in queued:
                frontier.append(target)
                queued.add(target)
            other = graph.nodes[target]
            if kind == "hop":
                other.is_hop = True
            else:
                other.is_answer = True
                other.answer_score = max(other.answer_score, span.score)
            if not any(s == index and d == target for s, d, _ in graph.edges):
                graph.edges.append((index, target, span.sentence))
            clue = Clue(node.title, span.sentence, paragraph[span.sentence])
            if clue not in other.clues:
                other.clues.append(clue)
    return graph
