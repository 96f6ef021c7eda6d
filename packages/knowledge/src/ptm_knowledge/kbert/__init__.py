"""K-BERT (Liu et al., 2020): sentence trees, soft positions, visible matrix, Mask-Transformer.

:func:`build_sentence_tree` is the knowledge layer; :class:`KBertFeaturizer` turns sentences
into encoder inputs (with the ``kg="none"`` / ``visible_matrix="off"`` ablations);
:class:`KBertClassifier` / :class:`KBertTagger` are the fine-tuning heads on top of any core
encoder; :func:`finetune_kbert` trains and scores a classifier with the core Trainer.
"""

from ptm_knowledge.kbert.finetune import (
    FeaturizedBatches,
    KBertResult,
    LabeledSentence,
    TaggedSentence,
    evaluate_kbert,
    finetune_kbert,
    load_kbert_classifier,
    read_labeled_tsv,
    read_tagged_tsv,
)
from ptm_knowledge.kbert.knowledge import KBertKnowledge, knowledge_from_graph
from ptm_knowledge.kbert.model import (
    KBertClassifier,
    KBertFeaturizer,
    KBertOutput,
    KBertTagger,
    mask_transformer,
    segment_words,
)
from ptm_knowledge.kbert.sentence_tree import (
    SentenceTree,
    build_sentence_tree,
    pair_words,
    visible_matrix,
    wordpiece_splitter,
)
from ptm_knowledge.kbert.tsv import LazyTsv

__all__ = [
    "FeaturizedBatches",
    "KBertClassifier",
    "KBertFeaturizer",
    "KBertKnowledge",
    "KBertOutput",
    "KBertResult",
    "KBertTagger",
    "LabeledSentence",
    "LazyTsv",
    "SentenceTree",
    "TaggedSentence",
    "build_sentence_tree",
    "evaluate_kbert",
    "finetune_kbert",
    "knowledge_from_graph",
    "load_kbert_classifier",
    "mask_transformer",
    "pair_words",
    "read_labeled_tsv",
    "read_tagged_tsv",
    "segment_words",
    "visible_matrix",
    "wordpiece_splitter",
]
