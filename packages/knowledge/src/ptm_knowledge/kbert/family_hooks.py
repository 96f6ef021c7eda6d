"""K-BERT's task adapter: the ``kbert`` family's ``finetune`` hook (``recipe: kbert``).

Reads the labelled TSVs and the KG named by ``data`` (``configs/data/kbert_sample.yaml``),
builds the encoder (``model``, or ``kbert.init_from``: any checkpoint
``TransformerEncoder.from_pretrained`` loads, a BERT, RoBERTa or XLM-R folder with its own
tokenizer, used without re-pre-training) and fine-tunes
a K-BERT classifier (a core ``TaskModel`` on core ``TaskBatches``, see
:func:`~ptm_knowledge.kbert.finetune_kbert`) with the ablations of ``kbert.kg`` /
``kbert.visible_matrix``; ``final/`` is a core fine-tuned model folder (``task.json`` with
``recipe: kbert``, the K-BERT settings and where the KG and data came from).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ptm_knowledge.family_kbert import KBertSettings

if TYPE_CHECKING:
    from ptm_core.families.runner import FinetuneRun
    from ptm_core.finetune.recipe import FinetuneResult

#: Task-head dropout when the objective preset names none (kbert_cls.yaml sets it).
DROPOUT = 0.1


def _switch(key: str, value: Any, on: str, off: str) -> str:
    """YAML and the command line may give booleans for the on/off switches."""
    if isinstance(value, bool):
        return on if value else off
    if str(value) not in (on, off):
        raise ValueError(f"{key}={value}: must be {on} or {off}")
    return str(value)


def finetune(run: FinetuneRun) -> FinetuneResult:
    """Fine-tune K-BERT as ``run.settings`` (:class:`KBertSettings`) says.

    Raises:
        ValueError: a missing ``data`` file setting or a bad ``kbert`` switch (one line
            naming the key).
    """
    import torch

    from ptm_core import TransformerEncoder
    from ptm_core.checkpoints.init_report import check_folder_vocabulary
    from ptm_core.finetune.data.task_tokenizer import load_task_tokenizer
    from ptm_core.peft import PeftConfig
    from ptm_core.tokenization import WordPieceTokenizer
    from ptm_knowledge.kbert import finetune_kbert, knowledge_from_graph, read_labeled_tsv
    from ptm_knowledge.kg import load_knowledge_graph

    settings: KBertSettings = run.settings or KBertSettings()
    data, options = settings.data, settings.kbert
    peft = PeftConfig.from_options(options, block="kbert", max_length_key="kbert.max_length")
    if peft.enabled and not options.init_from:
        raise ValueError(
            f"kbert.peft={peft.method} trains an adapter on a pre-trained encoder: give "
            "kbert.init_from=<a BERT, RoBERTa or XLM-R folder>, or set kbert.peft=none"
        )
    if peft.enabled and run.trainer.unfreeze_every > 0:
        raise ValueError(
            f"kbert.peft={peft.method}: trainer.unfreeze_every would unfreeze the frozen "
            "encoder; set it to 0"
        )
    if not (data.corpus and data.dev and data.kg):
        missing = next(k for k in ("corpus", "dev", "kg") if not getattr(data, k))
        raise ValueError(f"data.{missing} is null: K-BERT needs data.corpus, data.dev, data.kg")
    kg = _switch("kbert.kg", options.kg, "full", "none")
    visible = _switch("kbert.visible_matrix", options.visible_matrix, "on", "off")
    tokenizer: Any
    if options.init_from:
        # The folder's own tokenizer: WordPiece (BERT), byte-level BPE (RoBERTa) or
        # Unigram (XLM-R); its token table is indexed by those ids.
        tokenizer = load_task_tokenizer(options.init_from)
        encoder = TransformerEncoder.from_pretrained(options.init_from)
        check_folder_vocabulary(options.init_from, encoder.config.vocab_size, tokenizer.vocab_size)
        # The head (and an adapter) draw their init from the global generator: seed it, so
        # the same seed gives the same run (and a resumed run its straight twin).
        torch.manual_seed(run.seed)
    else:
        if not data.tokenizer or run.model is None:
            raise ValueError("data.tokenizer and model are needed without kbert.init_from")
        path = Path(data.tokenizer)
        tokenizer = (
            WordPieceTokenizer.from_vocab(path, lowercase=data.lowercase)
            if path.is_file()
            else WordPieceTokenizer.from_directory(path)
        )
        # Seeded as the core fine-tuning seeds a random-init encoder: the same seed gives the
        # same model (the recipe before the family spec drew it from an unseeded generator).
        torch.manual_seed(run.seed)
        encoder = run.model(vocab_size=tokenizer.vocab_size)
    train, labels = read_labeled_tsv(data.corpus)
    dev, _ = read_labeled_tsv(data.dev, labels)
    knowledge = knowledge_from_graph(
        load_knowledge_graph(data.kg), predicate=data.predicate, aliases=data.aliases
    )
    dropout = run.build("objective.dropout") if run.build is not None else None
    return finetune_kbert(
        train,
        dev,
        encoder=encoder,
        tokenizer=tokenizer,
        knowledge=knowledge,
        label_names=labels,
        trainer=run.trainer,
        max_entities=options.max_entities,
        max_length=data.max_length,
        batch_size=data.batch_size,
        kg=kg,  # type: ignore[arg-type]
        visible_matrix=visible,  # type: ignore[arg-type]
        dropout=DROPOUT if dropout in (None, {}) else float(dropout),
        seed=run.seed,
        init_from=options.init_from,
        peft=peft,
        provenance={
            "train": str(data.corpus),
            "dev": str(data.dev),
            "kg_path": str(data.kg),
            "predicate": data.predicate,
            "aliases": data.aliases,
            "init_from": str(options.init_from) if options.init_from else None,
        },
    )
