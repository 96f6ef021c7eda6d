"""``ptm analyze``: probes of what a trained model holds (LAMA knowledge probes).

:func:`lama` does the work in this process and writes ``lama.json``, ``lama.md`` and
``lama_relations.png`` into one output folder; the ``analyze`` flow runs it under Prefect
and publishes the report as a markdown artifact.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from flows.analyze_report import lama_markdown, plot_relations

logger = logging.getLogger(__name__)

#: What ``ptm analyze`` writes (recorded in the output folder's marker).
KIND = "analysis"


def _seen_triples(path: str | Path, kg: Any) -> set[tuple[str, str, str]]:
    from ptm_knowledge.kg.graph import read_triples

    return set(read_triples(path, kg.entity_ids).labeled())


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
            ERNIE-THU folder), instead of against ``compare``.

    Returns:
        ``{"summary": ..., "compare_summary": ..., "comparison": ..., "output": ...}``.
    """
    from ptm_core.atomic import atomic_directory, check_output_directory
    from ptm_knowledge.kg import load_knowledge_graph
    from ptm_knowledge.probing import build_statements, compare_lama, load_templates, score_lama
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
    runs = [(model, knowledge)]
    if compare is not None:
        runs.append((compare, knowledge))
    elif ablate_knowledge:
        runs = [(model, True), (model, False)]
    results = []
    for folder, with_knowledge in runs:
        scorer = load_probe_model(folder, knowledge=with_knowledge)
        if ablate_knowledge and with_knowledge and scorer.entity_index is None:
            raise ValueError(
                f"{folder}: --ablate-knowledge needs a model that reads entities (ERNIE-THU); "
                "this folder is text-only"
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
        result = score_lama(scorer, statements, batch_size=batch_size)
        if not with_knowledge and ablate_knowledge:
            result.model = f"{folder} (no entity inputs)"
        results.append(result)
    summaries = [r.summary() for r in results]
    comparison = compare_lama(results[0], results[1], seed=seed) if len(results) == 2 else None
    markdown = lama_markdown(results, summaries, comparison, kg=str(kg))
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
            }
            for s, rank, top in zip(
                results[0].statements, results[0].ranks, results[0].top, strict=True
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
