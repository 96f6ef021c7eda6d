"""KnowBERT's pre-training plan: typed settings in, a :class:`PretrainingPlan` out.

Stage 1 (``knowbert.stage=linker``) trains the entity linkers alone, the encoder frozen,
on the linking loss; stage 2 (``stage=full``) trains everything on MLM + NSP + the linking
loss through the objective mix (Peters et al., 2019, section 3.4). Both read a linked
corpus (the ERNIE families' prepared shards, :func:`~ptm_knowledge.ernie.pretraining.open_linked_corpus`):
its mentions are the gold entities of the KG ``data.kg``; every KG's candidate mentions
come from its alias table (:class:`~ptm_knowledge.knowbert.candidates.AliasCandidates`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from ptm_core.data import PretrainingBatches
from ptm_core.families.runner import PretrainingPlan, PretrainRun
from ptm_core.objectives import MaskedLMObjective, NextSentenceObjective, ObjectiveMix
from ptm_core.objectives.base import Objective
from ptm_core.objectives.inputs import build_objective
from ptm_core.pretraining import save_heads
from ptm_knowledge.ernie.pretraining import (
    _finish,
    _text_encoder,
    knowledge_rows,
    open_run_corpus,
)
from ptm_knowledge.family_knowbert import STAGES, KarOptions, KnowBertSettings
from ptm_knowledge.kg import load_entity_embeddings, load_knowledge_graph, train_kg_embeddings
from ptm_knowledge.kg.graph import KnowledgeGraph
from ptm_knowledge.knowbert.candidates import AliasCandidates, CandidateTransform
from ptm_knowledge.knowbert.kar import FIRST_ENTITY_ROW, KnowledgeAttentionRecontextualization
from ptm_knowledge.knowbert.linking_objective import EntityLinkingObjective
from ptm_knowledge.knowbert.model import KarSpec, KnowBertEncoder, recognizes

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class KnowledgeBase:
    """One KG as KnowBERT reads it: the graph, its entity table and where it came from."""

    name: str
    kg: KnowledgeGraph
    kg_path: str
    entity_ids: list[str]
    table: torch.Tensor  # (N + 2, E): rows 0/1 padding/null, then the entities
    source: str

    @property
    def rows(self) -> dict[str, int]:
        """Entity id -> table row."""
        return {entity: FIRST_ENTITY_ROW + i for i, entity in enumerate(self.entity_ids)}


def entity_table(vectors: torch.Tensor) -> torch.Tensor:
    """``(N, E)`` KG embeddings -> the KAR's ``(N + 2, E)`` table (zero padding/null rows)."""
    return torch.cat([vectors.new_zeros(FIRST_ENTITY_ROW, vectors.shape[1]), vectors.float()])


def knowledge_base(
    name: str, options: KarOptions, default_kg: str | None, output_dir: Path, seed: int
) -> KnowledgeBase:
    """Load KG ``name`` and its entity embeddings (made earlier, or trained now with PyKEEN
    and saved to ``<output_dir>/kg_embeddings_<name>``)."""
    path = options.kg or default_kg
    if not path:
        raise ValueError(
            f"knowbert.kgs.{name}.kg is null and data.kg is not set: give the KG folder "
            "(entities.tsv with aliases + triples.tsv)"
        )
    kg = load_knowledge_graph(path)
    if options.embeddings_dir:
        ids, vectors = load_entity_embeddings(options.embeddings_dir)
        source = str(options.embeddings_dir)
    else:
        trained = train_kg_embeddings(kg, seed=seed, **dataclasses.asdict(options.kg_embeddings))
        trained.save(output_dir / f"kg_embeddings_{name}")
        ids, vectors, source = (
            list(trained.entity_ids),
            trained.embeddings,
            f"{output_dir / f'kg_embeddings_{name}'} (trained here on {path})",
        )
    logger.info("KnowBERT KG %s: %s, %d entity embeddings from %s", name, path, len(ids), source)
    return KnowledgeBase(name, kg, str(path), list(ids), entity_table(vectors), source)


def check_stage(stage: str) -> None:
    if stage not in STAGES:
        raise ValueError(f"knowbert.stage={stage!r}; valid: {', '.join(STAGES)}")


