"""K-BERT (Liu et al., 2020): sentence trees, soft positions, visible matrix, Mask-Transformer.

:func:`build_sentence_tree` is the knowledge layer; :class:`KBertFeaturizer` turns sentences
into encoder inputs (with the ``kg="none"`` / ``visible_matrix="off"`` ablations) and,
through :meth:`KBertFeaturizer.featurize`, into batches of the core fine-tuning recipe;
:func:`finetune_kbert` trains and scores a core ``TaskModel`` (classification or tagging)
on them, :func:`load_kbert_classifier` / :func:`predict_kbert` reload and apply it.
"""

from ptm_knowledge.kbert.finetune import (
    KBertResult,
    LabeledSentence,
    TaggedSentence,
    evaluate_kbert,
    featurizer_for,
    finetune_kbert,
    load_kbert_classifier,
    predict_kbert,
    read_labeled_tsv,
    read_tagged_tsv,
)
from ptm_knowledge.kbert.knowledge import KBertKnowledge, knowledge_from_graph
from ptm_knowledge.kbert.model import (
    KBertFeaturizer,
    kbert_structure,
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
    "KBertFeaturizer",
    "KBertKnowledge",
    "KBertResult",
    "LabeledSentence",
    "LazyTsv",
    "SentenceTree",
    "TaggedSentence",
    "build_sentence_tree",
    "evaluate_kbert",
    "featurizer_for",
    "finetune_kbert",
    "kbert_structure",
    "knowledge_from_graph",
    "load_kbert_classifier",
    "mask_transformer",
    "pair_words",
    "predict_kbert",
    "read_labeled_tsv",
    "read_tagged_tsv",
    "segment_words",
    "visible_matrix",
    "wordpiece_splitter",
]
