"""A trained CogQA system: System 1 grows the cognitive graph, System 2 scores its answers.

:class:`CogQASystem` is what :func:`~ptm_knowledge.cogqa.training.fit_system` returns and
:func:`~ptm_knowledge.cogqa.checkpoint.load_cogqa` reads; :func:`graph_features` are System
2's inputs, shared by inference and System 2's training.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ptm_knowledge.cogqa.evaluation import Prediction
from ptm_knowledge.cogqa.examples import MultiHopExample
from ptm_knowledge.cogqa.graph import CognitiveGraph, grow_cognitive_graph
from ptm_knowledge.cogqa.system1 import CogQAReader
from ptm_knowledge.cogqa.system2 import CogQAReasoner, graph_edge_index, node_flags

__all__ = ["CogQASystem", "graph_features"]


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
        # Per-optimiser-step training losses, filled by fit_system ("reader", "reasoner").
        self.losses: dict[str, list[float]] = {}
        # Where fit_system wrote the system (rank 0), when it was given an output_dir.
        self.final_dir: Path | None = None

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Every tensor of the system: ``reader.*`` (encoder and pointers) and
        ``reasoner.*`` (the GNN)."""
        state = {f"reader.{k}": v for k, v in self.reader.state_dict().items()}
        return state | {f"reasoner.{k}": v for k, v in self.reasoner.state_dict().items()}

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
