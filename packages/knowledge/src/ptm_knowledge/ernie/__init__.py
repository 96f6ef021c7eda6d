"""ERNIE (Baidu) knowledge masking and ERNIE (Tsinghua) knowledgeable encoder + dEA."""

from ptm_knowledge.ernie.dea import (
    DenoisingEntityAutoencoderObjective,
    EntityPredictionHead,
    ErnieThuPretrainingModel,
    corrupt_entities,
)
from ptm_knowledge.ernie.evaluation import evaluate_ernie_thu, is_ernie_thu_checkpoint
from ptm_knowledge.ernie.examples import (
    MentionCoverage,
    annotate_documents,
    build_knowledge_examples,
    check_mention_coverage,
)
from ptm_knowledge.ernie.knowledge_masking import (
    LEVELS,
    KnowledgeMaskingObjective,
    MaskingSchedule,
    StagedMaskingBatches,
    select_units,
)
from ptm_knowledge.ernie.phrases import (
    CollocationPhrases,
    NounChunkPhrases,
    PhraseExtractor,
    build_phrase_extractor,
)
from ptm_knowledge.ernie.pretraining import pretrain_ernie_baidu, pretrain_ernie_thu
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
    "ErnieThuPretrainingModel",
    "KnowledgeEncoderOutput",
    "KnowledgeMaskingObjective",
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
    "is_ernie_thu_checkpoint",
    "pretrain_ernie_baidu",
    "pretrain_ernie_thu",
    "select_units",
]
