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
is kept so System 1 still extracts spans). Both phases run on the core Trainer
(:mod:`ptm_knowledge.cogqa.phases`): gradients accumulated over ``accumulation_steps``
micro-batches (the paper's 4 GPUs become one machine), the warm-up/linear-decay schedule,
``metrics.jsonl``, checkpoints and exact resume; the final system is written by rank 0.
"""

from __future__ import annotations

import contextlib
import random
import tempfile
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from ptm_core import TransformerEncoder
from ptm_core.seeding import derive_seed
from ptm_core.training.distributed import barrier, is_main_process
from ptm_knowledge.cogqa.batches import GraphBatches, ReaderSpanBatches
from ptm_knowledge.cogqa.checkpoint import save_cogqa
from ptm_knowledge.cogqa.evaluation import Prediction, normalize_answer
from ptm_knowledge.cogqa.examples import MultiHopExample
from ptm_knowledge.cogqa.graph import CognitiveGraph, grow_cognitive_graph, link_question_entities
from ptm_knowledge.cogqa.phases import PhaseOutput, fit_phase, phase_config
from ptm_knowledge.cogqa.supervision import gold_chain, reader_examples
from ptm_knowledge.cogqa.system import CogQASystem, graph_features
from ptm_knowledge.cogqa.system1 import CogQAReader, ReaderInput, WordVocab
from ptm_knowledge.cogqa.system2 import CogQAReasoner, graph_edge_index, node_flags
from ptm_knowledge.cogqa_settings import CogQATrainConfig

__all__ = [
    "CogQATrainConfig",
    "ReaderSpanModule",
    "ReasonerExample",
    "ReasonerModule",
    "build_vocab",
    "fit_reader",
    "fit_reasoner",
    "fit_system",
    "gold_chain",
    "predict_system1_only",
    "reader_examples",
    "reasoner_examples",
    "reasoner_loss",
]


class ReaderSpanModule(nn.Module):
    """System 1 as a Trainer model: ``forward(batch)`` gives the mean span loss of the
    four pointers on a :class:`~ptm_knowledge.cogqa.batches.ReaderSpanBatches` batch."""

    def __init__(self, reader: CogQAReader) -> None:
        super().__init__()
        self.reader = reader

    def forward(self, batch: dict[str, torch.Tensor]) -> PhaseOutput:
        """``batch``: reader inputs ``[B, L]`` and ``targets`` ``[B, 4]``."""
        inputs = {k: v for k, v in batch.items() if k != "targets"}
        return PhaseOutput(self.reader.loss(inputs, batch["targets"]))


def _phase_dir(
    output_dir: str | Path | None, name: str
) -> contextlib.AbstractContextManager[str | Path]:
    if output_dir is None:
        return tempfile.TemporaryDirectory(prefix=f"cogqa-{name}-")
    return contextlib.nullcontext(Path(output_dir) / name)


def fit_reader(
    reader: CogQAReader,
    examples: Sequence[MultiHopExample],
    config: CogQATrainConfig,
    *,
    output_dir: str | Path | None = None,
    callbacks: Iterable[object] = (),
    resume: bool = True,
) -> list[float]:
    """Train System 1 with span supervision on the core Trainer.

    ``reader_epochs`` passes over the questions' items (:class:`ReaderSpanBatches`, built
    per batch), ``accumulation_steps`` batches per AdamW step, gradient norm clipped at 1,
    the learning rate decaying linearly from ``reader_lr`` (after ``warmup_ratio`` of
    warm-up).

    Args:
        reader: System 1 (trained in place, left in eval mode).
        examples: the training questions.
        config: settings.
        output_dir: the phase folder (``metrics.jsonl``, ``checkpoints/``); ``None`` trains
            in a temporary folder (no resume).
        callbacks: core Trainer callbacks (``on_log`` / ``on_save``).
        resume: continue from the folder's newest checkpoint if there is one.

    Returns:
        The loss of every optimiser step (the whole run, also after a resume).
    """
    data = ReaderSpanBatches(
        examples,
        reader,
        batch_size=config.batch_size,
        num_distractors=config.distractors_per_question,
        seed=config.seed,
    )
    if data.num_items == 0 or config.reader_epochs == 0:
        reader.eval()
        return []
    with _phase_dir(output_dir, "system1") as folder:
        trainer_config = phase_config(
            Path(folder),
            epochs=config.reader_epochs,
            batches_per_epoch=data.batches_per_epoch,
            accumulation_steps=config.accumulation_steps,
            learning_rate=config.reader_lr,
            max_grad_norm=1.0,
            warmup_ratio=config.warmup_ratio,
            save_every=config.save_every,
            seed=config.seed,
            resume=resume,
        )
        losses = fit_phase(ReaderSpanModule(reader), data, trainer_config, callbacks=callbacks)
    reader.eval()
    return losses


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


class ReasonerModule(nn.Module):
    """System 2 (and, in joint training, System 1) as a Trainer model.

    ``forward({"index": [1]})`` gives :func:`reasoner_loss` of training graph ``index``.
    Only modules that learn are registered: ``reasoner``, plus ``reader`` when joint.
    """

    def __init__(
        self,
        reasoner: CogQAReasoner,
        reader: CogQAReader,
        data: Sequence[ReasonerExample],
        config: CogQATrainConfig,
    ) -> None:
        super().__init__()
        self.reasoner = reasoner
        if config.joint:
            self.reader = reader
        self._frozen_reader = (reader,)  # a tuple: not registered, so not optimised
        self.data = data
        self.config = config

    def forward(self, batch: dict[str, torch.Tensor]) -> PhaseOutput:
        """``batch["index"]``: ``[1]`` index of the training graph."""
        item = self.data[int(batch["index"][0])]
        return PhaseOutput(reasoner_loss(self.reasoner, self._frozen_reader[0], item, self.config))


def fit_reasoner(
    reasoner: CogQAReasoner,
    reader: CogQAReader,
    examples: Sequence[MultiHopExample],
    config: CogQATrainConfig,
    *,
    output_dir: str | Path | None = None,
    callbacks: Iterable[object] = (),
    resume: bool = True,
) -> list[float]:
    """Train System 2 on graphs grown by the reader, on the core Trainer; returns per-step
    losses.

    By default the reader is frozen and only System 2 learns (no clipping, as before). With
    ``config.joint`` the reader is fine-tuned too (learning rate ``config.joint_reader_lr``;
    the gradient norm of both systems together clipped at 1) on ``answer_loss +
    joint_span_weight * span_loss`` (:func:`reasoner_loss`). Questions whose graph has no
    answer node equal to the gold answer are skipped; graphs are grown once, before the
    first step (growth is the costly part and, with a frozen reader, the same every epoch).
    Each step accumulates ``accumulation_steps`` graphs; the rate decays linearly from
    ``reasoner_lr`` after ``warmup_ratio`` of warm-up.

    Args:
        reasoner: System 2 (trained in place, left in eval mode).
        reader: the trained System 1 (grows the graphs; trained too when joint).
        examples: the training questions.
        config: settings.
        output_dir / callbacks / resume: as :func:`fit_reader` (phase folder
            ``system2``).
    """
    data = reasoner_examples(reader, examples, config)
    if not data:
        warnings.warn(
            "fit_reasoner: no grown graph contains the gold answer as an answer node, so "
            "System 2 is not trained; train System 1 longer (reader_epochs) or lower "
            "ReaderConfig.threshold",
            stacklevel=2,
        )
        return []
    if config.reasoner_epochs == 0:
        return []
    with _phase_dir(output_dir, "system2") as folder:
        trainer_config = phase_config(
            Path(folder),
            epochs=config.reasoner_epochs,
            batches_per_epoch=len(data),
            accumulation_steps=config.accumulation_steps,
            learning_rate=config.reasoner_lr,
            max_grad_norm=1.0 if config.joint else None,
            warmup_ratio=config.warmup_ratio,
            save_every=config.save_every,
            seed=config.seed + 1,
            resume=resume,
        )
        losses = fit_phase(
            ReasonerModule(reasoner, reader, data, config),
            GraphBatches(len(data), config.seed + 1),
            trainer_config,
            learning_rates={"reader": config.joint_reader_lr} if config.joint else None,
            callbacks=callbacks,
        )
    reasoner.eval()
    reader.eval()
    return losses


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


def fit_system(
    examples: Sequence[MultiHopExample],
    config: CogQATrainConfig | None = None,
    *,
    vocab: WordVocab | None = None,
    encoder: TransformerEncoder | None = None,
    output_dir: str | Path | None = None,
    callbacks: Iterable[object] = (),
    resume: bool = True,
    start: CogQASystem | None = None,
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
        output_dir: the run folder: phase folders ``system1/`` and ``system2/`` (core
            Trainer runs: ``metrics.jsonl``, ``checkpoints/``) and ``final/``
            (:func:`~ptm_knowledge.cogqa.save_cogqa`, written by rank 0 only). Run again
            with the same folder after a crash and training resumes where it stopped,
            giving the same system, bit for bit on CPU, as a run never interrupted.
            ``None``: train in a temporary folder and write nothing.
        callbacks: core Trainer callbacks, given to both phases.
        resume: continue from the phase folders' newest checkpoints if there are any
            (``False`` moves an earlier run's checkpoints aside and starts over).
        start: a trained system to train further (e.g. :func:`~ptm_knowledge.cogqa.load_cogqa`
            of an earlier run): its reader (vocabulary, encoder, pointers and reader
            settings) and reasoner are trained in place; ``vocab``, ``encoder``,
            ``config.reader`` and the GNN sizes are then not used.

    Returns:
        The trained system (``.reader`` doubles as the System-1-only baseline).

    Raises:
        ValueError: ``examples`` is empty (nothing would be learnt, yet training would
            "succeed").
    """
    if not examples:
        raise ValueError(
            "no CogQA training questions; the train set is empty (check the train "
            "file, or num_train)"
        )
    config = config or CogQATrainConfig()
    torch.manual_seed(config.seed)
    if start is not None:
        reader = start.reader
    else:
        reader = CogQAReader(vocab or build_vocab(examples), config.reader, encoder)
    with _run_dir(output_dir) as folder:
        reader_losses = fit_reader(
            reader, examples, config, output_dir=folder, callbacks=callbacks, resume=resume
        )
        # Seeded here, not by whatever phase 1 left in the global RNG, so a resumed run
        # builds the same initial System 2.
        torch.manual_seed(derive_seed(config.seed, "cogqa-reasoner-init"))
        reasoner = (
            start.reasoner
            if start is not None
            else CogQAReasoner(reader.config.hidden_size, config.gnn_hidden, config.gnn_layers)
        )
        reasoner_losses = fit_reasoner(
            reasoner,
            reader,
            examples,
            config,
            output_dir=folder,
            callbacks=callbacks,
            resume=resume,
        )
    system = CogQASystem(reader, reasoner, max_depth=config.max_depth, max_nodes=config.max_nodes)
    system.losses = {"reader": reader_losses, "reasoner": reasoner_losses}
    if output_dir is not None:
        system.final_dir = Path(output_dir) / "final"
        if is_main_process():  # in a torchrun job, rank 0 writes
            save_cogqa(system, system.final_dir)
        barrier()
    return system


def _run_dir(output_dir: str | Path | None) -> contextlib.AbstractContextManager[str | Path]:
    if output_dir is None:
        return tempfile.TemporaryDirectory(prefix="cogqa-")
    return contextlib.nullcontext(Path(output_dir))
