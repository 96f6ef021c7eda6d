"""Data: corpora, datasets, collators and packing."""

from ptm_core.data.batches import PretrainingBatches, pad_examples
from ptm_core.data.corpus import (
    CorpusError,
    Document,
    corpus_files,
    corpus_stats,
    iter_text_corpus,
    read_text_corpus,
    split_sentences,
)
from ptm_core.data.errors import DataError
from ptm_core.data.packing import pack_examples
from ptm_core.data.prepare import (
    ShardTask,
    find_inputs,
    plan_shards,
    prepare_corpus,
    prepare_shard,
    prepared_cache_dir,
    write_manifest,
)
from ptm_core.data.prepared import PreparedCorpus, PreparedDataError
from ptm_core.data.segments import (
    build_segment_pair_examples,
    build_single_segment_examples,
    truncate_pair,
)
from ptm_core.data.token_store import InMemoryTokenStore, TokenStore

__all__ = [
    "CorpusError",
    "DataError",
    "Document",
    "InMemoryTokenStore",
    "PreparedCorpus",
    "PreparedDataError",
    "PretrainingBatches",
    "ShardTask",
    "TokenStore",
    "build_segment_pair_examples",
    "build_single_segment_examples",
    "corpus_files",
    "corpus_stats",
    "find_inputs",
    "iter_text_corpus",
    "pack_examples",
    "pad_examples",
    "plan_shards",
    "prepare_corpus",
    "prepare_shard",
    "prepared_cache_dir",
    "read_text_corpus",
    "split_sentences",
    "truncate_pair",
    "write_manifest",
]
