"""``ptm analyze``: probes of what a trained model holds (LAMA knowledge probes).

:func:`lama` does the work in this process and writes ``lama.json``, ``lama.md`` and
``lama_relations.png`` into one output folder; the ``analyze`` flow runs it under Prefect
and publishes the report as a markdown artifact.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flows.analyze_report import lama_markdown, plot_relations

if TYPE_CHECKING:
    from ptm_knowledge.probing import TreeInjection

logger = logging.getLogger(__name__)

#: What ``ptm analyze`` writes (recorded in the output folder's marker).
KIND = "analysis"


def _seen_triples(path: str | Path, kg: Any) -> set[tuple[str, str, str]]:
    from ptm_knowledge.kg.graph import read_triples

    return set(read_triples(path, kg.entity_ids).labeled())


def _injection(
    kg: str | Path, graph: Any, kbert_kg: str | Path | None, max_entities: int
) -> TreeInjection:
    """K-BERT's branches: from ``kbert_kg`` or else the probed KG itself."""
    from ptm_knowledge.kbert import knowledge_from_graph
    from ptm_knowledge.kg import load_knowledge_graph
    from ptm_knowledge.probing import TreeInjection

    if max_entities < 0:
        raise ValueError(f"--max-entities is {max_entities}; give 0 or more")
    source = graph if kbert_kg is None else load_knowledge_graph(kbert_kg)
    logger.info("K-BERT branches from %s", kbert_kg or kg)
    return TreeInjection(
        knowledge_from_graph(source), str(kbert_kg or kg), max_entities=max_entities
    )


