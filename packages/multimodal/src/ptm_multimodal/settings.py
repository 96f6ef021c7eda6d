"""The typed config of ptm-multimodal's families (VisualBERT, ViLBERT, LXMERT).

The ``data`` block (``configs/data/image_text_*.yaml``) drives pre-training, the
``multimodal_finetune`` block (``configs/experiment/*vqa*.yaml``,
``multimodal_match_finetune.yaml``) fine-tuning. Each default is written here once; the
YAML presets set only what differs. Torch-free: the runner builds these before any model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ptm_multimodal.task_spec import ImageTextTask


@dataclass
class SyntheticPairs:
    """Synthetic grounded scenes (:mod:`ptm_multimodal.synthetic`), generated into
    ``<output_dir>/data/{train,eval}`` when ``data.train_dir`` is null.

    Attributes:
        num_images: training scenes.
        seed: seed of the training scenes.
        eval_images: evaluation scenes (0: no evaluation set).
        eval_seed: seed of the evaluation scenes.
        caption_noise: fraction of training scenes whose caption is another scene's
            (weakly-supervised, web-like pairs; 0 = every caption describes its image).
    """

    num_images: int = 400
    seed: int = 1
    eval_images: int = 100
    eval_seed: int = 2
    caption_noise: float = 0.0


@dataclass
class PretrainStage:
    """One stage of a multi-stage pre-training (``data.stages``; ImageBERT, Qi et al.
    2020, §4: the large weakly-supervised set first, then the clean sets).

    Attributes:
        name: the stage's name in the log and the data folder.
        steps: optimizer steps the stage lasts.
        train_dir: the stage's ``data_specs/image_text`` directory; null generates
            synthetic scenes from ``synthetic``.
        synthetic: the generator's settings when ``train_dir`` is null.
    """

    name: str
    steps: int
    train_dir: str | None = None
    synthetic: SyntheticPairs = field(default_factory=SyntheticPairs)


@dataclass
class TextOnlyData:
    """Text-only rows mixed into every pre-training batch (``data.text_only``; VL-BERT's
    pre-training on text corpora, :class:`~ptm_multimodal.text_rows.TextOnlyRows`).

    Attributes:
        corpus: a UTF-8 text file, one passage per line; null generates ``synthetic_lines``
            lines of scene descriptions not tied to any image.
        synthetic_lines: lines of the generated corpus.
        seed: seed of the generated corpus.
        rows_per_batch: text rows appended to each image-text batch (the reference: as
            many as the image-text rows).
        max_length: tokens per text row, specials included (the reference: 64; at most
            the model's ``max_positions``).
    """

    corpus: str | None = None
    synthetic_lines: int = 2000
    seed: int = 3
    rows_per_batch: int = 32
    max_length: int = 32


@dataclass
class ImageTextData:
    """The ``data`` block of image-text pre-training.

    Attributes:
        train_dir: a ``data_specs/image_text`` directory; null generates synthetic scenes.
        eval_dir: evaluation pairs (null with synthetic data: generated too).
        synthetic: the generator's settings when ``train_dir`` is null.
        batch_size: pairs per batch.
        max_length: caption token limit.
        negative_prob: fraction of swapped-caption negatives.
        prepare: prepare the pairs once into a cache keyed by a fingerprint and read them
            per index (false reads them whole: small data only).
        cache_dir: where pairs are prepared (null: ``$PTM_CACHE_DIR/prepared``).
        extraction: extract grid features from the images with a timm backbone (the
            fields of :class:`~ptm_multimodal.prepared.GridExtraction`, e.g.
            ``{backbone: resnet10t, pool: [7, 7]}``); null reads precomputed regions.
        num_workers: DataLoader worker processes that build batches.
        corpus: the pairs file ``ptm evaluate`` scores by default.
        stages: a multi-stage schedule (:class:`PretrainStage`, run in order, each
            continuing the previous); empty: one stage on ``train_dir``. Every stage's
            data must share the first stage's vocabulary and features.
        text_only: text-only rows in every batch (VL-BERT); null: none.
    """

    train_dir: str | None = None
    eval_dir: str | None = None
    synthetic: SyntheticPairs = field(default_factory=SyntheticPairs)
    batch_size: int = 64
    max_length: int = 32
    negative_prob: float = 0.5
    prepare: bool = True
    cache_dir: str | None = None
    extraction: dict[str, Any] | None = None
    num_workers: int = 0
    corpus: str | None = None
    stages: list[PretrainStage] = field(default_factory=list)
    text_only: TextOnlyData | None = None


@dataclass
class MultimodalFinetune:
    """The ``multimodal_finetune`` block: a task on a pre-trained VisualBERT/ViLBERT.

    Attributes:
        task: the task (kind, JSONL files, region-feature directory, lengths).
        architecture: the family ``init_from`` must be (null: any that fine-tunes).
        dropout: task-head dropout.
        random_init: the same architecture from random init (the baseline).
        freeze_backbone: train the task head only.
        head: ``cls`` (a classifier on ``[CLS]``) or ``cloze`` (VisualBERT: a ``[MASK]``
            answer slot read through the pre-trained MLM transform).
        peft: ``none``, ``lora``, ``ia3``, ``prompt`` or ``prefix`` on the frozen backbone
            (the core methods, :mod:`ptm_core.peft`; a prompt goes before the text stream,
            LXMERT's before its language stream; refused for VL-BERT).
        peft_r: LoRA rank.
        peft_alpha: LoRA scale numerator (update ``alpha / r * B A``).
        peft_dropout: LoRA dropout on the adapter's input.
        peft_target_modules: the backbone's linears LoRA/IA3 wrap, by name (``null``: the
            attention and feed-forward projections).
        peft_virtual_tokens: soft-prompt or prefix length.
    """

    task: ImageTextTask
    architecture: str | None = None
    dropout: float = 0.1
    random_init: bool = False
    freeze_backbone: bool = False
    head: str = "cls"
    peft: str = "none"
    peft_r: int = 8
    peft_alpha: float = 16.0
    peft_dropout: float = 0.0
    peft_target_modules: list[str] | None = None
    peft_virtual_tokens: int = 20


@dataclass
class ImageTextSettings:
    """What a VisualBERT/ViLBERT/LXMERT run reads besides trainer, objective and model.

    Attributes:
        data: the image-text pairs (pre-training).
        multimodal_finetune: the task (fine-tuning; null when pre-training).
        experiment_name: kept in a fine-tuned model's provenance.
    """

    data: ImageTextData = field(default_factory=ImageTextData)
    multimodal_finetune: MultimodalFinetune | None = None
    experiment_name: str | None = None
