"""System 2 of CogQA: a graph neural network over the cognitive graph.

Ding et al. (2019), §3.2: with node features ``X`` (System 1's semantic vectors) and the
graph's adjacency ``A`` (``A[i, j] = 1`` for an edge ``i -> j``), one step is

    Δ  = σ((A D⁻¹)ᵀ σ(X W1))
    X' = σ(X W2 + Δ)

i.e. each node receives the mean of its predecessors' transformed states (``D`` is the
diagonal in-degree matrix; a node without predecessors receives 0). The answer is the
answer node with the highest score ``F(X'[answer nodes])``. The graph is processed full
batch (PyG's neighbour sampling needs pyg-lib, and cognitive graphs are small).
"""

from __future__ import annotations

import torch
from torch import nn
from torch_geometric.nn import MessagePassing

from ptm_knowledge.cogqa.graph import CognitiveGraph

# Extra per-node features appended to the System 1 vector (why: the answer-span score
# and the node flags are cheap evidence the first-token vector alone may not carry).
NUM_NODE_FLAGS = 4


def node_flags(graph: CognitiveGraph) -> torch.Tensor:
    """``[N, 4]``: best answer-span score (0 if none), is_answer, is_hop, depth."""
    rows = []
    for node in graph.nodes:
        score = node.answer_score if node.is_answer else 0.0
        rows.append([score, float(node.is_answer), float(node.is_hop), float(node.depth)])
    return torch.tensor(rows, dtype=torch.float).reshape(-1, NUM_NODE_FLAGS)


def graph_edge_index(graph: CognitiveGraph) -> torch.Tensor:
    """``[2, E]`` long tensor of distinct ``(src, dst)`` edges (PyG layout)."""
    pairs = graph.edge_index()
    if not pairs:
        return torch.zeros(2, 0, dtype=torch.long)
    return torch.tensor(pairs, dtype=torch.long).t().contiguous()


class CogGNNLayer(MessagePassing):
    """One CogQA propagation step: ``X' = σ(X W2 + σ((A D⁻¹)ᵀ σ(X W1)))``.

    Args:
        dim: node feature width (in and out).
    """

    def __init__(self, dim: int) -> None:
        # aggr="mean" over incoming edges = (A D⁻¹)ᵀ with D the in-degree.
        super().__init__(aggr="mean", flow="source_to_target")
        self.w1 = nn.Linear(dim, dim)
        self.w2 = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        """``x`` ``[N, dim]``, ``edge_index`` ``[2, E]`` -> ``[N, dim]``."""
        delta = torch.relu(self.propagate(edge_index, x=torch.relu(self.w1(x))))
        return torch.relu(self.w2(x) + delta)

    def message(self, x_j: torch.Tensor) -> torch.Tensor:
        """The transformed state of the source node, ``[E, dim]``."""
        return x_j


class CogQAReasoner(nn.Module):
    """System 2: project node features, run GNN steps, score each node.

    Args:
        input_size: width of System 1 vectors ``D``.
        hidden_size: GNN width.
        num_layers: propagation steps.
    """

    def __init__(self, input_size: int, hidden_size: int = 64, num_layers: int = 2) -> None:
        super().__init__()
        self.project = nn.Linear(input_size + NUM_NODE_FLAGS, hidden_size)
        self.layers = nn.ModuleList(CogGNNLayer(hidden_size) for _ in range(num_layers))
        self.score = nn.Sequential(
            nn.Linear(hidden_size, hidden_size), nn.ReLU(), nn.Linear(hidden_size, 1)
        )

    def forward(
        self, vectors: torch.Tensor, flags: torch.Tensor, edge_index: torch.Tensor
    ) -> torch.Tensor:
        """Node scores ``[N]`` from vectors ``[N, D]``, flags ``[N, 4]``, edges ``[2, E]``."""
        x = torch.relu(self.project(torch.cat([vectors, flags], dim=-1)))
        for layer in self.layers:
            x = layer(x, edge_index)
        return self.score(x).squeeze(-1)

    def answer_loss(
        self,
        vectors: torch.Tensor,
        flags: torch.Tensor,
        edge_index: torch.Tensor,
        answer_nodes: list[int],
        gold: int,
    ) -> torch.Tensor:
        """Cross-entropy of the gold node among the answer nodes (``gold`` in ``answer_nodes``)."""
        scores = self(vectors, flags, edge_index)[answer_nodes]
        target = torch.tensor(answer_nodes.index(gold))
        return nn.functional.cross_entropy(scores.unsqueeze(0), target.unsqueeze(0))
