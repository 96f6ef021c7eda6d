"""ptm-knowledge: knowledge graphs, entity linking and ERNIE (Baidu and Tsinghua).

Subpackages: :mod:`ptm_knowledge.kg` (entity tables, triples, PyKEEN embeddings),
:mod:`ptm_knowledge.linking` (spaCy entity linking, word-piece alignment, linked corpus)
and :mod:`ptm_knowledge.ernie` (knowledge masking, knowledgeable encoder, dEA), and
:mod:`ptm_knowledge.kbert` (K-BERT: sentence trees, soft positions, visible matrix).
Import the subpackages; this module stays light (no torch/spaCy import here).
"""

__version__ = "0.1.0"
