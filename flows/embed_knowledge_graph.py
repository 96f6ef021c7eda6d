"""The `embed_knowledge_graph` flow: triples -> PyKEEN model -> entity embeddings + metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, task

from flows.artifacts import markdown_table, publish_markdown
from ptm_core.atomic import check_output_directory


def check_output(output_dir: str | Path, *, overwrite: bool = False) -> None:
    """Refuse an ``--output`` that ``embed-kg`` may not replace, before any training.

    Raises:
        OutputExistsError: a file, a folder ptm did not write, or (without ``overwrite``)
            an earlier ptm output.
    """
    check_output_directory(
        output_dir, kind="kg-embeddings", overwrite=overwrite, option="--overwrite"
    )


@task(name="train-kg-embeddings")
def train_embeddings(
    kg_dir: str, output_dir: str, model: str, embedding_dim: int, num_epochs: int, seed: int
) -> dict[str, Any]:
    """Train with PyKEEN's pipeline and write embeddings keyed by our entity ids."""
    from ptm_knowledge.kg import load_knowledge_graph, train_kg_embeddings

    result = train_kg_embeddings(
        load_knowledge_graph(kg_dir),
        model=model,
        embedding_dim=embedding_dim,
        num_epochs=num_epochs,
        seed=seed,
    )
    directory = result.save(output_dir)
    return {
        "output_dir": str(directory),
        "model": result.model_name,
        "metrics": result.metrics,
        "random_baseline": result.baseline_metrics,
        "entities": len(result.entity_ids),
    }


@flow(name="embed_knowledge_graph", log_prints=True)
def embed_knowledge_graph(
    kg_dir: str,
    output_dir: str,
    model: str = "TransE",
    embedding_dim: int = 32,
    num_epochs: int = 100,
    seed: int = 0,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Embed a knowledge graph with any PyKEEN model and report link-prediction metrics.

    Args:
        kg_dir: directory with ``entities.tsv`` and ``triples.tsv``.
        output_dir: where embeddings (safetensors), id order and metrics go.
        model: PyKEEN model name (``TransE``, ``DistMult``, ``RotatE``, ...).
        embedding_dim: embedding width.
        num_epochs: training epochs.
        seed: split, init and negative-sampling seed.
        overwrite: replace ``output_dir`` when it holds an earlier ptm output (never a
            folder ptm did not write).

    Returns:
        Output directory, test metrics and the random-embedding baseline's metrics.
    """
    check_output(output_dir, overwrite=overwrite)  # before minutes of training
    summary = train_embeddings(kg_dir, output_dir, model, embedding_dim, num_epochs, seed)
    rows = [
        {"model": summary["model"], **summary["metrics"]},
        {"model": "random embeddings", **summary["random_baseline"]},
    ]
    columns = ["model", *[k for k in summary["metrics"] if k != "model"]]
    markdown = (
        f"# Knowledge-graph embeddings\n\n{summary['entities']} entities from `{kg_dir}`, "
        f"written to `{Path(summary['output_dir'])}`.\n\n" + markdown_table(rows, columns)
    )
    publish_markdown("kg-embedding-metrics", markdown, f"{model} on {kg_dir}")
    print(f"{model}: MRR {summary['metrics'].get('mrr', float('nan')):.3f}")
    return summary
