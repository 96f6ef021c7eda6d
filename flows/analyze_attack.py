"""``ptm analyze MODEL attack``: a word-substitution attack on a fine-tuned classifier.

:func:`attack` does the work in this process (:mod:`ptm_core.analysis.attack`) and writes
``attack.json``, ``attack.md`` and ``attack.png`` into one output folder; the ``analyze``
flow runs it under Prefect and publishes the report as a markdown artifact.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flows.analyze_attack_report import CHART, attack_markdown, marked, plot_budgets

logger = logging.getLogger(__name__)

#: What ``ptm analyze`` writes (recorded in the output folder's marker).
KIND = "analysis"


def _sources(
    embeddings: str | Path | None,
    mlm: str | Path | None,
    k: int,
    min_similarity: float,
    mlm_filter: bool,
) -> list[tuple[Any, str]]:
    from ptm_core.analysis import load_masked_language_model
    from ptm_core.analysis.attack_candidates import EmbeddingCandidates, MaskedLMCandidates

    sources: list[tuple[Any, str]] = []
    table = None
    if embeddings is not None:
        table = EmbeddingCandidates(embeddings, k=k, min_similarity=min_similarity)
        sources.append(
            (
                table,
                f"the {k} nearest neighbours with cosine >= {min_similarity:g} in the "
                f"{table.table.method} vector table `{embeddings}` ({len(table.table)} words)",
            )
        )
    if mlm is not None:
        masked = load_masked_language_model(mlm)
        sources.append(
            (
                MaskedLMCandidates(masked, k=k),
                f"the word masked in its sentence and the {k} most probable whole words of "
                f"the masked-LM head of `{mlm}`",
            )
        )
        if mlm_filter and table is not None:
            sources.append(
                (
                    MaskedLMCandidates(masked, k=k, similar_in=table),
                    f"the same MLM predictions, kept when their cosine to the word in "
                    f"`{embeddings}` is at least {min_similarity:g}",
                )
            )
    return sources


def attack(
    model: str | Path,
    data: str | Path,
    output: str | Path,
    *,
    embeddings: str | Path | None = None,
    mlm: str | Path | None = None,
    mlm_filter: bool = False,
    max_perturbed: float = 0.2,
    budgets: Sequence[float] = (),
    max_words: int | None = None,
    candidates: int = 50,
    min_similarity: float = 0.5,
    max_examples: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    shown: int = 10,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Attack ``model`` on the labelled examples of ``data`` and write the report.

    Args:
        model: ``ptm finetune``'s ``final/`` of a classification task, or a Hugging Face
            ``...ForSequenceClassification`` folder.
        data: a labelled file in the task's format (GLUE-style TSV, CSV, JSONL, ...).
        output: the folder to write (``overwrite`` replaces an earlier analysis only).
        embeddings: a word-vector table folder: candidates are nearest neighbours.
        mlm: a folder with a masked-LM head (a pre-training ``final/``, an HF
            ``...ForMaskedLM``): candidates are its predictions at the masked word. Give
            one of ``embeddings`` and ``mlm`` or both (each is reported).
        mlm_filter: also attack with the MLM's predictions that are at least
            ``min_similarity`` close to the word in the ``embeddings`` table.
        max_perturbed: the budget: the share of each text's words that may change.
        budgets: more budgets to report (the accuracy-under-attack curve).
        max_words: also at most this many words per text.
        candidates: substitutes tried per word (``k``).
        min_similarity: lowest cosine similarity of an embedding neighbour.
        max_examples: a seeded sample of this many examples (default all).
        seed: the sample's seed.
        batch_size: texts per forward pass of the classifier.
        shown: successful attacks shown per source in the report.
        overwrite: replace an earlier ``ptm analyze`` output at ``output``.

    Returns:
        ``{"sources": {name: {budget: summary}}, "output": ..., "markdown": ...}``.
    """
    from ptm_core.analysis.attack import run_attack, word_limit
    from ptm_core.analysis.attack_classifier import load_sequence_classifier
    from ptm_core.atomic import atomic_directory, check_output_directory

    if embeddings is None and mlm is None:
        raise ValueError(
            "the attack needs its candidate words: give --embeddings TABLE (a word2vec/GloVe "
            "table folder, e.g. `ptm pretrain experiment=word2vec_tiny`'s final/) or --mlm "
            "FOLDER (a model with a masked-LM head), or both"
        )
    if mlm_filter and (embeddings is None or mlm is None):
        raise ValueError(
            "--mlm-filter keeps the MLM's words near the word in a table: give "
            "both --mlm FOLDER and --embeddings TABLE"
        )
    out = Path(output)
    check_output_directory(out, kind=KIND, overwrite=overwrite, option="--overwrite")
    every = sorted({float(max_perturbed), *map(float, budgets)})
    for share in every:
        word_limit(share, 1)  # one line for a budget outside [0, 1]
    if max_words is not None and max_words < 0:
        raise ValueError(f"--max-words is {max_words}; give 0 or more")
    if max_examples is not None and max_examples < 1:
        raise ValueError(f"--max-examples is {max_examples}; give 1 or more")
    sources = _sources(embeddings, mlm, candidates, min_similarity, mlm_filter)
    classifier = load_sequence_classifier(model, batch_size=batch_size)
    examples = classifier.read(data)
    if max_examples is not None and max_examples < len(examples):
        chosen = sorted(random.Random(seed).sample(range(len(examples)), max_examples))
        examples = [examples[i] for i in chosen]
    record: dict[str, Any] = {
        "model": str(model),
        "data": str(data),
        "examples": len(examples),
        "labels": classifier.label_names,
        "settings": {
            "max_perturbed": float(max_perturbed),
            "budgets": every,
            "max_words": max_words,
            "candidates": candidates,
            "min_similarity": min_similarity,
            "mlm_filter": mlm_filter,
            "max_examples": max_examples,
            "seed": seed,
        },
        "sources": {},
    }
    for source, description in sources:
        logger.info("attack with %s candidates on %d examples", source.name, len(examples))
        traces, summaries = run_attack(classifier, source, examples, every, max_words=max_words)
        rows = []
        for trace in traces:
            outcome = trace.at(word_limit(float(max_perturbed), len(trace.spans), max_words))
            rows.append(
                {
                    "line": trace.example.line,
                    "id": trace.example.id,
                    "label": classifier.label_names[trace.label],
                    "original": trace.attacked_text,
                    **outcome,
                    "prediction": classifier.label_names[outcome["prediction"]],
                    "marked": marked(trace.attacked_text, outcome["changed"], trace.spans),
                    "words": len(trace.spans),
                }
            )
        record["sources"][source.name] = {
            "description": description,
            "budgets": {f"{share:g}": summaries[share] for share in every},
            "examples": rows,
        }
    markdown = attack_markdown(record, shown=shown)
    with atomic_directory(
        out, kind=KIND, overwrite=overwrite, option="--overwrite", legacy=False
    ) as tmp:
        (tmp / "attack.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        plot_budgets(record, tmp / CHART)
        (tmp / "attack.md").write_text(markdown, encoding="utf-8")
    return {
        "sources": {name: s["budgets"] for name, s in record["sources"].items()},
        "output": str(out),
        "markdown": markdown,
    }
