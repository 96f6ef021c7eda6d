"""Typed settings of ptm-core's Transformer families (torch-free, read by the runner).

Each dataclass is the set of config blocks a family reads besides the shared ones
(``trainer``, ``objective``, ``model``, ``seed``, ``init_from``); every default is written
here once, the YAML presets (``configs/data/sample_corpus.yaml``, ``configs/finetune.yaml``,
``configs/experiment/*.yaml``) set only what differs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TextData:
    """The ``data`` block of text pre-training (``configs/data/sample_corpus.yaml``).

    Attributes:
        corpus: text-corpus file(s) or directory (``data_specs/text_corpus``), prepared
            into ``cache_dir`` first; a path or a list of paths.
        prepared: a directory written by ``ptm prepare`` (trained on instead of ``corpus``,
            with the tokenizer it was prepared with).
        cache_dir: where raw corpora are prepared (``None``: ``$PTM_CACHE_DIR/prepared``
            or ``~/.cache/ptm/prepared``).
        tokenizer: a ``vocab.txt`` or tokenizer directory; ``None`` trains a WordPiece
            vocabulary of ``vocab_size`` on the corpus.
        vocab_size: size of a trained vocabulary.
        lowercase: lower-case text (trained or ``vocab.txt`` tokenizers).
        max_length: tokens per row, special tokens included.
        batch_size: rows per micro-batch.
        pack: pack short rows together (block-diagonal attention); single-segment
            objectives only.
        num_workers: DataLoader worker processes that build batches.
    """

    corpus: Any = None
    prepared: str | None = None
    cache_dir: str | None = None
    tokenizer: str | None = None
    vocab_size: int = 8000
    lowercase: bool = True
    max_length: int = 128
    batch_size: int = 32
    pack: bool = False
    num_workers: int = 0


@dataclass
class Seq2SeqData(TextData):
    """The ``data`` block of sequence-to-sequence pre-training: :class:`TextData`, with
    ``batch_size`` counting sources (chunks of whole sentences). ``pack`` and
    ``num_workers`` do not apply (a warning says so when they are set)."""

    batch_size: int = 16


@dataclass
class Distill:
    """The ``distill`` block (DistilBERT, TinyBERT).

    Attributes:
        teacher: an MLM run's ``final/`` directory; ``None`` pre-trains one first, in
            ``<output_dir>/teacher``.
        teacher_steps: MLM steps of that teacher run.
        teacher_learning_rate: its learning rate (``None``: ``trainer.learning_rate``).
        init_from_teacher: copy every other teacher layer into the student (DistilBERT).
        teacher_model: the teacher's encoder builder (a ``_target_`` node, ``_partial_``).
    """

    teacher: str | None = None
    teacher_steps: int = 200
    teacher_learning_rate: float | None = None
    init_from_teacher: bool = False
    teacher_model: Any = None


@dataclass
class DistillSettings:
    """Settings of the ``distill`` family: the student's text data and the teacher."""

    data: TextData = field(default_factory=TextData)
    distill: Distill = field(default_factory=Distill)


