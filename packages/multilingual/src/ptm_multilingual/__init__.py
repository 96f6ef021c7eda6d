"""ptm-multilingual: XLM (Lample & Conneau, 2019) with MLM and TLM on the ptm core.

Shared BPE vocabulary, language embeddings through the core encoder's ``extra_embeds``,
MLM streams and TLM pairs, language sampling, cross-lingual evaluation, and Hugging Face
XLM import/export.

The names below load on first use (PEP 562): the family registry imports
:mod:`ptm_multilingual.families` through this package, and listing families must not load
torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ptm_core.data.parallel_corpus import (
        ParallelCorpus,
        ParallelSource,
        parallel_sources,
        read_parallel_corpora,
        read_parallel_files,
        read_parallel_tsv,
    )
    from ptm_multilingual.batches import (
        XLMBatches,
        build_mlm_streams,
        build_tlm_example,
        build_tlm_examples,
        mlm_stream_row,
    )
    from ptm_multilingual.corpora import monolingual_files, read_monolingual_corpora
    from ptm_multilingual.evaluation import embed_sentences, retrieval_accuracy, zero_shot_transfer
    from ptm_multilingual.finetune import (
        XLMClassifier,
        XLMFinetuneResult,
        XLMSentenceFeaturizer,
        build_xlm_classifier,
        finetune_xlm_classifier,
        load_xlm_classifier,
        save_xlm_classifier,
    )
    from ptm_multilingual.hf_xlm import hf_xlm_to_ptm, load_hf_xlm, ptm_to_hf_xlm, save_hf_xlm
    from ptm_multilingual.language_tsv import read_language_tsv
    from ptm_multilingual.model import (
        XLMEncoder,
        XLMForMaskedLM,
        XLMPredictionHead,
        mean_pool,
        xlm_text_encoder,
    )
    from ptm_multilingual.objective import (
        XLMMaskedLMObjective,
        frequency_weights,
        select_weighted_positions,
    )
    from ptm_multilingual.prepared_data import XLMInputs, prepare_xlm
    from ptm_multilingual.prepared_reader import PreparedXLM
    from ptm_multilingual.pretraining import XLMPretrainResult
    from ptm_multilingual.rows import ConcatRows, MLMStreamRows, ShardedStream, TLMPairRows
    from ptm_multilingual.sampling import LanguageSampler, smoothed_probabilities
    from ptm_multilingual.tokenizer import SPECIAL_TOKENS, SharedBPETokenizer

# Public name -> the module that defines it.
_EXPORTS: dict[str, str] = {
    "XLMBatches": "ptm_multilingual.batches",
    "build_mlm_streams": "ptm_multilingual.batches",
    "build_tlm_example": "ptm_multilingual.batches",
    "build_tlm_examples": "ptm_multilingual.batches",
    "mlm_stream_row": "ptm_multilingual.batches",
    "ParallelCorpus": "ptm_core.data.parallel_corpus",
    "ParallelSource": "ptm_core.data.parallel_corpus",
    "monolingual_files": "ptm_multilingual.corpora",
    "parallel_sources": "ptm_core.data.parallel_corpus",
    "read_monolingual_corpora": "ptm_multilingual.corpora",
    "read_parallel_corpora": "ptm_core.data.parallel_corpus",
    "read_parallel_files": "ptm_core.data.parallel_corpus",
    "read_parallel_tsv": "ptm_core.data.parallel_corpus",
    "embed_sentences": "ptm_multilingual.evaluation",
    "retrieval_accuracy": "ptm_multilingual.evaluation",
    "zero_shot_transfer": "ptm_multilingual.evaluation",
    "XLMClassifier": "ptm_multilingual.finetune",
    "XLMFinetuneResult": "ptm_multilingual.finetune",
    "XLMSentenceFeaturizer": "ptm_multilingual.finetune",
    "build_xlm_classifier": "ptm_multilingual.finetune",
    "finetune_xlm_classifier": "ptm_multilingual.finetune",
    "load_xlm_classifier": "ptm_multilingual.finetune",
    "read_language_tsv": "ptm_multilingual.language_tsv",
    "save_xlm_classifier": "ptm_multilingual.finetune",
    "hf_xlm_to_ptm": "ptm_multilingual.hf_xlm",
    "load_hf_xlm": "ptm_multilingual.hf_xlm",
    "ptm_to_hf_xlm": "ptm_multilingual.hf_xlm",
    "save_hf_xlm": "ptm_multilingual.hf_xlm",
    "XLMEncoder": "ptm_multilingual.model",
    "XLMForMaskedLM": "ptm_multilingual.model",
    "XLMPredictionHead": "ptm_multilingual.model",
    "mean_pool": "ptm_multilingual.model",
    "xlm_text_encoder": "ptm_multilingual.model",
    "XLMMaskedLMObjective": "ptm_multilingual.objective",
    "frequency_weights": "ptm_multilingual.objective",
    "select_weighted_positions": "ptm_multilingual.objective",
    "PreparedXLM": "ptm_multilingual.prepared_reader",
    "XLMInputs": "ptm_multilingual.prepared_data",
    "prepare_xlm": "ptm_multilingual.prepared_data",
    "XLMPretrainResult": "ptm_multilingual.pretraining",
    "ConcatRows": "ptm_multilingual.rows",
    "MLMStreamRows": "ptm_multilingual.rows",
    "ShardedStream": "ptm_multilingual.rows",
    "TLMPairRows": "ptm_multilingual.rows",
    "LanguageSampler": "ptm_multilingual.sampling",
    "smoothed_probabilities": "ptm_multilingual.sampling",
    "SPECIAL_TOKENS": "ptm_multilingual.tokenizer",
    "SharedBPETokenizer": "ptm_multilingual.tokenizer",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = [
    "SPECIAL_TOKENS",
    "ConcatRows",
    "LanguageSampler",
    "MLMStreamRows",
    "ParallelCorpus",
    "ParallelSource",
    "PreparedXLM",
    "ShardedStream",
    "SharedBPETokenizer",
    "TLMPairRows",
    "XLMBatches",
    "XLMClassifier",
    "XLMEncoder",
    "XLMFinetuneResult",
    "XLMForMaskedLM",
    "XLMInputs",
    "XLMMaskedLMObjective",
    "XLMPredictionHead",
    "XLMPretrainResult",
    "XLMSentenceFeaturizer",
    "build_mlm_streams",
    "build_tlm_example",
    "build_tlm_examples",
    "build_xlm_classifier",
    "embed_sentences",
    "finetune_xlm_classifier",
    "frequency_weights",
    "hf_xlm_to_ptm",
    "load_hf_xlm",
    "load_xlm_classifier",
    "mean_pool",
    "mlm_stream_row",
    "monolingual_files",
    "parallel_sources",
    "prepare_xlm",
    "ptm_to_hf_xlm",
    "read_language_tsv",
    "read_monolingual_corpora",
    "read_parallel_corpora",
    "read_parallel_files",
    "read_parallel_tsv",
    "retrieval_accuracy",
    "save_hf_xlm",
    "save_xlm_classifier",
    "select_weighted_positions",
    "smoothed_probabilities",
    "xlm_text_encoder",
    "zero_shot_transfer",
]
__version__ = "0.1.0"
