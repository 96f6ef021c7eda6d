"""The `embed_knowledge_graph` flow: :func:`flows.kg_embedding.embed_knowledge_graph_in_process`
as a Prefect flow run, its training a task, its metrics a markdown artifact
(``ptm embed-kg --prefect``, the demo flow)."""

from __future__ import annotations

from typing import Any

from prefect import flow, task

from flows.kg_embedding import embed_knowledge_graph_in_process, train_embeddings

train_embeddings_task = task(name="train-kg-embeddings")(train_embeddings)


@flow(name="embed_knowledge_graph", log_prints=True)
def embed_knowledge_graph(
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
) -> dict[str, Any]:
    """Embed a knowledge graph with a PyKEEN model, as a flow run.

    See :func:`flows.kg_embedding.embed_knowledge_graph_in_process` for the arguments and
    the result.
    """
    return embed_knowledge_graph_in_process(
        kg_dir,
        output_dir,
        model,
        preset=preset,
        embedding_dim=embedding_dim,
        num_epochs=num_epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        num_negatives=num_negatives,
        eval_every=eval_every,
        patience=patience,
        valid_sample=valid_sample,
        device=device,
        threads=threads,
        seed=seed,
        overwrite=overwrite,
        train=train_embeddings_task,
    )