def plan_knowbert(run: PretrainRun) -> PretrainingPlan:
    """KnowBERT pre-training (see the module docstring).

    ``knowbert.init_from``: a KnowBERT ``final/`` continues it (the linker stage's, for
    stage 2: its KARs, linkers and tokenizer are kept; ``knowbert.kgs`` must name the same
    KGs), a text checkpoint starts the text layers from it, ``None`` the ``model`` preset.

    Raises:
        ValueError: an unknown stage, a KG setting that does not fit, or a KnowBERT
            ``init_from`` whose KGs differ from ``knowbert.kgs``.
    """
    settings: KnowBertSettings = run.settings or KnowBertSettings()
    data, options = settings.data, settings.knowbert
    check_stage(options.stage)
    init_from = options.init_from or run.init_from
    continuing = bool(init_from) and recognizes(str(init_from))
    own_tokenizer = None
    if init_from:
        from ptm_core.checkpoints.hf.tokenizer_files import find_tokenizer_directory

        own_tokenizer = find_tokenizer_directory(init_from)
    output_dir = run.output_dir
    store, tok, _ = open_run_corpus(run, data, own_tokenizer)
    if continuing:
        network = KnowBertEncoder.from_pretrained(str(init_from))
        if set(network.kg_names) != set(options.kgs):
            raise ValueError(
                f"knowbert.init_from={init_from} has KARs for {sorted(network.kg_names)}, but "
                f"knowbert.kgs names {sorted(options.kgs)}; name the same KGs"
            )
        bases = {
            name: _base_of_folder(name, network, options.kgs[name], data.kg)
            for name in network.kg_names
        }
        print(f"KnowBERT: continuing {init_from} (stage {options.stage})")
    else:
        source: Any = init_from or run.model
        if source is None:
            raise ValueError(
                "no model: set the model preset (model=bert_tiny) or knowbert.init_from"
            )
        text = _text_encoder(source, tok.vocab_size, run.seed)
        bases = {
            name: knowledge_base(name, kar, data.kg, output_dir, run.seed)
            for name, kar in options.kgs.items()
        }
        specs = {
            name: KarSpec(
                layer=kar.layer,
                num_heads=kar.num_heads,
                intermediate_size=kar.intermediate_size,
                scorer_hidden=kar.scorer_hidden,
                threshold=kar.threshold,
                span_encoder_layers=kar.span_encoder_layers,
                entity_ids=bases[name].entity_ids,
                kg=str(Path(bases[name].kg_path).resolve()),
            )
            for name, kar in options.kgs.items()
        }
        torch.manual_seed(run.seed)
        network = KnowBertEncoder(text, {n: b.table for n, b in bases.items()}, specs)
    names = network.kg_names
    gold = _gold_kg(names, bases, data.kg)
    store.bind_entities(bases[names[gold]].rows if gold is not None else None)
    objectives = _objectives(run, options.stage, network, options.linking_loss, tok.vocab_info)
    weights = {**run.weights, "linking": options.linking_weight}
    mix = ObjectiveMix(objectives, {n: weights.get(n, 1.0) for n in objectives})
    if options.stage == "linker":
        network.freeze_for_linking()
        trainable = sum(p.numel() for p in network.parameters() if p.requires_grad)
        print(f"KnowBERT stage 1 (linker): {trainable:,} linker parameters train, encoder frozen")
    generators = [
        AliasCandidates(
            bases[name].kg,
            tok,
            bases[name].rows,
            max_candidates=options.kgs[name].max_candidates,
            case=options.case,  # type: ignore[arg-type]
        )
        for name in names
    ]
    nsp = next((o for o in objectives.values() if isinstance(o, NextSentenceObjective)), None)
    rows = knowledge_rows(
        store,
        tok.vocab_info,
        data.max_length,
        segment_pairs=nsp is not None,
        seed=run.seed,
        random_next_prob=nsp.random_next_prob if nsp is not None else 0.5,
        short_seq_prob=nsp.short_seq_prob if nsp is not None else 0.1,
    )
    examples: Sequence[dict[str, Any]] = rows
    if any(type(o).prepare_example is not Objective.prepare_example for _, o in mix):
        from ptm_core.data.row_views import StaticDataSide

        examples = StaticDataSide(rows, mix.prepare_example, run.seed)
    transform = CandidateTransform(
        generators,
        max_spans=max(options.kgs[n].max_spans for n in names),
        gold_kg=gold,
        then=mix.collate,
    )
    _report_candidates(transform, examples, names, tok.vocab_info.pad_id, data.batch_size)
    batches = PretrainingBatches(
        examples,
        data.batch_size,
        pad_id=tok.vocab_info.pad_id,
        transform=transform,
        seed=run.seed,
        num_workers=data.num_workers,
        pin_memory=torch.cuda.is_available(),
    )
    return PretrainingPlan(
        network=network,
        objectives=mix,
        data=batches,
        save_final=lambda final: _save(network, final, tok, mix),
        finish=lambda trained: _finish(trained, output_dir, len(rows)),
    )


