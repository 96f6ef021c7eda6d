"""CogQA: cognitive graphs for multi-hop QA (Ding et al., 2019).

System 1 (:class:`CogQAReader`, the core encoder with hop/answer span pointers) grows a
:class:`CognitiveGraph` breadth-first from the question's entities; System 2
(:class:`CogQAReasoner`, a torch-geometric GNN) scores its answer nodes. Data: the
HotpotQA format (:func:`open_hotpot_json`: streamed, parsed per record; :func:`read_hotpot_json`) and a 2-hop bridge-question generator over a
knowledge graph (:func:`generate_bridge_questions`); metrics: :func:`evaluate_predictions`.
"""

from ptm_knowledge.cogqa.checkpoint import load_cogqa, save_cogqa
from ptm_knowledge.cogqa.data import (
    RELATION_TEMPLATES,
    entity_paragraphs,
    generate_bridge_questions,
    read_hotpot_json,
    write_hotpot_json,
)
from ptm_knowledge.cogqa.evaluation import (
    Prediction,
    answer_scores,
    evaluate_predictions,
    normalize_answer,
    supporting_fact_scores,
)
from ptm_knowledge.cogqa.examples import MultiHopDataError, MultiHopExample
from ptm_knowledge.cogqa.graph import (
    Clue,
    CognitiveGraph,
    CogNode,
    ReadResult,
    Span,
    SpanReader,
    grow_cognitive_graph,
    link_question_entities,
    resolve_title,
)
from ptm_knowledge.cogqa.hotpot_file import MultiHopFile, open_hotpot_json
from ptm_knowledge.cogqa.system import CogQASystem
from ptm_knowledge.cogqa.system1 import CogQAReader, ReaderConfig, WordVocab
from ptm_knowledge.cogqa.system2 import CogGNNLayer, CogQAReasoner
from ptm_knowledge.cogqa.training import (
    CogQATrainConfig,
    build_vocab,
    fit_reader,
    fit_reasoner,
    fit_system,
    gold_chain,
    predict_system1_only,
)

__all__ = [
    "RELATION_TEMPLATES",
    "Clue",
    "CogGNNLayer",
    "CogNode",
    "CogQAReader",
    "CogQAReasoner",
    "CogQASystem",
    "CogQATrainConfig",
    "CognitiveGraph",
    "MultiHopDataError",
    "MultiHopExample",
    "MultiHopFile",
    "Prediction",
    "ReadResult",
    "ReaderConfig",
    "Span",
    "SpanReader",
    "WordVocab",
    "answer_scores",
    "build_vocab",
    "entity_paragraphs",
    "evaluate_predictions",
    "fit_reader",
    "fit_reasoner",
    "fit_system",
    "generate_bridge_questions",
    "gold_chain",
    "grow_cognitive_graph",
    "link_question_entities",
    "load_cogqa",
    "normalize_answer",
    "open_hotpot_json",
    "predict_system1_only",
    "read_hotpot_json",
    "resolve_title",
    "save_cogqa",
    "supporting_fact_scores",
    "write_hotpot_json",
]
