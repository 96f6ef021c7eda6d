"""WKLM pre-training: rows of the prepared linked corpus with entities replaced, trained on
replacement detection + 5% MLM by the one pre-training runner (:func:`plan_wklm` is the
family's ``plan_pretraining`` hook).

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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ptm_core.data import PretrainingBatches
from ptm_core.data.batches import pad_examples
from ptm_core.data.layouts import LazyRows
from ptm_core.data.shuffle import EpochOrder
from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.families.runner import PretrainingPlan, PretrainRun
from ptm_core.objectives import ObjectiveMix
from ptm_core.objectives.base import Batch
from ptm_core.objectives.inputs import build_objective
from ptm_core.pretraining import PretrainResult, save_heads
from ptm_core.seeding import derive_seed, generator_for
from ptm_core.training.run import TrainingRun
from ptm_knowledge.ernie.knowledge_store import KnowledgeRows
from ptm_knowledge.ernie.pretraining import knowledge_rows, open_linked_corpus
from ptm_knowledge.kg import load_knowledge_graph
from ptm_knowledge.linking.corpus import linked_corpus_for
from ptm_knowledge.wklm.detection import EntityReplacementObjective, OutsideMentionsMLMObjective
from ptm_knowledge.wklm.replacement import (
    ReplacedRow,
    ReplacementStats,
    SurfaceForms,
    replace_mentions,
    row_mentions,
)
from ptm_knowledge.wklm.type_index import EntityTypeIndex

if TYPE_CHECKING:
    from ptm_knowledge.family_wklm import WKLMSettings

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


def plan_wklm(run: PretrainRun) -> PretrainingPlan:
    """WKLM (Xiong et al., 2020) pre-training: entity replacement detection + 5% MLM.

    The corpus is linked to ``data.kg`` first unless ``data.linked_corpus`` or
    ``data.prepared`` is given; the linked corpus is prepared once into memory-mapped shards
    (cached, shared with ERNIE). The encoder is ``init_from``'s when given, else the
    ``model`` builder's; the objectives are ``objective.objectives`` (default ``mlm``:
    :class:`OutsideMentionsMLMObjective` at 5%, ``detection``:
    :class:`EntityReplacementObjective`). Metrics ``mlm/loss``, ``detection/loss``,
    ``detection/accuracy`` are logged.

    Args:
        run: the runner's run; ``run.settings`` is a
            :class:`~ptm_knowledge.family_wklm.WKLMSettings`.

    Returns:
        The plan; its ``finish`` returns a :class:`ptm_core.pretraining.PretrainResult`.

    Raises:
        LinkedCorpusError: a mention of an entity missing from the KG (``file:line``).
        KGError: ``wklm.untyped=error`` and an entity without a type (``entities.tsv:line``).
        ValueError: no mention reaches a training row.
    """
    settings: WKLMSettings = run.settings
    data, options = settings.data, settings.wklm
    if options.untyped not in ("keep", "error"):
        raise ValueError(f"wklm.untyped must be 'keep' or 'error', got {options.untyped!r}")
    output_dir = run.output_dir
    output_dir.mkdir(parents=True, exist_ok=True)
    kg_source = data.require_kg()
    kg = load_knowledge_graph(kg_source)
    store, tok = open_linked_corpus(
        None if data.prepared else linked_corpus_for(data, output_dir),
        data.prepared,
        output_dir=output_dir,
        tokenizer=data.tokenizer,
        vocab_size=data.vocab_size,
        lowercase=data.lowercase,
        cache_dir=data.cache_dir,
    )
    store.bind_entities(kg.index, known=kg.index)
    types = EntityTypeIndex.from_graph(kg, kg_source)
    if options.untyped == "error":
        types.require_types(kg.entity_ids)
    # Initial weights depend on the seed only, not on what ran before in this process.
    torch.manual_seed(derive_seed(run.seed, "init"))
    if run.init_from:
        text = TransformerEncoder.from_pretrained(run.init_from)
    elif run.model is not None:
        text = run.model(vocab_size=tok.vocab_size)
    else:
        raise ValueError("WKLM needs a model: an encoder builder (model=bert_tiny) or init_from")
    vocab = tok.vocab_info
    factories: dict[str, Callable[..., Any]] = dict(
        run.objectives
        or {"mlm": OutsideMentionsMLMObjective, "detection": EntityReplacementObjective}
    )
    built = {name: build_objective(factory, text, vocab) for name, factory in factories.items()}
    mix = ObjectiveMix(built, {k: float(v) for k, v in run.weights.items()} or None)
    base: KnowledgeRows = knowledge_rows(store, vocab, data.max_length, seed=run.seed)
    rows = EntityReplacementRows(
        base,
        types,
        SurfaceForms(kg.entities, tok, aliases=options.aliases),
        seed=run.seed,
        replace_prob=options.replace_prob,
        max_length=data.max_length,
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
    batches = (ReplacementBatches if options.dynamic else PretrainingBatches)(
        rows,
        data.batch_size,
        pad_id=vocab.pad_id,
        transform=mix.collate,
        seed=run.seed,
        num_workers=data.num_workers,
        pin_memory=torch.cuda.is_available(),
    )

    def finish(trained: TrainingRun) -> PretrainResult:
        return PretrainResult.of_run(trained, output_dir, len(rows))

    return PretrainingPlan(
        network=text,
        objectives=mix,
        data=batches,
        save_final=lambda final: text.save_pretrained(
            final, extra_writers=[tok.save, lambda path: save_heads(mix, text, path)]
        ),
        finish=finish,
    )