def _save(network: KnowBertEncoder, final: Path, tok: Any, mix: ObjectiveMix) -> None:
    network.unfreeze()  # a saved model loads trainable; the stage is the run's, not the model's
    network.save_pretrained(
        final, extra_writers=[tok.save, lambda path: save_heads(mix, network, path)]
    )


def _objectives(
    run: PretrainRun, stage: str, network: KnowBertEncoder, loss: str, vocab: Any
) -> dict[str, Objective]:
    linking = EntityLinkingObjective(network, loss=loss)
    if stage == "linker":
        return {"linking": linking}
    factories: dict[str, Callable[..., Any]] = dict(
        run.objectives or {"mlm": MaskedLMObjective, "nsp": NextSentenceObjective}
    )
    built = {n: build_objective(f, network, vocab) for n, f in factories.items()}
    return {**built, "linking": linking}


def _gold_kg(
    names: Sequence[str], bases: dict[str, KnowledgeBase], corpus_kg: str | None
) -> int | None:
    """The KG the linked corpus was linked against (its mentions are that KG's gold)."""
    if corpus_kg is None:
        return None
    target = Path(corpus_kg).resolve()
    for k, name in enumerate(names):
        if Path(bases[name].kg_path).resolve() == target:
            return k
    logger.warning("no KnowBERT KG is data.kg=%s: no KG has gold entities", corpus_kg)
    return None


def _base_of_folder(
    name: str, network: KnowBertEncoder, options: KarOptions, default_kg: str | None
) -> KnowledgeBase:
    spec = network.specs[name]
    path = options.kg or spec.kg or default_kg
    if not path:
        raise ValueError(f"knowbert.kgs.{name}.kg: the folder records no KG; give it")
    kar = network.kars[name]
    assert isinstance(kar, KnowledgeAttentionRecontextualization)
    table = kar.linker.entity_table
    return KnowledgeBase(
        name, load_knowledge_graph(path), str(path), list(spec.entity_ids), table, "init_from"
    )


def _report_candidates(
    transform: CandidateTransform,
    examples: Sequence[dict[str, Any]],
    names: Sequence[str],
    pad_id: int,
    batch_size: int,
) -> None:
    """Log the candidate mentions of the first batch, and refuse a corpus with none."""
    from ptm_core.data.batches import pad_examples

    first = pad_examples([examples[i] for i in range(min(batch_size, len(examples)))], pad_id)
    batch = transform.candidates(first)
    spans = (batch["candidate_spans"][..., 0] > -1).sum(dim=(0, 2)).tolist()
    supervised = int((batch["candidate_gold"] > 1).sum())
    print(
        "KnowBERT candidates in the first batch: "
        + ", ".join(f"{n}: {s} spans" for n, s in zip(names, spans, strict=True))
        + f"; {supervised} spans with a gold entity"
    )
    for name, count in zip(names, spans, strict=True):
        if not count and any(spans):
            print(
                f"warning: no alias of KnowBERT KG {name!r} occurs in the first batch: its "
                f"KAR sees no candidates there (check knowbert.kgs.{name}.kg against the corpus)"
            )
    if not any(spans):
        raise ValueError(
            "no alias of any KnowBERT KG matches the first batch's text: the KGs' aliases "
            f"({', '.join(names)}) do not occur in the corpus; check data.kg / knowbert.kgs"
        )


__all__ = ["KnowledgeBase", "entity_table", "knowledge_base", "plan_knowbert"]
