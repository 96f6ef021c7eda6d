"""Typed settings of ptm-classic's families: the config blocks they read besides the shared
ones (``trainer``, ``objective``, ``model``, ``seed``, ``init_from``).

Torch-free: the runner builds these from the composed config before any model is imported
(:func:`flows.runner.settings_of`), so a misspelt key fails in one line naming it. Each
default is written here once; the YAML presets (``configs/data/sample_corpus.yaml``,
``configs/experiment/{elmo,awd_lstm}_tiny.yaml``) only set what differs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ptm_core.families.core_settings import FinetuneOptions


@dataclass
class CorpusData:
    """The text-corpus keys of ``configs/data/*.yaml`` (``sample_corpus``).

    Attributes:
        corpus: text-corpus file(s) or folder (any input ``ptm prepare`` reads).
        prepared: a folder written by ``ptm prepare`` (used instead of ``corpus``).
        cache_dir: where raw corpora are prepared (``None``: ``$PTM_CACHE_DIR/prepared``).
        tokenizer: a ``vocab.txt`` or tokenizer folder (``None``: WordPiece trained on the
            corpus).
        vocab_size: size of a trained WordPiece vocabulary.
        lowercase: lower-case the text (WordPiece).
        max_length: tokens per row (Transformer families; not read by the recurrent LMs).
        batch_size: rows per micro-batch.
        pack: pack short rows (Transformer families; not read here).
        num_workers: DataLoader worker processes.
    """

    corpus: str | None = None
    prepared: str | None = None
    cache_dir: str | None = None
    tokenizer: str | None = None
    vocab_size: int = 4000
    lowercase: bool = True
    max_length: int = 128
    batch_size: int = 16
    pack: bool = False
    num_workers: int = 0


@dataclass
class ElmoData(CorpusData):
    """ELMo's word-level data (``configs/experiment/elmo_tiny.yaml``); the WordPiece keys
    above are not read.

    Attributes:
        vocab_top_k: output words besides ``<unk>``, ``<s>``, ``</s>`` (most frequent first).
        min_count: types seen fewer times are ``<unk>`` in the output.
        max_words: words per row (longer sentences are split).
        word_lowercase: lower-case the words.
        heldout_every: every this-many-th row is held out for the final perplexity (0: none
            held out; the perplexity is then measured on the training rows).
        word_corpus_dir: where the word corpus is prepared (``None``:
            ``<trainer.output_dir>/word_corpus``).
    """

    vocab_top_k: int = 50000
    min_count: int = 1
    max_words: int = 64
    word_lowercase: bool = False
    heldout_every: int = 20
    word_corpus_dir: str | None = None


@dataclass
class ElmoSettings:
    """The ``elmo`` family's config blocks."""

    data: ElmoData = field(default_factory=ElmoData)


@dataclass
class AWDLSTMData(CorpusData):
    """AWD-LSTM's BPTT data (``configs/experiment/awd_lstm_tiny.yaml``).

    Attributes:
        bptt: BPTT window (AWD-LSTM: 70).
        variable_length: AWD-LSTM's random window lengths (70 w.p. 0.95 else 35, then
            ``N(., 5)``).
        valid_fraction: share of the stream's end held out for the perplexity report.
    """

    bptt: int = 70
    variable_length: bool = True
    valid_fraction: float = 0.05


@dataclass
class AWDLSTMSettings:
    """The ``awd_lstm`` family's config blocks: ``data`` (pre-training), ``task`` and
    ``finetune`` (the ULMFiT classifier)."""

    data: AWDLSTMData = field(default_factory=AWDLSTMData)
    task: Any = None
    # core's block (one definition for every family): the classifier reads num_workers and
    # random_init and peft (ptm_classic.recurrent.lstm_peft), refuses feature_based and
    # text_to_text.
    finetune: FinetuneOptions = field(default_factory=FinetuneOptions)


@dataclass
class Probes:
    """The sanity report of a static-embedding run (``final/metrics.json``).

    Attributes:
        neighbours: words whose nearest neighbours are listed (empty: the table's five first
            alphabetic words).
        analogies: ``[a, b, c, expected]`` (or ``[a, b, c]``): a is to b as c is to expected.
    """

    neighbours: list[str] = field(default_factory=list)
    analogies: list[list[str]] = field(default_factory=list)


@dataclass
class StaticEmbeddingsSettings:
    """The blocks the ``static_embeddings`` family reads besides ``model`` (the method's trainer)
    and ``trainer``: ``data`` (``corpus`` or ``prepared``, ``lowercase``) and ``probes``."""

    data: CorpusData = field(default_factory=CorpusData)
    probes: Probes = field(default_factory=Probes)


@dataclass
class CoVeData:
    """CoVe's translation data (``configs/experiment/cove_tiny.yaml``).

    Attributes:
        parallel: parallel corpus file(s) or folder (``data_specs/parallel_corpus``).
        glove: the GloVe vector table the MT-LSTM reads, frozen (the ``final/`` of ``ptm
            pretrain experiment=glove_tiny``).
        source_lang: the language the MT-LSTM encodes (the GloVe table's).
        target_langs: the languages translated into (empty: every other side of the data).
        max_words: words per sentence (longer ones are cut).
        target_vocab_top_k: decoder words besides the special ones, most frequent first.
        min_count: target words seen fewer times are ``<unk>``.
        batch_size: pairs per batch.
        heldout: parallel pairs scored after training (perplexity); ``None``: none.
    """

    parallel: str | None = None
    glove: str | None = None
    source_lang: str = "en"
    target_langs: list[str] = field(default_factory=list)
    max_words: int = 50
    target_vocab_top_k: int = 50000
    min_count: int = 1
    batch_size: int = 32
    heldout: str | None = None


@dataclass
class CoVeFeatureOptions:
    """What a CoVe ``final/`` feeds the downstream classifier or tagger (``cove`` block).

    Attributes:
        inputs: ``glove+cove`` (the paper's ``[GloVe(w); CoVe(w)]``), ``cove`` or ``glove``
            (the same GloVe table alone: the baseline).
        layers: ``layer1`` (CoVe proper), ``layer0`` or ``both`` (``[layer0; layer1]``).
        crf: tagging: a CRF over the tag scores (False: per-word softmax).
    """

    inputs: str = "glove+cove"
    layers: str = "layer1"
    crf: bool = True


@dataclass
class CoVeSettings:
    """The ``cove`` family's config blocks: ``data`` (pre-training), ``task``, ``finetune``
    (core's block: ``lstm_hidden``, ``dropout``, ``random_init``) and ``cove``."""

    data: CoVeData = field(default_factory=CoVeData)
    task: Any = None
    finetune: FinetuneOptions = field(default_factory=FinetuneOptions)
    cove: CoVeFeatureOptions = field(default_factory=CoVeFeatureOptions)
