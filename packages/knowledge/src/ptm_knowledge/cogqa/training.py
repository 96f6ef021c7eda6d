"""Training and inference of CogQA on one machine, and the System-1-only baseline.

System 1 is trained with span supervision from the gold reasoning chain of each bridge
question (Ding et al., 2019, §3.4): the first paragraph (read with the question, no clues)
must point at the bridge entity with the hop head; the bridge paragraph, read with the
first supporting sentence as clue, must point at the answer with the answer head;
distractor paragraphs point at ``[CLS]`` ("no span"). The bridge paragraph is also read
once without clue (clue dropout) so the same reader serves the graph-free baseline.
System 2 is then trained on graphs grown by the trained reader, with cross-entropy of the
gold answer node among the answer nodes: by default on the reader's frozen vectors, or,
with ``CogQATrainConfig.joint``, jointly with System 1 as in the paper (the answer loss
flows into the reader through the node vectors, and the span loss of the same questions
is kept so System 1 still extracts spans). Both loops accumulate gradients over
``accumulation_steps`` micro-batches (the paper's 4 GPUs become one machine).
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from ptm_core import TransformerEncoder
from ptm_knowledge.cogqa.data import MultiHopExample
from ptm_knowledge.cogqa.evaluation import Prediction, normalize_answer
from ptm_knowledge.cogqa.graph import CognitiveGraph, grow_cognitive_graph, link_question_entities
from ptm_knowledge.cogqa.system1 import (
    CogQAReader,
    ReaderConfig,
    ReaderInput,
    WordVocab,
    find_span,
)
from ptm_knowledge.cogqa.system2 import CogQAReasoner, graph_edge_index, node_flags


@dataclass
class CogQATrainConfig:
    """Settings of :func:`train_cogqa`.

    Args:
        reader: System 1 sizes and decoding.
        gnn_hidden / gnn_layers: System 2 size.
        reader_epochs / reasoner_epochs: passes over the training questions.
        batch_size: System 1 micro-batch (sequences).
        accumulation_steps: micro-batches (System 1) or graphs (System 2) per optimiser step.
        reader_lr / reasoner_lr: AdamW learning rates.
        distractors_per_question: distractor paragraphs read per question in training.
        max_depth / max_nodes: graph growth limits.
        seed: seed of initialisation, shuffling and sampling.
        joint: train System 2 jointly with System 1 (Ding et al., 2019, §3.4 and the
            released code's second phase): node vectors are computed with gradients and
            reasoner + reader are optimised on ``answer_loss + joint_span_weight *
            span_loss``. ``False`` (default): System 2 is trained alone on vectors of the
            frozen reader. Graph growth (which spans are extracted) is discrete and never
            carries gradients.
        joint_span_weight: weight of System 1's span loss (same questions' reader
            examples) in the joint phase; ``0`` lets the answer loss alone move the reader.
        joint_reader_lr: AdamW learning rate of System 1 in the joint phase (System 2
            keeps ``reasoner_lr``).
    """

    reader: ReaderConfig = field(default_factory=ReaderConfig)
    gnn_hidden: int = 64
    gnn_layers: int = 2
    reader_epochs: int = 12
    reasoner_epochs: int = 10
    batch_size: int = 16
    accumulation_steps: int = 2
    reader_lr: float = 2e-3
    reasoner_lr: float = 3e-3
    distractors_per_question: int = 1
    max_depth: int = 2
    max_nodes: int = 16
    seed: int = 0
    joint: bool = False
    joint_span_weight: float = 1.0
    joint_reader_lr: float = 2e-4

    def __post_init__(self) -> None:
        if not isinstance(self.joint, bool):
            raise ValueError(
                f"CogQATrainConfig.joint must be true or false, got {self.joint!r}; set "
                "cogqa.joint=true to train System 2 jointly with System 1"
            )
        if not (math.isfinite(self.joint_span_weight) and self.joint_span_weight >= 0):
            raise ValueError(
                f"CogQATrainConfig.joint_span_weight must be a finite number >= 0, got "
                f"{self.joint_span_weight!r}; use e.g. 1.0 (0 drops System 1's span loss "
                "from the joint phase)"
            )
        if not (math.isfinite(self.joint_reader_lr) and self.joint_reader_lr > 0):
            raise ValueError(
                f"CogQATrainConfig.joint_reader_lr must be a finite number > 0, got "
                f"{self.joint_reader_lr!r}; use e.g. 2e-4 (System 1's learning rate while "
                "it is trained jointly with System 2)"
            )


def gold_chain(example: MultiHopExample) -> tuple[str, int, str, int] | None:
    """``(first title, its fact sentence, bridge title, its fact sentence)`` of a bridge
    question: the first paragraph's supporting sentence names the bridge title. ``None``
    when the supporting facts do not form such a chain."""
    facts = [(t, i) for t, i in example.supporting_facts if example.paragraph(t) is not None]
    for t1, i1 in facts:
        for t2, i2 in facts:
            if t1 == t2:
                continue
            sentence = example.paragraph(t1)[i1]  # type: ignore[index]
            if normalize_answer(t2) in normalize_answer(sentence):
                return t1, i1, t2, i2
    return None


def reader_examples(
    example: MultiHopExample, reader: CogQAReader, rng: random.Random, num_distractors: int
) -> list[tuple[ReaderInput, list[int]]]:
    """System 1 training inputs of one question with ``[hop s, hop e, ans s, ans e]`` targets."""
    chain = gold_chain(example)
    if chain is None:
        return []
    t1, i1, t2, i2 = chain
    p1, p2 = example.paragraph(t1), example.paragraph(t2)
    assert p1 is not None and p2 is not None
    out: list[tuple[ReaderInput, list[int]]] = []
    first = reader.encode(example.question, [], p1)
    out.append((first, [*find_span(first, i1, t2), 0, 0]))
    for clues in ([p1[i1]], []):
        second = reader.encode(example.question, clues, p2)
        out.append((second, [0, 0, *find_span(second, i2, example.answer)]))
    others = [title for title, _ in example.context if title not in (t1, t2)]
    for title in rng.sample(others, min(num_distractors, len(others))):
        paragraph = example.paragraph(title)
        assert paragraph is not None
        out.append((reader.encode(example.question, [], paragraph), [0, 0, 0, 0]))
    return out


def train_reader(
    reader: CogQAReader, examples: Sequence[MultiHopExample], config: CogQATrainConfig
) -> list[float]:
    """Train System 1 with span supervision; returns the loss of every optimiser step."""
    rng = random.Random(config.seed)
    optimizer = torch.optim.AdamW(reader.parameters(), lr=config.reader_lr)
    reader.train()
    losses: list[float] = []
    for _ in range(config.reader_epochs):
        items = [
            item
            for ex in examples
            for item in reader_examples(ex, reader, rng, config.distractors_per_question)
        ]
        rng.shuffle(items)
        batches = [
            items[i : i + config.batch_size] for i in range(0, len(items), config.batch_size)
        ]
        for start in range(0, len(batches), config.accumulation_steps):
            group = batches[start : start + config.accumulation_steps]
            optimizer.zero_grad()
            total = 0.0
            for batch_items in group:
                batch = reader.collate([inp for inp, _ in batch_items])
                targets = torch.tensor([t for _, t in batch_items])
                loss = reader.loss(batch, targets) / len(group)
                loss.backward()
                total += float(loss.detach())
            torch.nn.utils.clip_grad_norm_(reader.parameters(), 1.0)
            optimizer.step()
            losses.append(total)
    reader.eval()
    return losses


def graph_features(
    reader: CogQAReader, example: MultiHopExample, graph: CognitiveGraph, *, grad: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """System 2 inputs: vectors ``[N, D]`` (each node read with its final clues), flags
    ``[N, 4]`` and ``edge_index`` ``[2, E]``.

    ``grad=True`` (joint training) computes the vectors with gradients into System 1
    (:meth:`CogQAReader.embed`); the default computes constants in eval mode.
    """
    items = [
        (example.question, [c.text for c in node.clues], example.paragraph(node.title) or [])
        for node in graph.nodes
    ]
    return reader.embed(items, grad=grad), node_flags(graph), graph_edge_index(graph)


def _gold_node(graph: CognitiveGraph, answer: str) -> int | None:
    key = normalize_answer(answer)
    for i in graph.answer_nodes():
        if normalize_answer(graph.nodes[i].title) == key:
            return i
    return None


@dataclass
class ReasonerExample:
    """One System 2 training question: its grown graph and what the loss needs.

    Attributes:
        example: the question.
        graph: the cognitive graph System 1 grew for it (fixed during training).
        gold: index of the gold answer node (one of ``graph.answer_nodes()``).
        flags: ``[N, 4]`` node flags; edge_index: ``[2, E]``.
        vectors: ``[N, D]`` frozen System 1 vectors (separate training), or ``None`` when
            they are recomputed with gradients at every step (joint training).
        span_items: System 1 inputs with ``[hop s, hop e, ans s, ans e]`` targets of the
            same question (:func:`reader_examples`), for the span loss of joint training.
    """

    example: MultiHopExample
    graph: CognitiveGraph
    gold: int
    flags: torch.Tensor
    edge_index: torch.Tensor
    vectors: torch.Tensor | None = None
    span_items: list[tuple[ReaderInput, list[int]]] = field(default_factory=list)


def reasoner_examples(
    reader: CogQAReader, examples: Sequence[MultiHopExample], config: CogQATrainConfig
) -> list[ReasonerExample]:
    """Grow each question's graph with ``reader`` (no gradients: span extraction is
    discrete) and keep those whose answer nodes contain the gold answer.

    Separate training (``config.joint`` false) stores the frozen vectors; joint training
    stores the question's System 1 span examples instead.
    """
    rng = random.Random(config.seed + 2)
    data: list[ReasonerExample] = []
    for ex in examples:
        with torch.no_grad():
            graph = grow_cognitive_graph(
                ex, reader, max_depth=config.max_depth, max_nodes=config.max_nodes
            )
        gold = _gold_node(graph, ex.answer)
        if gold is None:
            continue
        item = ReasonerExample(ex, graph, gold, node_flags(graph), graph_edge_index(graph))
        if config.joint:
            item.span_items = reader_examples(ex, reader, rng, config.distractors_per_question)
        else:
            item.vectors = graph_features(reader, ex, graph)[0]
        data.append(item)
    return data


def reasoner_loss(
    reasoner: CogQAReasoner,
    reader: CogQAReader,
    item: ReasonerExample,
    config: CogQATrainConfig,
) -> torch.Tensor:
    """Loss of one System 2 training question (a scalar).

    Separate training: the answer loss on ``item.vectors`` (gradients reach System 2
    only). Joint training (``item.vectors is None``): node vectors are recomputed with
    gradients into System 1 and ``config.joint_span_weight`` times System 1's span loss
    on ``item.span_items`` is added, so System 1 keeps extracting spans.
    """
    answers = item.graph.answer_nodes()
    if item.vectors is not None:
        return reasoner.answer_loss(item.vectors, item.flags, item.edge_index, answers, item.gold)
    vectors = graph_features(reader, item.example, item.graph, grad=True)[0]
    loss = reasoner.answer_loss(vectors, item.flags, item.edge_index, answers, item.gold)
    if item.span_items and config.joint_span_weight > 0:
        batch = reader.collate([inp for inp, _ in item.span_items])
        targets = torch.tensor([t for _, t in item.span_items])
        loss = loss + config.joint_span_weight * reader.loss(batch, targets)
    return loss


def train_reasoner(
    reasoner: CogQAReasoner,
    reader: CogQAReader,
    examples: Sequence[MultiHopExample],
    config: CogQATrainConfig,
) -> list[float]:
    """Train System 2 on graphs grown by the reader; returns per-step losses.

    By default the reader is frozen and only System 2 learns. With ``config.joint`` the
    reader is fine-tuned too (learning rate ``config.joint_reader_lr``, gradient norm
    clipped at 1 as in :func:`train_reader`) on ``answer_loss + joint_span_weight *
    span_loss`` (:func:`reasoner_loss`). Questions whose graph has no answer node equal
    to the gold answer are skipped; graphs are grown once, before the first step.
    """
    data = reasoner_examples(reader, examples, config)
    if not data:
        warnings.warn(
            "train_reasoner: no grown graph contains the gold answer as an answer node, so "
            "System 2 is not trained; train System 1 longer (reader_epochs) or lower "
            "ReaderConfig.threshold",
            stacklevel=2,
        )
    rng = random.Random(config.seed + 1)
    groups: list[dict[str, object]] = [
        {"params": list(reasoner.parameters()), "lr": config.reasoner_lr}
    ]
    if config.joint:
        groups.append({"params": list(reader.parameters()), "lr": config.joint_reader_lr})
        reader.train()
    optimizer = torch.optim.AdamW(groups)
    reasoner.train()
    losses: list[float] = []
    for _ in range(config.reasoner_epochs):
        rng.shuffle(data)
        for start in range(0, len(data), config.accumulation_steps):
            group = data[start : start + config.accumulation_steps]
            optimizer.zero_grad()
            total = 0.0
            for item in group:
                loss = reasoner_loss(reasoner, reader, item, config) / len(group)
                loss.backward()
                total += float(loss.detach())
            if config.joint:
                torch.nn.utils.clip_grad_norm_(reader.parameters(), 1.0)
            optimizer.step()
            losses.append(total)
    reasoner.eval()
    reader.eval()
    return losses


class CogQASystem:
    """A trained System 1 + System 2 pair that answers HotpotQA-style questions.

    Args:
        reader: System 1.
        reasoner: System 2.
        max_depth / max_nodes: graph growth limits.
    """

    def __init__(
        self,
        reader: CogQAReader,
        reasoner: CogQAReasoner,
        *,
        max_depth: int = 2,
        max_nodes: int = 16,
    ) -> None:
        self.reader = reader
        self.reasoner = reasoner
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        # Per-optimiser-step training losses, filled by train_cogqa ("reader", "reasoner").
        self.losses: dict[str, list[float]] = {}

    @torch.no_grad()
    def predict(self, example: MultiHopExample) -> tuple[Prediction, CognitiveGraph]:
        """Grow the graph, score its answer nodes with System 2, and return the best one
        with the supporting facts on its discovery path (empty answer if none)."""
        graph = grow_cognitive_graph(
            example, self.reader, max_depth=self.max_depth, max_nodes=self.max_nodes
        )
        answers = graph.answer_nodes()
        if not answers:
            return Prediction(""), graph
        self.reasoner.eval()
        scores = self.reasoner(*graph_features(self.reader, example, graph))
        best = max(answers, key=lambda i: float(scores[i]))
        facts = tuple(graph.supporting_facts(best))
        return Prediction(graph.nodes[best].title, facts), graph


@torch.no_grad()
def predict_system1_only(reader: CogQAReader, example: MultiHopExample) -> Prediction:
    """The graph-free baseline: read every paragraph with the question and no clues and
    answer with the best answer span overall.

    Supporting facts: the answer's sentence plus, without a graph, every sentence of a
    question entity's paragraph that names the answer's paragraph (title match).
    """
    best: tuple[float, str, str, int] | None = None
    for title, paragraph in example.context:
        for span in reader.read(example.question, [], paragraph).answer_spans:
            if best is None or span.score > best[0]:
                best = (span.score, span.text, title, span.sentence)
    if best is None:
        return Prediction("")
    _, text, title, sentence = best
    facts = [(title, sentence)]
    for linked in link_question_entities(example):
        paragraph = example.paragraph(linked) or []
        for i, s in enumerate(paragraph):
            if linked != title and normalize_answer(title) in normalize_answer(s):
                facts.append((linked, i))
    return Prediction(text, tuple(facts))


def build_vocab(examples: Sequence[MultiHopExample]) -> WordVocab:
    """Word vocabulary of the questions and paragraphs of ``examples``."""
    texts = [ex.question for ex in examples]
    texts += [s for ex in examples for _, sentences in ex.context for s in sentences]
    return WordVocab.build(texts)


def train_cogqa(
    examples: Sequence[MultiHopExample],
    config: CogQATrainConfig | None = None,
    *,
    vocab: WordVocab | None = None,
    encoder: TransformerEncoder | None = None,
) -> CogQASystem:
    """Train System 1 then System 2 on ``examples``.

    Questions whose supporting facts do not form a bridge chain (:func:`gold_chain`; e.g.
    HotpotQA comparison questions) give no System 1 supervision and are skipped.

    Args:
        examples: bridge questions with supporting facts.
        config: training settings (defaults: tiny 2-layer, 64-wide encoder).
        vocab: word vocabulary; default built from ``examples``.
        encoder: System 1's encoder (any core encoder at least ``len(vocab)`` words and
            ``config.reader.max_length`` positions); default a fresh one of
            ``config.reader``'s size.

    Returns:
        The trained system (``.reader`` doubles as the System-1-only baseline).

    Raises:
        ValueError: ``examples`` is empty (nothing would be learnt, yet training would
            "succeed").
    """
    if not examples:
        raise ValueError(
            "train_cogqa: no training questions; the train set is empty (check the train "
            "file, or num_train)"
        )
    config = config or CogQATrainConfig()
    torch.manual_seed(config.seed)
    reader = CogQAReader(vocab or build_vocab(examples), config.reader, encoder)
    reader_losses = train_reader(reader, examples, config)
    reasoner = CogQAReasoner(reader.config.hidden_size, config.gnn_hidden, config.gnn_layers)
    reasoner_losses = train_reasoner(reasoner, reader, examples, config)
    system = CogQASystem(reader, reasoner, max_depth=config.max_depth, max_nodes=config.max_nodes)
    system.losses = {"reader": reader_losses, "reasoner": reasoner_losses}
    return system