def lama(
    model: str | Path,
    kg: str | Path,
    output: str | Path,
    *,
    templates: str | Path | None = None,
    relations: list[str] | None = None,
    max_per_relation: int | None = None,
    seed: int = 0,
    compare: str | Path | None = None,
    seen_triples: str | Path | None = None,
    batch_size: int = 64,
    holdout_kg: str | Path | None = None,
    knowledge: bool = True,
    ablate_knowledge: bool = False,
    kbert: bool = False,
    kbert_kg: str | Path | None = None,
    max_entities: int = 2,
    overwrite: bool = False,
) -> dict[str, Any]:
    """LAMA probe of ``model`` (and ``compare``, on the same facts) from ``kg``'s triples.

    Args:
        model: a folder with a masked-LM head (ptm pre-training ``final/`` or Hugging Face).
        kg: a KG folder (``entities.tsv`` + ``triples.tsv``).
        output: the folder to write (``--overwrite`` replaces an earlier analysis only).
        templates: a YAML file of ``relation: "[X] ... [Y] ."`` templates.
        relations: only these relations.
        max_per_relation: at most this many facts per relation (a seeded sample).
        seed: the sample's seed (and the bootstrap's).
        compare: a second model folder, scored on the same facts.
        seen_triples: a triples file (e.g. a KG-embedding ``train.tsv``); the report then
            splits the scores into facts seen in it and facts held out.
        batch_size: statements per forward pass.
        holdout_kg: also write the KG here with the probed facts held out of the
            KG-embedding training split (:func:`~ptm_knowledge.probing.holdout.write_probe_holdout`).
        knowledge: ``False`` probes ERNIE-THU folders without their entity inputs.
        ablate_knowledge: compare ``model`` against itself without entity inputs (an
            ERNIE-THU folder) or, with ``kbert``, without branches (injection off),
            instead of against ``compare``.
        kbert: read ``model`` as K-BERT: each statement goes through a sentence tree with
            branches from ``kbert_kg`` (default ``kg``), the probed triple left out
            (:mod:`ptm_knowledge.probing.sentence_trees`); ``compare`` is read plainly.
        kbert_kg: the KG whose triples become branches (default: ``kg``).
        max_entities: K-BERT's branches per subject.

    Returns:
        ``{"summary": ..., "compare_summary": ..., "comparison": ..., "output": ...}``.
    """
    from ptm_core.atomic import atomic_directory, check_output_directory
    from ptm_knowledge.kg import load_knowledge_graph
    from ptm_knowledge.probing import (
        build_statements,
        compare_lama,
        load_templates,
        score_lama,
        statement_trees,
    )
    from ptm_knowledge.probing.models import load_probe_model

    out = Path(output)
    check_output_directory(out, kind=KIND, overwrite=overwrite, option="--overwrite")
    if holdout_kg is not None:
        check_output_directory(holdout_kg, kind="kg", overwrite=False, option="--overwrite")
    table = load_templates(templates)
    graph = load_knowledge_graph(kg)
    seen = None if seen_triples is None else _seen_triples(seen_triples, graph)
    if ablate_knowledge and compare is not None:
        raise ValueError("give --compare MODEL2 or --ablate-knowledge, not both")
    injection = _injection(kg, graph, kbert_kg, max_entities) if kbert else None
    runs: list[tuple[str | Path, bool, Any]] = [(model, knowledge, injection)]
    if compare is not None:
        runs.append((compare, knowledge, None))
    elif ablate_knowledge and injection is not None:
        runs.append((model, knowledge, replace(injection, knowledge={}, source="none")))
    elif ablate_knowledge:
        runs = [(model, True, None), (model, False, None)]
    results = []
    for folder, with_knowledge, tree in runs:
        scorer = load_probe_model(folder, knowledge=with_knowledge and tree is None)
        if ablate_knowledge and tree is None and with_knowledge and scorer.entity_index is None:
            raise ValueError(
                f"{folder}: --ablate-knowledge needs a model that reads entities (ERNIE-THU) "
                "or --kbert (branches on, then off); this folder is text-only"
            )
        statements = build_statements(
            graph,
            scorer,
            table,
            relations=relations,
            max_per_relation=max_per_relation,
            seed=seed,
            seen=seen,
        )
        logger.info("%s: %d statements", folder, len(statements.statements))
        trees = None
        if tree is not None:
            trees = statement_trees(scorer, statements.statements, graph, tree)
            logger.info("%s: sentence trees %s", folder, trees.counts)
        result = score_lama(scorer, statements, batch_size=batch_size, trees=trees)
        if tree is not None:
            result.model = (
                f"{folder} (K-BERT, {'injection off' if not tree.enabled else 'branches'})"
            )
        elif not with_knowledge and ablate_knowledge:
            result.model = f"{folder} (no entity inputs)"
        results.append(result)
    summaries = [r.summary() for r in results]
    comparison = compare_lama(results[0], results[1], seed=seed) if len(results) == 2 else None
    markdown = lama_markdown(results, summaries, comparison, kg=str(kg))
    tree_branches: list[list[str] | None] = [None] * len(results[0].statements)
    if results[0].branches is not None:
        tree_branches = list(results[0].branches)
    record = {
        "kg": str(kg),
        "summary": summaries[0],
        "compare_summary": summaries[1] if comparison else None,
        "comparison": comparison,
        "statements": [
            {
                "relation": s.relation,
                "subject": s.subject_id,
                "object": s.object_id,
                "text": s.text,
                "answer": s.answer,
                "rank": int(rank),
                "top": top[:5],
                **({} if s.seen is None else {"seen": s.seen}),
                **({} if branches is None else {"branches": branches}),
            }
            for s, rank, top, branches in zip(
                results[0].statements,
                results[0].ranks,
                results[0].top,
                tree_branches,
                strict=True,
            )
        ],
    }
    if holdout_kg is not None:
        from ptm_knowledge.probing.holdout import write_probe_holdout

        record["holdout_kg"] = {
            "folder": str(holdout_kg),
            **write_probe_holdout(
                kg, graph, [s.key for s in results[0].statements], holdout_kg, seed=seed
            ),
        }
    with atomic_directory(
        out, kind=KIND, overwrite=overwrite, option="--overwrite", legacy=False
    ) as tmp:
        (tmp / "lama.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        plot_relations(summaries, comparison, tmp / "lama_relations.png")
        (tmp / "lama.md").write_text(markdown, encoding="utf-8")
    return {
        "summary": summaries[0],
        "compare_summary": record["compare_summary"],
        "comparison": comparison,
        "output": str(out),
        "markdown": markdown,
        "holdout_kg": record.get("holdout_kg"),
    }