@dataclass
class FinetuneOptions:
    """The ``finetune`` block of ``configs/finetune.yaml``.

    Attributes:
        random_init: keep the checkpoint's architecture and tokenizer but re-initialise its
            weights (the "same model without pre-training" baseline).
        num_workers: DataLoader processes that featurize training batches.
        group_by_length: batch training rows of similar length together (transformers'
            ``group_by_length``; :mod:`ptm_core.finetune.data.length_groups`): little
            padding per batch, each epoch still a random order of 50-batch groups.
        dropout: task-head dropout.
        feature_based: TagLM/ELMo mode (tagging): a frozen encoder, a learned scalar mix of
            its layers, then a BiLSTM-CRF.
        lstm_hidden: that BiLSTM's hidden size per direction.
        text_to_text: encoder-decoders: T5's text-to-text mode (generate the label name).
        kg: ERNIE-THU models only: the KG the task text is linked against.
        use_entities: ERNIE-THU models only: false is the kg-free ablation.
        peft: parameter-efficient fine-tuning (:mod:`ptm_core.peft`): ``none`` (train
            everything), ``lora``, ``ia3`` (through Hugging Face ``peft``), ``prompt`` (soft
            prompt tuning) or ``prefix`` (per-layer key/value prefixes). The encoder stays
            frozen; the adapter and the task head train.
        peft_r: LoRA rank.
        peft_alpha: LoRA scale numerator (the update is ``alpha / r * B A``).
        peft_dropout: LoRA dropout on the adapter's input.
        peft_target_modules: the encoder's ``nn.Linear`` names LoRA/IA3 wrap (``None``: the
            family's attention and feed-forward projections).
        peft_virtual_tokens: soft-prompt or prefix length.
    """

    random_init: bool = False
    num_workers: int = 0
    group_by_length: bool = True
    dropout: float = 0.1
    feature_based: bool = False
    lstm_hidden: int = 128
    text_to_text: bool = False
    kg: str | None = None
    use_entities: bool = True
    peft: str = "none"
    peft_r: int = 8
    peft_alpha: float = 16.0
    peft_dropout: float = 0.0
    peft_target_modules: list[str] | None = None
    peft_virtual_tokens: int = 20


def refuse_unread_finetune_options(
    options: FinetuneOptions, family: str, reads: Iterable[str], hint: str = ""
) -> None:
    """Refuse every ``finetune.*`` key set away from its default that ``family`` never reads.

    A family with its own fine-tuning loop (KnowBERT, SentiLARE) takes the generic
    ``finetune`` block; a key it does not read (``finetune.peft=lora``) would otherwise be
    dropped and the run would quietly train something else (every weight).

    Args:
        options: the run's ``finetune`` block.
        family: the family's name, for the message.
        reads: the keys the family's fine-tuning reads.
        hint: what to use instead, appended to the message.

    Raises:
        ValueError: one line naming the first unread key, its value and the keys read.
    """
    default, read = FinetuneOptions(), set(reads)
    for item in dataclasses.fields(options):
        value = getattr(options, item.name)
        if item.name not in read and value != getattr(default, item.name):
            raise ValueError(
                f"finetune.{item.name}={value} is not supported for a {family} model (its "
                f"fine-tuning reads finetune.{', finetune.'.join(sorted(read))}); drop it"
                + (f", {hint}" if hint else "")
            )


@dataclass
class TaskFinetuneSettings:
    """The blocks of a task fine-tune (``ptm finetune``, ``configs/finetune.yaml``) of an
    encoder or encoder-decoder: every Transformer family's settings have them.

    Attributes:
        task: the ``task`` block (``configs/task/*.yaml``; read by ``TaskSpec``).
        finetune: the fine-tuning switches.
        tokenizer: the tokenizer of a model built from the ``model`` preset (an
            ``init_from`` folder has its own).
        lowercase: lower-case text with that tokenizer (a ``vocab.txt``).
    """

    task: Any = None
    finetune: FinetuneOptions = field(default_factory=FinetuneOptions)
    tokenizer: str | None = None
    lowercase: bool = True


@dataclass
class TextSettings(TaskFinetuneSettings):
    """Settings of the ``encoder`` and ``xlnet`` families: text pre-training
    (``configs/config.yaml``) and the task fine-tune.

    Attributes:
        data: the corpus and its batching.
        init_embeddings: a static vector table (the ``final/`` of ``word2vec_tiny``,
            ``glove_tiny`` or ``nnlm_tiny``) whose vectors start the token embeddings.
    """

    data: TextData = field(default_factory=TextData)
    init_embeddings: str | None = None


@dataclass
class Seq2SeqSettings(TaskFinetuneSettings):
    """Settings of the ``seq2seq`` family (BART, T5, MASS): pre-training and fine-tune."""

    data: Seq2SeqData = field(default_factory=Seq2SeqData)
