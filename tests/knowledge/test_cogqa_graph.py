"""CogQA cognitive graph growth (hand-made reader), System 1 spans and the System 2 layer."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch

from ptm_knowledge.cogqa.examples import MultiHopExample
from ptm_knowledge.cogqa.graph import (
    Clue,
    ReadResult,
    Span,
    grow_cognitive_graph,
    link_question_entities,
)
from ptm_knowledge.cogqa.system1 import (
    ANS_END,
    ANS_START,
    CogQAReader,
    ReaderConfig,
    WordVocab,
    find_span,
)
from ptm_knowledge.cogqa.system2 import CogGNNLayer, CogQAReasoner, graph_edge_index, node_flags

MARIE = ["Marie Curie was born in Warsaw .", "Marie Curie is the spouse of Pierre Curie ."]
PIERRE = ["Pierre Curie was born in Paris .", "Pierre Curie married Marie Curie ."]
WARSAW = ["Warsaw is located in Poland ."]
VIENNA = ["Vienna is located in Austria ."]


def _example() -> MultiHopExample:
    return MultiHopExample(
        id="hand",
        question="Marie Curie is the spouse of something that was born in what ?",
        answer="Paris",
        context=[
            ("Vienna", VIENNA),
            ("Pierre Curie", PIERRE),
            ("Marie Curie", MARIE),
            ("Warsaw", WARSAW),
        ],
        supporting_facts=[("Marie Curie", 1), ("Pierre Curie", 0)],
    )


class HandReader:
    """Returns fixed spans per paragraph and records what it was asked to read."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.results = {
            MARIE[0]: ReadResult(hop_spans=[Span("Pierre Curie", 1, 3.0), Span("Warsaw", 0, 1.0)]),
            PIERRE[0]: ReadResult(
                hop_spans=[Span("Marie Curie", 1, 0.5)], answer_spans=[Span("Paris", 0, 2.0)]
            ),
            WARSAW[0]: ReadResult(answer_spans=[Span("Poland", 0, 1.5)]),
            VIENNA[0]: ReadResult(answer_spans=[Span("Austria", 0, 9.0)]),
        }

    def read(self, question: str, clues: Sequence[str], paragraph: Sequence[str]) -> ReadResult:
        self.calls.append((paragraph[0], list(clues)))
        return self.results[paragraph[0]]


def test_graph_grows_breadth_first_with_nodes_edges_and_clues():
    reader = HandReader()
    graph = grow_cognitive_graph(_example(), reader)
    assert graph.titles() == ["Marie Curie", "Pierre Curie", "Warsaw", "Paris", "Poland"]
    assert [n.is_question for n in graph.nodes] == [True, False, False, False, False]
    assert [n.is_hop for n in graph.nodes] == [True, True, True, False, False]
    assert graph.answer_nodes() == [3, 4]
    assert [n.depth for n in graph.nodes] == [0, 1, 1, 2, 2]
    # (src, dst, sentence of src's paragraph that mentions dst)
    assert graph.edges == [(0, 1, 1), (0, 2, 0), (1, 0, 1), (1, 3, 0), (2, 4, 0)]
    # Breadth-first reading order; each node is read with its clues; the distractor
    # (Vienna) is never reached, the back-reference to Marie Curie is not re-read.
    assert reader.calls == [
        (MARIE[0], []),
        (PIERRE[0], [MARIE[1]]),
        (WARSAW[0], [MARIE[0]]),
    ]
    assert graph.nodes[3].clues == [Clue("Pierre Curie", 0, PIERRE[0])]
    assert graph.nodes[0].clues == [Clue("Pierre Curie", 1, PIERRE[1])]
    assert graph.nodes[3].answer_score == 2.0 and graph.nodes[3].parent == 1
    assert graph.supporting_facts(3) == [("Marie Curie", 1), ("Pierre Curie", 0)]
    assert graph.supporting_facts(4) == [("Marie Curie", 0), ("Warsaw", 0)]
    assert graph_edge_index(graph).tolist() == [[0, 0, 1, 1, 2], [1, 2, 0, 3, 4]]
    assert node_flags(graph)[:, 0].tolist() == [0.0, 0.0, 0.0, 2.0, 1.5]


