"""``ptm embed-kg``: triples -> PyKEEN model -> entity embeddings + metrics, in this process.

The work of the ``embed_knowledge_graph`` flow (:mod:`flows.embed_knowledge_graph`),
without Prefect.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flows.artifacts import markdown_table, publish_markdown
from flows.execution import in_flow_run
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


def train_embeddings(
    kg_dir: str, output_dir: str, model: str, seed: int, options: dict[str, Any]
) -> dict[str, Any]:
    """Train with PyKEEN (the KG folder's own split when it has one); write embeddings
    keyed by our entity ids. Progress lines go to the log (and to the flow run's logs)."""
    from ptm_knowledge.kg import load_knowledge_graph, train_kg_embeddings
    from ptm_knowledge.kg.embedding_splits import TripleSplit, read_kg_split

    kg = load_knowledge_graph(kg_dir)
    split: TripleSplit | tuple[float, float, float] = read_kg_split(kg_dir, kg) or (0.8, 0.1, 0.1)
    to_run: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if in_flow_run():
        from flows.pretrain import package_logs_to_prefect

        to_run = package_logs_to_prefect("ptm_knowledge.kg.embeddings")
    with to_run:
        result = train_kg_embeddings(kg, model=model, seed=seed, split=split, **options)
    directory = result.save(output_dir)
    return {
        "output_dir": str(directory),
        "model": result.model_name,
        "metrics": result.metrics,
        "random_baseline": result.baseline_metrics,
        "entities": len(result.entity_ids),
        "report": result.report,
    }


def end_table(summary: dict[str, Any]) -> str:
    """The end-of-run table: valid and test (filtered, raw) against random embeddings."""
    report = summary["report"]
    rows = [
        {"split": "valid (filtered)", **report.get("valid", {})},
        {"split": "test (filtered)", **summary["metrics"]},
        {"split": "test (raw)", **report.get("test_raw", {})},
        {"split": "test, untrained model", **summary["random_baseline"]},
    ]
    columns = ["split", "mrr", "hits_at_1", "hits_at_3", "hits_at_10", "mean_rank"]
    for row in rows:
        for key in columns[1:]:
            if isinstance(row.get(key), float):
                row[key] = round(row[key], 4 if key != "mean_rank" else 1)
    return markdown_table([r for r in rows if len(r) > 1], columns)


def embed_knowledge_graph_in_process(
    kg_dir: str,
    output_dir: str,
    model: str = "TransE",
    *,
    preset: str = "auto",
    embedding_dim: int | None = None,
    num_epochs: int | None = None,
    batch_size: int | None = None,
    learning_rate: float | None = None,
    num_negatives: int | None = None,
    eval_every: int | None = None,
    patience: int | None = None,
    valid_sample: int | None = None,
    device: str = "auto",
    threads: int | None = None,
    seed: int = 0,
    overwrite: bool = False,
    train: Callable[..., dict[str, Any]] = train_embeddings,
) -> dict[str, Any]:
    """Embed a knowledge graph with a PyKEEN model; report filtered link-prediction metrics.

    Args:
        kg_dir: directory with ``entities.tsv`` and ``triples.tsv`` (and, optionally,
            ``train.tsv``/``valid.tsv``/``test.tsv``, used as given).
        output_dir: where embeddings (safetensors), id order and metrics go.
        model: PyKEEN model name (``TransE``, ``RotatE``, ``ComplEx``, ``DistMult``, ...).
        preset: ``auto`` (by entity count), ``small``, ``medium``, ``large``.
        embedding_dim: embedding width; this and ``num_epochs``, ``batch_size``,
            ``learning_rate``, ``num_negatives``, ``eval_every``, ``patience`` and
            ``valid_sample`` override the preset's (``None``: keep it).
        num_epochs: most epochs.
        batch_size: positive triples per step.
        learning_rate: Adam's.
        num_negatives: negatives per positive.
        eval_every: epochs between validation evaluations.
        patience: evaluations without gain before stopping (0: never).
        valid_sample: validation triples per early-stopping evaluation (0: all).
        device: ``auto`` (CUDA when present), ``cpu``, ``cuda``.
        threads: CPU threads for torch.
        seed: split, init and negative-sampling seed.
        overwrite: replace ``output_dir`` when it holds an earlier ptm output (never a
            folder ptm did not write).
        train: the training step (:func:`train_embeddings`; the flow passes it as a task).

    Returns:
        Output directory, test metrics, the untrained model's metrics and the run report.
    """
    check_output(output_dir, overwrite=overwrite)  # before minutes of training
    options = {
        "preset": preset,
        "embedding_dim": embedding_dim,
        "num_epochs": num_epochs,
        "batch_size": batch_size,
        "learning_rate": learning_rate,
        "num_negatives": num_negatives,
        "eval_every": eval_every,
        "patience": patience,
        "valid_sample": valid_sample,
        "device": device,
        "threads": threads,
    }
    from ptm_knowledge.kg.embedding_training import describe_stop

    summary = train(kg_dir, output_dir, model, seed, options)
    report = summary["report"]
    table = end_table(summary)
    settings = report["settings"]
    header = (
        f"{summary['model']} ({settings['preset']} preset, dim {settings['embedding_dim']}) on "
        f"{summary['entities']} entities from `{kg_dir}`: {report['epochs_run']} epochs "
        f"({describe_stop(report['stopped_early'], report['best_epoch'])}), "
        f"{report['seconds']:.0f} s, peak RSS {report['peak_rss_mb']:.0f} MB on {report['device']}"
    )
    markdown = (
        f"# Knowledge-graph embeddings\n\n{header}; written to "
        f"`{Path(summary['output_dir'])}`.\n\n{table}"
    )
    publish_markdown("kg-embedding-metrics", markdown, f"{model} on {kg_dir}")
    print(f"{header}\n{table}")
    return summary
