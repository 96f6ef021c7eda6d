"""Run the ERNIE families' plans from Python in tests (a helper module, not tests).

What a composed config gives the runner (:class:`PretrainRun`), built from test values:
documents in memory are written to a linked-corpus file, entity embeddings in memory to
an embeddings folder (``knowledge.embeddings_dir``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from ptm_core.families import registry
from ptm_core.families.runner import PretrainRun, run_pretraining
from ptm_core.training import TrainerConfig
from ptm_knowledge.family_ernie import (
    ErnieBaiduSettings,
    ErnieThuSettings,
    Knowledge,
)
from ptm_knowledge.kg import save_entity_embeddings
from ptm_knowledge.kg_corpus_settings import KGCorpusData
from ptm_knowledge.linking.corpus import LinkedDocument, write_linked_corpus


def linked_file(linked: str | Path | Sequence[LinkedDocument], folder: Path) -> str:
    """``linked`` as a linked-corpus file (documents in memory are written under ``folder``)."""
    if isinstance(linked, (str, Path)):
        return str(linked)
    folder.mkdir(parents=True, exist_ok=True)
    return str(write_linked_corpus(linked, folder / "linked_documents.jsonl"))


def _builder(values: Mapping[str, Any]) -> Callable[[str], Any]:
    return lambda path: values.get(path, {})


def pretrain_ernie(
    family: str,
    *,
    encoder: Callable[..., Any],
    trainer: TrainerConfig,
    linked: str | Path | Sequence[LinkedDocument] | None = None,
    embeddings: tuple[Sequence[str], torch.Tensor] | None = None,
    objectives: Mapping[str, Callable[..., Any]] | None = None,
    weights: Mapping[str, float] | None = None,
    config: Mapping[str, Any] | None = None,
    seed: int = 0,
    **data: Any,
) -> Any:
    """Pre-train ``family`` (``ernie_baidu`` or ``ernie_thu``) through the runner.

    ``data`` are :class:`KGCorpusData` fields; ``embeddings`` (ids, table) become
    ``knowledge.embeddings_dir`` (``knowledge`` fields go in ``data`` as ``knowledge=``);
    ``config`` maps dotted config paths (``"objective.entity_objectives"``) to what the
    composed config would build there.
    """
    knowledge: Knowledge = data.pop("knowledge", None) or Knowledge()
    folder = Path(trainer.output_dir).parent / f"{Path(trainer.output_dir).name}-inputs"
    if linked is not None:
        data["linked_corpus"] = linked_file(linked, folder)
    if embeddings is not None:
        ids, table = embeddings
        knowledge.embeddings_dir = str(
            save_entity_embeddings(folder / "embeddings", list(ids), table)
        )
    kg_data = KGCorpusData(**data)
    settings: Any = (
        ErnieThuSettings(data=kg_data, knowledge=knowledge)
        if family == "ernie_thu"
        else ErnieBaiduSettings(data=kg_data)
    )
    run = PretrainRun(
        settings=settings,
        model=encoder,
        objectives=dict(objectives or {}),
        weights=dict(weights or {}),
        trainer=trainer,
        seed=seed,
        build=_builder(config or {}),
    )
    return run_pretraining(registry.get(family), run)
