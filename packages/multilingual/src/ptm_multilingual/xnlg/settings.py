"""XNLG's typed config: the ``data``, ``xnlg`` and ``xnlg_finetune`` blocks (torch-free).

``configs/experiment/xnlg_tiny.yaml`` (stage 2) and ``xnlg_zero_shot.yaml`` (fine-tuning and
zero-shot generation) set them; every default is written here once. The ``data`` block is
XLM's (:class:`~ptm_multilingual.settings.XLMData`): stage 2 reads the same corpora as
stage 1 ("the model is trained with the same data with #1", the reference's README).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ptm_multilingual.settings import XLMData

#: What fine-tuning trains (``xnlg_finetune.train``).
TRAIN_PARTS = ("encoder_layers", "encoder", "decoder", "all")


@dataclass
class XNLGOptions:
    """The ``xnlg`` block of stage 2 (decoder pre-training).

    Attributes:
        decoder_layers: decoder depth (the reference: 6 under a 10-layer encoder).
        init_decoder: start the decoder from the stage-1 encoder (tables, embedding norm,
            self-attention and feed-forward of the first ``decoder_layers`` layers).
        freeze_encoder: train the decoder only (the reference's ``--train_model_names
            decoder``).
        directions: cross-lingual auto-encoding (XAE) directions, ``["en-fr", "fr-en"]``;
            ``None``: both directions of every parallel corpus.
        dae_fraction: share of denoising (DAE) rows in a batch; the rest are XAE rows.

    The noise rates and the loss weights of the two kinds are the objective's
    (``configs/objective/xnlg.yaml``).
    """

    decoder_layers: int = 2
    init_decoder: bool = True
    freeze_encoder: bool = True
    directions: list[str] | None = None
    dae_fraction: float = 0.5


@dataclass
class XNLGFinetune:
    """The ``xnlg_finetune`` block: fine-tune on generation in one language, generate in
    every dev language (zero-shot in the others).

    Attributes:
        train_file: ``source<TAB>target`` lines in ``train_lang`` (no header).
        train_lang: the training language (one of the model's languages).
        dev: language -> ``source<TAB>target`` file scored after training (BLEU, ROUGE).
        batch_size: training rows per batch.
        eval_batch_size: rows per generation batch.
        max_source_length: encoder tokens per row, specials included.
        max_target_length: decoder tokens per row, specials included; also the most
            tokens generated.
        train: ``encoder_layers`` (the reference's zero-shot ``--train_layers 1,10``: the
            encoder's layers; tables and decoder fixed, so the decoder keeps what stage 2
            taught it of every language), ``encoder``, ``decoder`` or ``all``.
        num_beams: beam width of generation (the reference: 3).
        bleu_tokenize: sacrebleu tokenizer (``13a``, ``intl``, ``char``, ``zh``, ...).
        bleu_max_order: BLEU's longest n-gram (4; 2 for targets of three words or fewer,
            whose corpus BLEU-4 is 0 without a single 4-gram).
    """

    train_file: str | None = None
    train_lang: str = "en"
    dev: dict[str, str] = field(default_factory=dict)
    batch_size: int = 16
    eval_batch_size: int = 32
    max_source_length: int = 64
    max_target_length: int = 32
    train: str = "encoder_layers"
    num_beams: int = 1
    bleu_tokenize: str = "13a"
    bleu_max_order: int = 4


@dataclass
class XNLGSettings:
    """Every block XNLG reads besides ``trainer``, ``objective``, ``model``, ``seed`` and
    ``init_from``."""

    data: XLMData = field(default_factory=XLMData)
    xnlg: XNLGOptions = field(default_factory=XNLGOptions)
    xnlg_finetune: XNLGFinetune = field(default_factory=XNLGFinetune)
    experiment_name: str | None = None


__all__ = ["TRAIN_PARTS", "XNLGFinetune", "XNLGOptions", "XNLGSettings"]
