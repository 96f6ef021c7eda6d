"""ERNIE (Baidu) knowledge masking; ERNIE (Tsinghua) knowledgeable encoder, dEA, fine-tuning."""

from ptm_knowledge.ernie.dea import (
    DenoisingEntityAutoencoderObjective,
    EntityPredictionHead,
    corrupt_entities,
)
from ptm_knowledge.ernie.evaluation import evaluate_ernie_thu, is_ernie_thu_checkpoint
from ptm_knowledge.ernie.examples import (
    MentionCoverage,
    annotate_documents,
    build_knowledge_examples,
    check_mention_coverage,
)
from ptm_knowledge.ernie.finetune import finetune_ernie_thu, predict_ernie
from ptm_knowledge.ernie.knowledge_masking import (
    LEVELS,
    KnowledgeMaskingObjective,
    MaskingSchedule,
    StagedMaskingBatches,
    select_units,
)
from ptm_knowledge.ernie.knowledge_store import KnowledgeRows, KnowledgeStore, knowledge_coverage
from ptm_knowledge.ernie.phrases import (
    CollocationPhrases,
    NounChunkPhrases,
    PhraseExtractor,
    build_phrase_extractor,
)
from ptm_knowledge.ernie.prepared import prepare_linked_corpus
from ptm_knowledge.ernie.pretraining import (
    knowledge_rows,
    open_linked_corpus,
)
from ptm_knowledge.ernie.task_features import ErnieFeaturizer
from ptm_knowledge.ernie.task_io import is_ernie_finetuned, load_ernie_task_model
from ptm_knowledge.ernie.task_links import task_links
from ptm_knowledge.ernie.task_model import ErnieTaskModel
from ptm_knowledge.ernie.thu_encoder import (
    AggregatorLayer,
    KnowledgeableEncoder,
    KnowledgeEncoderOutput,
)

__all__ = [
    "LEVELS",
    "AggregatorLayer",
    "CollocationPhrases",
    "DenoisingEntityAutoencoderObjective",
    "EntityPredictionHead",
    "ErnieFeaturizer",
    "ErnieTaskModel",
    "KnowledgeEncoderOutput",
    "KnowledgeMaskingObjective",
    "KnowledgeRows",
    "KnowledgeStore",
    "KnowledgeableEncoder",
    "MaskingSchedule",
    "MentionCoverage",
    "NounChunkPhrases",
    "PhraseExtractor",
    "StagedMaskingBatches",
    "annotate_documents",
    "build_knowledge_examples",
    "build_phrase_extractor",
    "check_mention_coverage",
    "corrupt_entities",
    "evaluate_ernie_thu",
    "finetune_ernie_thu",
    "is_ernie_finetuned",
    "is_ernie_thu_checkpoint",
    "knowledge_coverage",
    "knowledge_rows",
    "load_ernie_task_model",
    "open_linked_corpus",
    "predict_ernie",
    "prepare_linked_corpus",
    "select_units",
    "task_links",
]
