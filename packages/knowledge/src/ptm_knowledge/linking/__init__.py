"""Entity linking with spaCy against a KG alias table, and alignment onto word pieces."""

from ptm_knowledge.linking.aliases import AliasTable, Candidate, CaseMode
from ptm_knowledge.linking.alignment import (
    NO_ENTITY,
    align_mentions_to_pieces,
    mention_piece_spans,
)
from ptm_knowledge.linking.corpus import (
    LinkedCorpusError,
    LinkedDocument,
    SentenceMention,
    link_corpus,
    link_corpus_with_kg,
    link_documents,
    read_linked_corpus,
    write_linked_corpus,
)
from ptm_knowledge.linking.evaluation import (
    LinkingReport,
    calibrate_nil_threshold,
    evaluate_linking,
    wordnet_gloss_gold,
)
from ptm_knowledge.linking.guard import MentionGuard
from ptm_knowledge.linking.linker import (
    DEFAULT_THRESHOLD,
    LEGACY_SETTINGS,
    EntityLinker,
    Mention,
)
from ptm_knowledge.linking.noun_share import NounShare, NounShareError

__all__ = [
    "DEFAULT_THRESHOLD",
    "LEGACY_SETTINGS",
    "NO_ENTITY",
    "AliasTable",
    "Candidate",
    "CaseMode",
    "EntityLinker",
    "LinkedCorpusError",
    "LinkedDocument",
    "LinkingReport",
    "Mention",
    "MentionGuard",
    "NounShare",
    "NounShareError",
    "SentenceMention",
    "align_mentions_to_pieces",
    "calibrate_nil_threshold",
    "evaluate_linking",
    "link_corpus",
    "link_corpus_with_kg",
    "link_documents",
    "mention_piece_spans",
    "read_linked_corpus",
    "wordnet_gloss_gold",
    "write_linked_corpus",
]
