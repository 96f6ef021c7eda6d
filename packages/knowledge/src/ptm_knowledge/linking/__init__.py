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
from ptm_knowledge.linking.guard import MentionGuard
from ptm_knowledge.linking.linker import (
    DEFAULT_THRESHOLD,
    LEGACY_SETTINGS,
    EntityLinker,
    Mention,
    linking_scores,
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
    "Mention",
    "MentionGuard",
    "NounShare",
    "NounShareError",
    "SentenceMention",
    "align_mentions_to_pieces",
    "link_corpus",
    "link_corpus_with_kg",
    "link_documents",
    "linking_scores",
    "mention_piece_spans",
    "read_linked_corpus",
    "write_linked_corpus",
]
