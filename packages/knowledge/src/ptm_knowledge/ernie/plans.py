"""The ERNIE families' pre-training plans: typed settings in, a :class:`PretrainingPlan` out.

:func:`plan_ernie_baidu` (MLM with staged knowledge masking) and :func:`plan_ernie_thu`
(KG embeddings, then MLM + NSP + dEA through the knowledgeable encoder) are the specs'
``plan_pretraining`` hooks; the runner (:func:`ptm_core.families.runner.run_pretraining`)
wraps the network in the generic ``PretrainingModel``, trains and saves ``final/``.
Both train from a linked corpus prepared once into memory-mapped shards
(:func:`~ptm_knowledge.ernie.pretraining.open_linked_corpus`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Container, Sequence
from pathlib import Path
from typing import Any

import torch

from ptm_core.checkpoints.init_report import (
    check_folder_vocabulary,
    check_segment_objectives,
    report_init,
)
from ptm_core.data import PretrainingBatches
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.families.runner import PretrainingPlan, PretrainRun
from ptm_core.objectives import MaskedLMObjective, NextSentenceObjective, ObjectiveMix
from ptm_core.objectives.base import Objective
from ptm_core.objectives.inputs import build_objective
from ptm_core.pretraining import save_heads
from ptm_knowledge.ernie.dea import DenoisingEntityAutoencoderObjective
from ptm_knowledge.ernie.examples import check_mention_coverage
from ptm_knowledge.ernie.knowledge_masking import (
    KnowledgeMaskingObjective,
    MaskingSchedule,
    StagedMaskingBatches,
)
from ptm_knowledge.ernie.knowledge_store import KnowledgeStore, knowledge_coverage
from ptm_knowledge.ernie.pretraining import (
    _finish,
    _text_encoder,
    knowledge_rows,
    open_run_corpus,
)
from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder
from ptm_knowledge.family_ernie import ErnieBaiduSettings, ErnieThuSettings
from ptm_knowledge.kg import load_entity_embeddings, load_knowledge_graph, train_kg_embeddings
from ptm_knowledge.kg_corpus_settings import KGCorpusData

logger = logging.getLogger(__name__)

#: ERNIE 1.0's shares of training for basic, phrase and entity masking when the objective
#: preset names none (``configs/objective/ernie_baidu.yaml`` sets them).
SCHEDULE_FRACTIONS = (1 / 3, 1 / 3, 1 / 3)


def _built(run: PretrainRun, path: str) -> Any:
    """The config node at ``path`` built, or ``None`` when absent (or outside a config)."""
    if run.build is None:
        return None
    value = run.build(path)
    return None if value == {} else value


def _model(run: PretrainRun) -> Callable[..., TransformerEncoder]:
    if run.model is None:
        raise ValueError("no model: set the model preset (model=bert_tiny)")
    return run.model


# ---------------------------------------------------------------------- ERNIE-Baidu


def plan_ernie_baidu(run: PretrainRun) -> PretrainingPlan:
    """ERNIE 1.0 (Sun et al., 2019): MLM with staged knowledge masking.

    The linked corpus (``data.linked_corpus``, or ``data.corpus`` linked to ``data.kg``
    now, or ``data.prepared``) defines the entity units; the phrase units come from
    ``objective.phrases`` (a lexicon) or collocations learned from the corpus.
    ``objective.schedule_fractions`` are the shares of training for basic, phrase and
    entity masking; ``objective.objectives.mlm`` builds the masking objective.
    """
    settings: ErnieBaiduSettings = run.settings or ErnieBaiduSettings()
    data = settings.data
    fractions = tuple(float(f) for f in _built(run, "objective.schedule_fractions") or ())
    fractions = fractions or SCHEDULE_FRACTIONS
    if len(fractions) != 3:
        raise ValueError(
            f"objective.schedule_fractions needs 3 shares (basic, phrase, entity), got {fractions}"
        )
    phrases = _built(run, "objective.phrases")
    store, tok, _ = open_run_corpus(run, data, phrases=list(phrases) if phrases else None)
    store.bind_entities(None)
    text = _text_encoder(_model(run), tok.vocab_size, run.seed)
    make = run.objectives.get("mlm")
    mlm = (
        build_objective(KnowledgeMaskingObjective, text, tok.vocab_info, mask_prob=0.15)
        if make is None
        else build_objective(make, text, tok.vocab_info)
    )
    mix = ObjectiveMix({"mlm": mlm})
    examples = knowledge_rows(store, tok.vocab_info, data.max_length)
    trainer = run.trainer
    total = trainer.max_steps * trainer.gradient_accumulation_steps
    batches = StagedMaskingBatches(
        examples,
        data.batch_size,
        schedule=MaskingSchedule(total, fractions),
        pad_id=tok.vocab_info.pad_id,
        transform=mix.collate,
        seed=run.seed,
        num_workers=data.num_workers,
        pin_memory=torch.cuda.is_available(),
    )
    logger.info(
        "ERNIE-Baidu: %d documents, %d tokens -> %d rows",
        store.num_documents,
        store.num_tokens,
        len(examples),
    )
    return PretrainingPlan(
        network=text,
        objectives=mix,
        data=batches,
        save_final=lambda final: text.save_pretrained(final, extra_writers=[tok.save]),
        finish=lambda trained: _finish(trained, run.output_dir, len(examples)),
    )


# ---------------------------------------------------------------------- ERNIE-THU


def _linked_against(store: KnowledgeStore, source: Any, entity_ids: Sequence[str], kg: Any) -> None:
    """Fail before embedding the KG if none of the corpus's mentions is an entity of ``kg``
    (it was linked against another KG: TransE on a large KG takes an hour, and the run
    would then train dEA on nothing). Only the per-shard entity tables are read."""
    known = set(entity_ids)
    mentions = hits = 0
    for table in store.entity_tables():
        for entity, count in zip(table["ids"], table["counts"], strict=True):
            mentions += count
            hits += count if entity in known else 0
    if mentions and not hits:
        raise ValueError(
            f"0 of {mentions:,} linked mentions of {source} are entities of data.kg={kg}: the "
            "linked corpus was linked against another KG; set data.kg to that KG, or link "
            f"the corpus again with ptm link --kg {kg}"
        )


def _entity_table(
    run: PretrainRun, settings: ErnieThuSettings, store: KnowledgeStore, linked: Path | None
) -> tuple[list[str], torch.Tensor, str, Container[str] | None]:
    """The KG embeddings (made earlier, or trained here and saved to
    ``<output_dir>/kg_embeddings``), where they came from, and the KG's entity ids (every
    mention must name one; ``None`` for embeddings made earlier)."""
    data, knowledge = settings.data, settings.knowledge
    if knowledge.embeddings_dir:  # e.g. from ptm embed-kg
        entity_ids, vectors = load_entity_embeddings(knowledge.embeddings_dir)
        return entity_ids, vectors, str(knowledge.embeddings_dir), None
    if not data.kg:
        raise ValueError(
            "data.kg is null: name the KG folder to embed (or knowledge.embeddings_dir)"
        )
    kg = load_knowledge_graph(data.kg)
    if data.linked_corpus or data.prepared:
        _linked_against(
            store, linked if linked is not None else data.prepared, kg.entity_ids, data.kg
        )
    trained = train_kg_embeddings(kg, seed=run.seed, **dataclasses.asdict(knowledge.kg_embeddings))
    output_dir = run.output_dir
    trained.save(output_dir / "kg_embeddings")
    # Named in the error when a given linked corpus was linked against another KG.
    source = f"{output_dir / 'kg_embeddings'}, trained here on data.kg={data.kg}"
    return trained.entity_ids, trained.embeddings, source, set(kg.entity_ids)


def _folder_tokenizer(init_from: str | None, data: KGCorpusData) -> Path | None:
    """An ``init_from`` folder's own tokenizer (its token table is indexed by those ids),
    which replaces ``data.tokenizer``; ``None`` without one."""
    if not init_from:
        return None
    from ptm_core.checkpoints.hf.tokenizer_files import find_tokenizer_directory

    own = find_tokenizer_directory(init_from)
    if own is not None and data.tokenizer:
        logger.info(
            "knowledge.init_from=%s has its own tokenizer; it replaces data.tokenizer=%s",
            init_from,
            data.tokenizer,
        )
    return own


def _donated(network: KnowledgeableEncoder) -> list[str]:
    """The aggregators' token-stream tensors, copied from the text encoder's last layers."""
    parts = (
        "token_attention.",
        "token_attention_norm.",
        "fuse_token.",
        "token_out.",
        "token_output_norm.",
    )
    return [
        name
        for name in network.state_dict()
        if name.startswith("knowledge_layers.") and name.split(".", 2)[2].startswith(parts)
    ]


def plan_ernie_thu(run: PretrainRun) -> PretrainingPlan:
    """ERNIE (Zhang et al., 2019): KG embeddings, then MLM + NSP + dEA on a linked corpus.

    The text encoder (``model``, or ``knowledge.init_from``: any checkpoint
    ``TransformerEncoder.from_pretrained`` reads, e.g. a Hugging Face BERT or RoBERTa,
    whose own tokenizer then prepares the corpus; the log says which tensors came from
    it and which start fresh) is split by
    :meth:`KnowledgeableEncoder.from_text_encoder`: its last
    ``knowledge.num_knowledge_layers`` layers become the aggregators' token streams.
    ``objective.objectives`` take the text encoder (rows are NSP segment pairs when one is
    NSP); ``objective.entity_objectives`` (default dEA) need the knowledgeable encoder.

    Raises:
        ValueError: the linked corpus was linked against another KG, or no linked mention
            reaches a training row (see :func:`check_mention_coverage`).
        LinkedCorpusError: a mention of an entity outside ``data.kg`` (``file:line``).
    """
    settings: ErnieThuSettings = run.settings or ErnieThuSettings()
    data, knowledge = settings.data, settings.knowledge
    store, tok, linked = open_run_corpus(run, data, _folder_tokenizer(knowledge.init_from, data))
    factories: dict[str, Callable[..., Any]] = dict(
        run.objectives or {"mlm": MaskedLMObjective, "nsp": NextSentenceObjective}
    )
    text = None
    if knowledge.init_from:  # checked before the KG is embedded (minutes on a large KG)
        text = _text_encoder(knowledge.init_from, tok.vocab_size, run.seed)
        check_folder_vocabulary(knowledge.init_from, text.config.vocab_size, tok.vocab_size)
        check_segment_objectives(
            f"knowledge.init_from={knowledge.init_from}", text.config.type_vocab_size, factories
        )
    linked_elsewhere = bool(data.linked_corpus or data.prepared)
    entity_ids, vectors, entity_source, known = _entity_table(run, settings, store, linked)
    index = {entity_id: i for i, entity_id in enumerate(entity_ids)}
    store.bind_entities(index, known=known)
    if text is None:
        text = _text_encoder(_model(run), tok.vocab_size, run.seed)
    network = KnowledgeableEncoder.from_text_encoder(
        text,
        vectors,
        knowledge.num_knowledge_layers,
        entity_heads=knowledge.entity_heads,
        entity_size=knowledge.entity_size,
        entity_bias_everywhere=knowledge.entity_bias_everywhere,
    )
    if knowledge.init_from:
        loaded: list[torch.nn.Module | str] = [text, *_donated(network)]
        report_init(network, knowledge.init_from, loaded, what="knowledge.init_from")
    vocab = tok.vocab_info
    factories.update(
        _built(run, "objective.entity_objectives") or {"dea": DenoisingEntityAutoencoderObjective}
    )
    built = {n: build_objective(f, network, vocab) for n, f in factories.items()}
    weights = {**run.weights, **(_built(run, "objective.entity_weights") or {})}
    mix = ObjectiveMix(built, weights or None)
    nsp = next((o for o in built.values() if isinstance(o, NextSentenceObjective)), None)
    rows = knowledge_rows(
        store,
        vocab,
        data.max_length,
        segment_pairs=nsp is not None,
        seed=run.seed,
        random_next_prob=nsp.random_next_prob if nsp is not None else 0.5,
        short_seq_prob=nsp.short_seq_prob if nsp is not None else 0.1,
    )
    coverage = knowledge_coverage(store, index, rows)
    check_mention_coverage(coverage, entity_source=entity_source, max_length=data.max_length)
    examples: Sequence[dict[str, Any]] = rows
    if any(type(o).prepare_example is not Objective.prepare_example for _, o in mix):
        from ptm_core.data.row_views import StaticDataSide

        examples = StaticDataSide(rows, mix.prepare_example, run.seed)
    batches = PretrainingBatches(
        examples,
        data.batch_size,
        pad_id=vocab.pad_id,
        transform=mix.collate,
        seed=run.seed,
        num_workers=data.num_workers,
        pin_memory=torch.cuda.is_available(),
    )
    return PretrainingPlan(
        network=network,
        objectives=mix,
        data=batches,
        save_final=lambda final: network.save_pretrained(
            final,
            entity_ids=entity_ids,
            kg=data.kg,  # recorded in knowledge_config.json for fine-tuning
            # fine-tuning links task text as the corpus was linked (None: linked elsewhere)
            linker=None if linked_elsewhere else dataclasses.asdict(data.linker),
            extra_writers=[tok.save, lambda path: save_heads(mix, network, path)],
        ),
        finish=lambda trained: _finish(trained, run.output_dir, len(rows)),
    )
