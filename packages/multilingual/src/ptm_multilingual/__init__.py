"""ptm-multilingual: XLM (Lample & Conneau, 2019) with MLM and TLM on the ptm core.

Shared BPE vocabulary, language embeddings through the core encoder's ``extra_embeds``,
MLM streams and TLM pairs, language sampling, cross-lingual evaluation, and Hugging Face
XLM import/export.
"""

from ptm_multilingual.batches import (
    XLMBatches,
    build_mlm_streams,
    build_tlm_example,
    build_tlm_examples,
    mlm_stream_row,
)
from ptm_multilingual.corpora import (
    ParallelCorpus,
    ParallelSource,
    monolingual_files,
    parallel_sources,
    read_monolingual_corpora,
    read_parallel_corpora,
    read_parallel_files,
    read_parallel_tsv,
)
from ptm_multilingual.evaluation import embed_sentences, retrieval_accuracy, zero_shot_transfer
from ptm_multilingual.finetune import (
    XLMClassifier,
    XLMFinetuneResult,
    XLMSentenceFeaturizer,
    build_xlm_classifier,
    finetune_xlm_classifier,
    load_xlm_classifier,
    read_language_tsv,
    save_xlm_classifier,
)
from ptm_multilingual.hf_xlm import hf_xlm_to_ptm, load_hf_xlm, ptm_to_hf_xlm, save_hf_xlm
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
from ptm_multilingual.prepared_data import PreparedXLM, XLMInputs, prepare_xlm
from ptm_multilingual.pretraining import XLMPretrainingModel, XLMPretrainResult, pretrain_xlm
from ptm_multilingual.rows import ConcatRows, MLMStreamRows, ShardedStream, TLMPairRows
from ptm_multilingual.sampling import LanguageSampler, smoothed_probabilities
from ptm_multilingual.tokenizer import SPECIAL_TOKENS, SharedBPETokenizer

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
    "XLMPretrainingModel",
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
    "pretrain_xlm",
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
