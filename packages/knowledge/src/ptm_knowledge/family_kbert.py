"""K-BERT's family spec and typed settings (torch-free; the hook is
:func:`ptm_knowledge.kbert.family_hooks.finetune`).

K-BERT (Liu et al., 2020) has no pre-training of its own: ``recipe: kbert`` fine-tunes a
BERT encoder (``model`` at random init, or ``kbert.init_from``) on sentence trees built
from a KG. Its ``final/`` is a core fine-tuned folder (``task.json`` with
``recipe: kbert``), scored by :data:`ptm_knowledge.evaluation_kinds.KBERT`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ptm_core.families.spec import FamilySpec


@dataclass
class KBertData:
    """The ``data`` block (``configs/data/kbert_sample.yaml``).

    Attributes:
        corpus: the training TSV (``label<TAB>text_a[<TAB>text_b]``, or a tagged TSV).
        dev: the evaluation TSV.
        kg: the KG whose triples become the sentence-tree branches.
        tokenizer: a ``vocab.txt`` or tokenizer folder (ignored with ``kbert.init_from``).
        vocab_size: unused by K-BERT (the tokenizer's size wins); kept for the shared preset.
        lowercase: lowercase before WordPiece (a ``vocab.txt`` tokenizer).
        max_length: tokens per sentence tree.
        batch_size: sentences per batch.
        predicate: branch text with the relation ("capital of Poland").
        aliases: also look entities up by alias.
    """

    corpus: str | None = None
    dev: str | None = None
    kg: str | None = None
    tokenizer: str | None = None
    vocab_size: int = 4000
    lowercase: bool = True
    max_length: int = 128
    batch_size: int = 16
    predicate: bool = True
    aliases: bool = False


@dataclass
class KBertOptions:
    """The ``kbert`` block (``configs/experiment/kbert_tiny_cls.yaml``).

    Attributes:
        kg: ``full`` (branches injected) or ``none`` (the kg-free ablation); a boolean
            reads as full/none.
        visible_matrix: ``on`` or ``off`` (every token sees every token); a boolean reads
            as on/off.
        max_entities: branches per entity.
        init_from: a BERT, RoBERTa or XLM-R checkpoint (ptm ``final/`` or Hugging Face
            folder, with its tokenizer) to fine-tune; ``None``: the ``model`` preset at
            random init.
        peft: ``none``, ``lora``, ``ia3``, ``prompt`` or ``prefix`` on ``init_from``'s
            encoder (the core methods, :mod:`ptm_core.peft`).
        peft_r: LoRA rank.
        peft_alpha: LoRA scale numerator (update ``alpha / r * B A``).
        peft_dropout: LoRA dropout on the adapter's input.
        peft_target_modules: the encoder's linears LoRA/IA3 wrap, by name (``null``: the
            attention and feed-forward projections).
        peft_virtual_tokens: soft-prompt or prefix length.
    """

    kg: Any = "full"
    visible_matrix: Any = "on"
    max_entities: int = 2
    init_from: str | None = None
    peft: str = "none"
    peft_r: int = 8
    peft_alpha: float = 16.0
    peft_dropout: float = 0.0
    peft_target_modules: list[str] | None = None
    peft_virtual_tokens: int = 20


@dataclass
class KBertSettings:
    """K-BERT's config blocks besides trainer/objective/model/seed."""

    data: KBertData = field(default_factory=KBertData)
    kbert: KBertOptions = field(default_factory=KBertOptions)


KBERT = FamilySpec(
    name="kbert",
    description="K-BERT: a BERT classifier/tagger reading KG branches (sentence trees, "
    "soft positions, visible matrix)",
    settings="ptm_knowledge.family_kbert:KBertSettings",
    finetune="ptm_knowledge.kbert.family_hooks:finetune",
    predictors={"kbert": "ptm_knowledge.kbert.predict_rows:predict_kbert_rows"},
    evaluation="ptm_knowledge.evaluation_kinds:KBERT",
    recipes={"kbert": "finetune"},
)

__all__ = ["KBERT", "KBertData", "KBertOptions", "KBertSettings"]
