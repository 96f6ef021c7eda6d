"""WKLM pre-training: rows of the prepared linked corpus with entities replaced, trained on
replacement detection + 5% MLM with the core Trainer.

The linked corpus is prepared once into memory-mapped shards and cached, exactly as for
ERNIE (:func:`~ptm_knowledge.ernie.open_linked_corpus`); rows are planned once and built
per index, and each row's replacements are drawn when it is built, with a generator
seeded by ``(seed, "wklm", epoch, row)`` (dynamic: new replacements every epoch, as
RoBERTa's masks) or ``(seed, "wklm", row)`` (static: the same in every epoch). Either way
a batch depends only on its position, so workers and resumes see the same batches, and
nothing per row is held in memory.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ptm_core.data import PretrainingBatches
from ptm_core.data.batches import pad_examples
from ptm_core.data.layouts import LazyRows
from ptm_core.data.shuffle import EpochOrder
from ptm_core.models import PretrainingModel
from ptm_core.objectives import ObjectiveMix
from ptm_core.objectives.base import Batch
from ptm_core.objectives.inputs import build_objective
from ptm_core.pretraining import PretrainResult, save_heads
from ptm_core.seeding import derive_seed, generator_for
from ptm_core.training import TrainerConfig
from ptm_core.training.run import train_and_save
from ptm_knowledge.ernie.knowledge_store import KnowledgeRows
from ptm_knowledge.ernie.pretraining import (
    EncoderSource,
    LinkedSource,
    _finish,
    _text_encoder,
    knowledge_rows,
    open_linked_corpus,
)
from ptm_knowledge.kg.graph import KnowledgeGraph
from ptm_knowledge.wklm.detection import EntityReplacementObjective, OutsideMentionsMLMObjective
from ptm_knowledge.wklm.replacement import (
    ReplacedRow,
    ReplacementStats,
    SurfaceForms,
    replace_mentions,
    row_mentions,
)
from ptm_knowledge.wklm.type_index import EntityTypeIndex

logger = logging.getLogger(__name__)


class EntityReplacementRows(LazyRows):
    """ERNIE rows (entities bound to KG indices) with WKLM's replacement applied per index.

    Args:
        rows: :class:`~ptm_knowledge.ernie.KnowledgeRows` whose ``entity_ids`` are KG
            entity indices (``store.bind_entities(kg.index)``).
        types: the KG's entities grouped by type.
        surfaces: entity names as word pieces.
        seed: base seed (row ``i`` uses ``(seed, "wklm", i)``).
        replace_prob: probability that an eligible mention is replaced.
        max_length: row length after replacement (longer rows are cut).
    """

    def __init__(
        self,
        rows: Sequence[dict[str, Any]],
        types: EntityTypeIndex,
        surfaces: SurfaceForms,
        *,
        seed: int = 0,
        replace_prob: float = 0.5,
        max_length: int | None = None,
    ) -> None:
        if not 0.0 <= replace_prob <= 1.0:
            raise ValueError(f"replace_prob must be in [0, 1], got {replace_prob}")
        self.rows = rows
        self.types = types
        self.surfaces = surfaces
        self.seed = seed
        self.replace_prob = replace_prob
        self.max_length = max_length

    def __len__(self) -> int:
        return len(self.rows)

    def lengths(self) -> np.ndarray:
        """Row lengths before replacement (from the plan)."""
        return np.asarray(self.rows.lengths(), dtype=np.int64)  # type: ignore[attr-defined]

    def replaced(self, index: int, epoch: int | None = None) -> ReplacedRow:
        """Row ``index`` after replacement, with spans, entities and counts.

        Args:
            index: the row.
            epoch: draw this epoch's replacements (``None``: the static ones).
        """
        row = self.rows[index]
        parts = (self.seed, "wklm", index) if epoch is None else (self.seed, "wklm", epoch, index)
        rng = np.random.default_rng(derive_seed(*parts))
        return replace_mentions(
            row,
            row_mentions(row["entity_units"], row["entity_ids"]),
            self.types,
            self.surfaces,
            rng,
            replace_prob=self.replace_prob,
            max_length=self.max_length,
        )

    def _build(self, index: int) -> dict[str, Any]:
        return self.replaced(index).example()

    def stats(self, limit: int | None = None) -> ReplacementStats:
        """Counts over the first ``limit`` rows (all by default)."""
        total = ReplacementStats()
        for index in range(len(self) if limit is None else min(limit, len(self))):
            total = total + self.replaced(index).stats
        return total


class ReplacementBatches(PretrainingBatches):
    """:class:`~ptm_core.data.PretrainingBatches` whose rows draw new replacements every
    epoch (``(seed, "wklm", epoch, row)``); batch ``i`` of epoch ``e`` still depends only
    on ``(e, i)``.

    Args:
        examples: the rows.
        batch_size, **kwargs: as :class:`~ptm_core.data.PretrainingBatches`.
    """

    def __init__(self, examples: EntityReplacementRows, batch_size: int, **kwargs: Any) -> None:
        super().__init__(examples, batch_size, **kwargs)
        self.rows = examples

    def batch(self, epoch: int, index: int, order: EpochOrder | None = None) -> Batch:
        chosen = self.indices(epoch, index, order)
        batch = pad_examples([self.rows.replaced(i, epoch).example() for i in chosen], self.pad_id)
        batch = self.annotate(batch, epoch, index)
        if self.transform is not None:
            batch = self.transform(batch, generator_for(self.seed, epoch, index, "collate"))
        return batch


def pretrain_wklm(
    linked_corpus: LinkedSource = None,
    *,
    kg: KnowledgeGraph,
    encoder: EncoderSource,
    trainer: TrainerConfig,
    prepared: str | Path | None = None,
    kg_source: str | Path | None = None,
    tokenizer: str | Path | None = None,
    vocab_size: int = 8000,
    lowercase: bool = True,
    max_length: int = 128,
    batch_size: int = 32,
    seed: int = 0,
    replace_prob: float = 0.5,
    dynamic: bool = False,
    aliases: bool = False,
    untyped: str = "keep",
    objectives: Mapping[str, Callable[..., Any]] | None = None,
    weights: Mapping[str, float] | None = None,
    known_entities: Container[str] | None = None,
    callbacks: Sequence[object] = (),
    num_workers: int = 0,
    cache_dir: str | Path | None = None,
) -> PretrainResult:
    """WKLM (Xiong et al., 2020) pre-training: entity replacement detection + 5% MLM.

    Args:
        linked_corpus: a linked corpus ``.jsonl`` or its documents (prepared once into
            ``cache_dir``, shared with the ERNIE recipes); or
        prepared: a folder written by :func:`~ptm_knowledge.ernie.prepare_linked_corpus`.
        kg: the KG the corpus was linked against (its ``type`` column groups entities).
        encoder: a built encoder, a factory called with ``vocab_size=``, or a checkpoint.
        trainer: trainer settings (``output_dir`` is the run directory).
        kg_source: the KG's ``entities.tsv`` (or folder), named in errors.
        tokenizer, vocab_size, lowercase, max_length, batch_size, seed: as
            :func:`~ptm_knowledge.ernie.pretrain_ernie_thu`.
        replace_prob: probability that an eligible mention is replaced (paper: 0.5).
        dynamic: new replacements every epoch (default: drawn once per row, static).
        aliases: replacement surface drawn among name and aliases (default: the name).
        untyped: ``"keep"``: mentions of untyped entities stay, unlabelled as replaced;
            ``"error"``: an untyped entity is an error naming ``entities.tsv:line``.
        objectives: name -> factory (``build_objective``) (default ``mlm``:
            :class:`OutsideMentionsMLMObjective` at 5%, ``detection``:
            :class:`EntityReplacementObjective`).
        weights: name -> loss weight (default 1 each).
        known_entities: valid entity ids (default: the KG's); a mention of another id
            is an error naming the linked corpus file and line.
        callbacks, num_workers, cache_dir: as :func:`~ptm_knowledge.ernie.pretrain_ernie_thu`.

    Returns:
        :class:`ptm_core.pretraining.PretrainResult`; metrics ``mlm/loss``,
        ``detection/loss``, ``detection/accuracy`` are logged.

    Raises:
        LinkedCorpusError: a mention of an entity missing from the KG (``file:line``).
        KGError: ``untyped="error"`` and an entity without a type (``entities.tsv:line``).
        ValueError: no mention reaches a training row.
    """
    if untyped not in ("keep", "error"):
        raise ValueError(f"untyped must be 'keep' or 'error', got {untyped!r}")
    output_dir = Path(trainer.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    store, tok = open_linked_corpus(
        linked_corpus,
        prepared,
        output_dir=output_dir,
        tokenizer=tokenizer,
        vocab_size=vocab_size,
        lowercase=lowercase,
        cache_dir=cache_dir,
    )
    store.bind_entities(kg.index, known=known_entities if known_entities is not None else kg.index)
    types = EntityTypeIndex.from_graph(kg, kg_source)
    if untyped == "error":
        types.require_types(kg.entity_ids)
    text = _text_encoder(encoder, tok.vocab_size, seed)
    vocab = tok.vocab_info
    factories: dict[str, Callable[..., Any]] = dict(
        objectives or {"mlm": OutsideMentionsMLMObjective, "detection": EntityReplacementObjective}
    )
    built = {name: build_objective(factory, text, vocab) for name, factory in factories.items()}
    mix = ObjectiveMix(built, weights)
    base: KnowledgeRows = knowledge_rows(store, vocab, max_length, seed=seed)
    rows = EntityReplacementRows(
        base,
        types,
        SurfaceForms(kg.entities, tok, aliases=aliases),
        seed=seed,
        replace_prob=replace_prob,
        max_length=max_length,
    )
    sample = rows.stats(limit=256)
    if sample.mentions == 0 and len(rows):
        raise ValueError(
            f"WKLM would train on no entity: the first {min(256, len(rows))} rows hold no "
            "linked mention of the KG; link the corpus against this KG (ptm link --kg <kg>)"
        )
    logger.info(
        "WKLM: %d rows; first rows: %d mentions, %d eligible, %d replaced, %d blocked by a "
        "replaced neighbour, %d sole entity of their type, %d untyped",
        len(rows),
        sample.mentions,
        sample.eligible,
        sample.replaced,
        sample.blocked,
        sample.single,
        sample.untyped,
    )
    batches = (ReplacementBatches if dynamic else PretrainingBatches)(
        rows,
        batch_size,
        pad_id=vocab.pad_id,
        transform=mix.collate,
        seed=seed,
        num_workers=num_workers,
        pin_memory=torch.cuda.is_available(),
    )
    run = train_and_save(
        PretrainingModel(text, mix),
        batches,
        trainer,
        callbacks=callbacks,
        save_final=lambda final: text.save_pretrained(
            final, extra_writers=[tok.save, lambda path: save_heads(mix, text, path)]
        ),
    )
    return _finish(run, output_dir, len(rows))
