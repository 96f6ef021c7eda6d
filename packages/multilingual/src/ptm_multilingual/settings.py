"""XLM's typed config: the ``data`` and ``xlm_finetune`` blocks (torch-free).

``configs/data/xlm_sample.yaml`` and the ``experiment=xlm_*`` presets set these blocks;
:func:`flows.runner.settings_of` reads them into :class:`XLMSettings`, so an unknown key or a
value of the wrong type is one line naming ``<block>.<key>``. Every default of XLM's
pre-training and zero-shot fine-tuning is written here, once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class XLMData:
    """The ``data`` block of XLM pre-training (``configs/data/xlm_sample.yaml``).

    Attributes:
        corpus: monolingual ``<lang>.txt`` files or their folder (MLM streams); a path or a
            list of paths; ``None``: no monolingual text (TLM only).
        parallel: parallel corpora (``*.tsv`` or aligned ``<pair>.<lang>`` file pairs; TLM
            pairs, and with ``mlm_steps`` their sides feed the MLM streams too); ``None``:
            MLM only.
        evaluation_parallel: held-out parallel corpora scored by retrieval accuracy after
            training (``final_metrics["retrieval/<pair>/..."]``); ``None``: no scoring.
        prepared: a folder :func:`~ptm_multilingual.prepared_data.prepare_xlm` (``ptm
            prepare``) wrote; it replaces ``corpus``, ``parallel`` and ``tokenizer``.
        cache_dir: where raw corpora are prepared (``None``: the ptm cache,
            ``$PTM_CACHE_DIR/prepared``), keyed by their fingerprint.
        tokenizer: a saved shared tokenizer folder; ``None`` trains a BPE vocabulary of
            ``vocab_size`` (a resumed run keeps the one its checkpoints were trained with).
        vocab_size: BPE vocabulary size when training one.
        vocab_alpha: language smoothing of the BPE training sample.
        tokenizer_sample: sentences in the BPE training sample (``None``: every sentence
            once on average, at most 2M).
        lowercase: lowercase text before BPE.
        alpha: language smoothing of batch sampling, ``q_l ∝ (n_l/N)^alpha``.
        stream_length: tokens per MLM stream row.
        max_length: tokens per TLM row (both sentences).
        batch_size: rows per batch.
        mlm_steps: MLM batches per round of the alternation (0: no MLM).
        tlm_steps: TLM batches per round of the alternation (0: no TLM).
        directions: TLM orders, e.g. ``["en-fr", "fr-en"]`` (first language first);
            ``None``: each corpus as stored.
        batches_per_epoch: length of an epoch of the sampled batch stream.
    """

    corpus: Any = None
    parallel: Any = None
    evaluation_parallel: Any = None
    prepared: str | None = None
    cache_dir: str | None = None
    tokenizer: str | None = None
    vocab_size: int = 8000
    vocab_alpha: float = 0.5
    tokenizer_sample: int | None = None
    lowercase: bool = True
    alpha: float = 0.5
    stream_length: int = 64
    max_length: int = 64
    batch_size: int = 32
    mlm_steps: int = 1
    tlm_steps: int = 1
    directions: list[str] | None = None
    batches_per_epoch: int = 100


@dataclass
class XLMFinetune:
    """The ``xlm_finetune`` block of zero-shot cross-lingual transfer
    (``configs/experiment/xlm_zero_shot.yaml``).

    Attributes:
        train_file: the labelled training file (``label<TAB>text`` lines).
        train_lang: its language (one of the checkpoint's languages).
        dev: language -> labelled dev file; languages other than ``train_lang`` are scored
            zero-shot.
        batch_size: training rows per batch.
        eval_batch_size: rows per scoring batch.
        max_length: tokens per row, ``<s>``/``</s>`` included.
        dropout: head dropout.
        freeze: ``none`` (XLM: fine-tune everything), ``embeddings`` (token, position and
            language tables fixed) or ``encoder`` (train the head only).
        random_init: the same architecture and vocabulary at random init (the
            no-pre-training baseline).
        peft: ``none``, ``lora``, ``ia3``, ``prompt`` or ``prefix`` on the frozen XLM
            encoder (the core methods, :mod:`ptm_core.peft`; prompt positions take the
            row's language embedding).
        peft_r: LoRA rank.
        peft_alpha: LoRA scale numerator (update ``alpha / r * B A``).
        peft_dropout: LoRA dropout on the adapter's input.
        peft_target_modules: the encoder's linears LoRA/IA3 wrap, by name (``null``: the
            attention and feed-forward projections).
        peft_virtual_tokens: soft-prompt or prefix length.
    """

    train_file: str | None = None
    train_lang: str = "en"
    dev: dict[str, str] = field(default_factory=dict)
    batch_size: int = 16
    eval_batch_size: int = 64
    max_length: int = 64
    dropout: float = 0.1
    freeze: str = "none"
    random_init: bool = False
    peft: str = "none"
    peft_r: int = 8
    peft_alpha: float = 16.0
    peft_dropout: float = 0.0
    peft_target_modules: list[str] | None = None
    peft_virtual_tokens: int = 20


@dataclass
class XLMSettings:
    """Every config block XLM reads besides ``trainer``, ``objective``, ``model``, ``seed``
    and ``init_from``.

    Attributes:
        data: the pre-training corpora and batching (:class:`XLMData`).
        xlm_finetune: zero-shot fine-tuning (:class:`XLMFinetune`).
        experiment_name: the preset's name, recorded in a fine-tuned ``task.json``.
    """

    data: XLMData = field(default_factory=XLMData)
    xlm_finetune: XLMFinetune = field(default_factory=XLMFinetune)
    experiment_name: str | None = None


__all__ = ["XLMData", "XLMFinetune", "XLMSettings"]
