"""Data: corpora, datasets, collators and packing."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ptm_core._lazy import lazy_exports

# Names load on first use (PEP 562): `import ptm_core.data` alone does not pull in torch,
# so data-preparation workers and the CLI start light.
_EXPORTS = {
    "CorpusError": "ptm_core.data.corpus",
    "DataError": "ptm_core.data.errors",
    "Document": "ptm_core.data.corpus",
    "InMemoryTokenStore": "ptm_core.data.token_store",
    "PreparedCorpus": "ptm_core.data.prepared",
    "PreparedDataError": "ptm_core.data.prepared",
    "PretrainingBatches": "ptm_core.data.batches",
    "ShardTask": "ptm_core.data.prepare",
    "TokenStore": "ptm_core.data.token_store",
    "build_segment_pair_examples": "ptm_core.data.segments",
    "build_single_segment_examples": "ptm_core.data.segments",
    "corpus_files": "ptm_core.data.corpus",
    "corpus_stats": "ptm_core.data.corpus",
    "find_inputs": "ptm_core.data.prepare",
    "iter_text_corpus": "ptm_core.data.corpus",
    "pack_examples": "ptm_core.data.packing",
    "pad_examples": "ptm_core.data.batches",
    "plan_shards": "ptm_core.data.prepare",
    "prepare_corpus": "ptm_core.data.prepare",
    "prepare_shard": "ptm_core.data.prepare",
    "prepared_cache_dir": "ptm_core.data.prepare",
    "read_text_corpus": "ptm_core.data.corpus",
    "split_sentences": "ptm_core.data.corpus",
    "truncate_pair": "ptm_core.data.segments",
    "write_manifest": "ptm_core.data.prepare",
}

if TYPE_CHECKING:
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


__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)

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
