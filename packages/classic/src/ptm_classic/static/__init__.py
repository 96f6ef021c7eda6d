"""First-generation static word embeddings: word2vec (through gensim), GloVe and Bengio's NNLM.

Every method writes the same output, a :class:`~ptm_classic.static.vectors.VectorTable`
(``vectors.safetensors`` + ``vocab.txt`` + ``table.json``) that ``gensim``'s
``KeyedVectors`` loads and from which any ptm encoder can initialise its token embeddings
(:func:`~ptm_classic.static.vectors.init_token_embeddings`). gensim is the optional extra
``ptm-classic[static]``; it is imported only by the functions that need it.

Modules: ``vectors`` (the table, queries, embedding initialisation), ``corpus`` (restartable
word streams), ``word2vec`` (gensim), ``glove`` (co-occurrence counting + torch training),
``nnlm`` (Bengio et al. 2003 on the core Trainer).
"""

from ptm_classic.static.vectors import (
    EmbeddingInit,
    VectorTable,
    VectorTableError,
    init_token_embeddings,
)

__all__ = ["EmbeddingInit", "VectorTable", "VectorTableError", "init_token_embeddings"]
