"""CogQA's typed settings (no torch): System 1's sizes, the training settings and the
``data``/``cogqa`` config blocks (``configs/data/multihop_generated.yaml``,
``configs/experiment/cogqa_tiny.yaml``). Each default is written here once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class ReaderConfig:
    """Size and decoding settings of :class:`CogQAReader`.

    Args:
        hidden_size / num_layers / num_heads / intermediate_size: encoder size.
        max_length: longest input sequence.
        max_span_length: longest extracted span, in words.
        top_k: spans kept per head.
        threshold: an answer span is kept when its start+end score beats the ``[CLS]``
            score by this.
        hop_threshold: the same for next-hop spans; low by default so the top-k hops are
            kept (System 2 can discard a wrong hop later, a missed bridge loses the answer).
        dropout: encoder dropout.
    """

    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 2
    intermediate_size: int = 128
    max_length: int = 128
    max_span_length: int = 6
    top_k: int = 2
    threshold: float = 0.0
    hop_threshold: float = -8.0
    dropout: float = 0.1


@dataclass
class CogQATrainConfig:
    """Settings of :func:`~ptm_knowledge.cogqa.fit_system`.

    Args:
        reader: System 1 sizes and decoding.
        gnn_hidden / gnn_layers: System 2 size.
        reader_epochs / reasoner_epochs: passes over the training questions.
        batch_size: System 1 micro-batch (sequences).
        accumulation_steps: micro-batches (System 1) or graphs (System 2) per optimiser step.
        reader_lr / reasoner_lr: AdamW learning rates.
        distractors_per_question: distractor paragraphs read per question in training.
        max_depth / max_nodes: graph growth limits.
        seed: seed of initialisation, shuffling and sampling.
        joint: train System 2 jointly with System 1 (Ding et al., 2019, §3.4 and the
            released code's second phase): node vectors are computed with gradients and
            reasoner + reader are optimised on ``answer_loss + joint_span_weight *
            span_loss``. ``False`` (default): System 2 is trained alone on vectors of the
            frozen reader. Graph growth (which spans are extracted) is discrete and never
            carries gradients.
        joint_span_weight: weight of System 1's span loss (same questions' reader
            examples) in the joint phase; ``0`` lets the answer loss alone move the reader.
        joint_reader_lr: AdamW learning rate of System 1 in the joint phase (System 2
            keeps ``reasoner_lr``).
        warmup_ratio: each phase's learning rate rises linearly over this fraction of its
            steps, then decays linearly to 0 (the core Trainer's schedule); 0 starts at
            the peak rate.
        save_every: checkpoint every this many steps of each phase (and at its end).
    """

    reader: ReaderConfig = field(default_factory=ReaderConfig)
    gnn_hidden: int = 64
    gnn_layers: int = 2
    reader_epochs: int = 12
    reasoner_epochs: int = 10
    batch_size: int = 16
    accumulation_steps: int = 2
    reader_lr: float = 2e-3
    reasoner_lr: float = 3e-3
    distractors_per_question: int = 1
    max_depth: int = 2
    max_nodes: int = 16
    seed: int = 0
    joint: bool = False
    joint_span_weight: float = 1.0
    joint_reader_lr: float = 2e-4
    warmup_ratio: float = 0.0
    save_every: int = 100

    def __post_init__(self) -> None:
        if not isinstance(self.joint, bool):
            raise ValueError(
                f"CogQATrainConfig.joint must be true or false, got {self.joint!r}; set "
                "cogqa.joint=true to train System 2 jointly with System 1"
            )
        if not (math.isfinite(self.joint_span_weight) and self.joint_span_weight >= 0):
            raise ValueError(
                f"CogQATrainConfig.joint_span_weight must be a finite number >= 0, got "
                f"{self.joint_span_weight!r}; use e.g. 1.0 (0 drops System 1's span loss "
                "from the joint phase)"
            )
        if not (math.isfinite(self.joint_reader_lr) and self.joint_reader_lr > 0):
            raise ValueError(
                f"CogQATrainConfig.joint_reader_lr must be a finite number > 0, got "
                f"{self.joint_reader_lr!r}; use e.g. 2e-4 (System 1's learning rate while "
                "it is trained jointly with System 2)"
            )


@dataclass
class CogQAOptions(CogQATrainConfig):
    """The ``cogqa`` config block: :class:`CogQATrainConfig` (its ``seed`` is the run's
    root ``seed``) plus

    Attributes:
        num_threads: torch threads for the run (1 is fastest for the tiny preset on a
            shared CPU).
    """

    num_threads: int = 1


@dataclass
class MultiHopData:
    """The ``data`` block of CogQA (``data_specs/multihop_qa``): HotpotQA-format files, or
    2-hop bridge questions generated from a KG for whichever file is not given.

    Attributes:
        kg: a folder with ``entities.tsv`` + ``triples.tsv`` to generate questions from.
        train_file / dev_file: HotpotQA-format files (a JSON list or JSON Lines),
            validated in one streaming pass and parsed per record.
        num_train: generated chains (after a seeded shuffle) that go to training; the
            rest go to dev.
        num_distractors: distractor paragraphs per generated question.
        style: the generated questions' wording (``verb``).
        generate_seed: seed of the generation.
        corpus: a HotpotQA file validated before training (the spec's sample), so a
            broken data install fails before any compute; ``None`` skips it.
    """

    kg: str | None = None
    train_file: str | None = None
    dev_file: str | None = None
    num_train: int = 100
    num_distractors: int = 4
    style: str = "verb"
    generate_seed: int = 0
    corpus: str | None = None


@dataclass
class CogQASettings:
    """CogQA's config blocks: ``data`` (questions) and ``cogqa`` (training)."""

    data: MultiHopData = field(default_factory=MultiHopData)
    cogqa: CogQAOptions = field(default_factory=CogQAOptions)