def test_graph_depth_and_size_limits():
    reader = HandReader()
    graph = grow_cognitive_graph(_example(), reader, max_depth=1)
    assert graph.titles() == ["Marie Curie", "Pierre Curie", "Warsaw"] and len(reader.calls) == 1
    graph = grow_cognitive_graph(_example(), HandReader(), max_nodes=2)
    assert graph.titles() == ["Marie Curie", "Pierre Curie"]


def test_question_linking_by_title_and_alias_longest_match_first():
    ex = MultiHopExample(
        "q",
        "Did Curie see Paris Observatory or Paris ?",
        "",
        [("Paris", ["x"]), ("Paris Observatory", ["y"]), ("Marie Curie", ["z"])],
        [],
        aliases={"Marie Curie": ["Curie"]},
    )
    assert link_question_entities(ex) == ["Marie Curie", "Paris Observatory", "Paris"]


def test_reader_spans_map_back_to_exact_sentence_text():
    vocab = WordVocab.build(PIERRE + MARIE)
    reader = CogQAReader(vocab, ReaderConfig(top_k=1, threshold=0.0))
    inp = reader.encode("born where ?", ["clue"], PIERRE)
    start, end = find_span(inp, 1, "Marie Curie")
    assert inp.words[start : end + 1] == ["marie", "curie"]
    assert inp.positions[start][0] == 1
    assert find_span(inp, 0, "Marie Curie") == (0, 0)  # not in that sentence: no span
    logits = torch.zeros(len(inp.input_ids), 4)
    logits[start, ANS_START] = logits[end, ANS_END] = 5.0
    spans = reader.decode(inp, logits, PIERRE, ANS_START, ANS_END, 0.0)
    assert spans == [Span("Marie Curie", 1, 10.0)]
    logits[0, ANS_START] = logits[0, ANS_END] = 6.0  # [CLS] "no span" wins
    assert reader.decode(inp, logits, PIERRE, ANS_START, ANS_END, 0.0) == []


def test_gnn_layer_matches_the_paper_formula_densely():
    torch.manual_seed(0)
    layer = CogGNNLayer(5)
    x = torch.randn(4, 5)
    edges = torch.tensor([[0, 0, 1, 2], [1, 2, 2, 3]])  # node 0 has no predecessor
    adjacency = torch.zeros(4, 4)
    adjacency[edges[0], edges[1]] = 1.0
    degree = adjacency.sum(0).clamp(min=1.0)  # in-degree of each column node
    delta = torch.relu((adjacency / degree).t() @ torch.relu(layer.w1(x)))
    expected = torch.relu(layer.w2(x) + delta)
    torch.testing.assert_close(layer(x, edges), expected)


@pytest.fixture
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def test_reasoner_scores_every_node_and_trains_towards_gold(one_thread):
    torch.manual_seed(0)
    reasoner = CogQAReasoner(8, hidden_size=16)
    vectors, flags = torch.randn(5, 8), torch.zeros(5, 4)
    edges = torch.tensor([[0, 0, 1, 2], [1, 2, 3, 4]])
    assert reasoner(vectors, flags, edges).shape == (5,)
    optimizer = torch.optim.Adam(reasoner.parameters(), lr=1e-2)
    first = float(reasoner.answer_loss(vectors, flags, edges, [3, 4], 3).detach())
    for _ in range(30):
        optimizer.zero_grad()
        reasoner.answer_loss(vectors, flags, edges, [3, 4], 3).backward()
        optimizer.step()
    assert float(reasoner.answer_loss(vectors, flags, edges, [3, 4], 3).detach()) < first / 4
