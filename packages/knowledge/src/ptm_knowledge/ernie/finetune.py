"""Fine-tune ERNIE-THU on a task, with entity inputs from the linker at fine-tuning time.

ERNIE (Zhang et al., 2019, section 4) fine-tunes like BERT, except that every input also
carries its entities: the task text goes through the entity linker (TAGME in the paper,
:class:`~ptm_knowledge.linking.EntityLinker` here), each mention's entity is aligned to the
first word piece of the mention, and the K-Encoder fuses the entity's KG embedding (the
frozen TransE table the pre-training used) into that token. Here:

- **linking** (:mod:`ptm_knowledge.ernie.task_links`): a task file is linked once and the
  mentions are cached in ``<cache_dir>/task-links/`` under a key of the file's bytes, the
  KG files' bytes and the linker settings (:func:`~ptm_knowledge.ernie.task_links.task_links`),
  so no epoch, run or seed links it again;
- **data** (:mod:`ptm_knowledge.ernie.task_features`): the core GLUE reader (``format:
  glue``; ``classification`` or ``regression``), rows paired with their mentions
  (:class:`~ptm_knowledge.ernie.task_links.LinkedRows`), batched per batch by
  :class:`~ptm_knowledge.ernie.task_features.ErnieFeaturizer` on core
  :class:`~ptm_core.finetune.data.TaskBatches`;
- **model** (:mod:`ptm_knowledge.ernie.task_model`, saved and loaded by
  :mod:`ptm_knowledge.ernie.task_io`): :class:`~ptm_knowledge.ernie.task_model.ErnieTaskModel`: the pre-trained
  :class:`~ptm_knowledge.ernie.thu_encoder.KnowledgeableEncoder` + a core task head;
  ``use_entities=False`` is the kg-free ablation (the same model, no entity embedding is
  fused anywhere);
- **run** (this module): :func:`~ptm_core.finetune.scoring.train_task` (core Trainer,
  ``final/``, ``eval.json``); :func:`predict_ernie` reads ``final/``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast

import torch
from torch import nn

from ptm_core.finetune.data.task_tokenizer import TaskTokenizer, load_task_tokenizer
from ptm_core.finetune.recipe import check_peft_run
from ptm_core.finetune.scoring import FinetuneResult, evaluate_task, train_task
from ptm_core.finetune.task_data import TaskData, read_task
from ptm_core.finetune.task_spec import TaskSpec
from ptm_core.peft import PeftConfig
from ptm_core.seeding import derive_seed
from ptm_core.training import TrainerConfig
from ptm_knowledge.ernie.peft_io import attach_ernie_peft, save_ernie_peft_model
from ptm_knowledge.ernie.task_features import ErnieFeaturizer
from ptm_knowledge.ernie.task_io import (
    load_ernie_task_model,
    save_ernie_task_model,
)
from ptm_knowledge.ernie.task_links import (
    LinkedRows,
    link_coverage,
    task_links,
)
from ptm_knowledge.ernie.task_model import (
    Pool,
    build_ernie_task_model,
)
from ptm_knowledge.ernie.thu_encoder import KNOWLEDGE_CONFIG, KnowledgeableEncoder
from ptm_knowledge.kg_corpus_settings import LinkerSettings
from ptm_knowledge.linking.linker import saved_linker_options


def _linked_data(
    task: TaskSpec,
    split: str,
    tokenizer: TaskTokenizer,
    entity_index: Mapping[str, int],
    kg: str | Path,
    label_names: Sequence[str] | None,
    *,
    path: str | Path | None = None,
    labelled: bool = True,
    linker_options: Mapping[str, Any] | None = None,
    cache_dir: str | Path | None = None,
) -> TaskData:
    """A task file read by the core GLUE reader, linked (cached) and featurized for ERNIE."""
    if task.format != "glue" or task.kind not in ("classification", "regression"):
        raise ValueError(
            f"task {task.name}: ERNIE-THU fine-tuning reads GLUE-style classification or "
            f"regression files; this task is {task.kind} ({task.format}). Pick such a task "
            "(e.g. task=kg_entity_typing)"
        )
    file = path if path is not None else getattr(task, split)
    data = read_task(task, split, tokenizer, label_names, path=file, labelled=labelled)
    links = task_links(file, data.examples, kg, linker_options=linker_options, cache_dir=cache_dir)
    rows = LinkedRows(data.examples, links)
    kind = cast(Literal["classification", "regression"], task.kind)
    featurizer = ErnieFeaturizer(tokenizer, entity_index, task.max_length, kind=kind)
    return TaskData(rows, rows, featurizer, data.label_names, labelled=data.labelled)


def task_linker_options(
    knowledge: Mapping[str, Any], given: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Every linker setting fine-tuning links task text with: ``given`` wins, then the
    settings the pre-training linked its corpus with (``knowledge_config.json``'s
    ``"linker"``), then :class:`LinkerSettings`' defaults. All are returned (and recorded in
    ``task.json``), so a later reader knows which linker made the links."""
    return {
        **dataclasses.asdict(LinkerSettings()),
        **(knowledge.get("linker") or {}),
        **(given or {}),
    }


def model_kg(model_dir: Path, knowledge: Mapping[str, Any], given: str | Path | None) -> Path:
    """The KG to link task text against: ``given``, else the one the model recorded.

    Raises:
        ValueError: nothing given and ``knowledge_config.json`` records no KG.
        FileNotFoundError: the recorded KG folder is gone.
    """
    config = model_dir / KNOWLEDGE_CONFIG
    if given is not None:
        print(f"KG: {given} (given: finetune.kg)")
        return Path(given)
    recorded = knowledge.get("kg")
    if not recorded:
        raise ValueError(
            f"{config}: records no KG (pre-trained before ptm recorded it); give the KG "
            "folder its pre-training embedded: finetune.kg=<folder> (ernie_finetune.kg= "
            "with experiment=ernie_thu_finetune_tiny)"
        )
    if not Path(recorded).is_dir():
        raise FileNotFoundError(
            f"{recorded}: the KG recorded in {config} is gone; give its new place with "
            "finetune.kg=<folder> (ernie_finetune.kg= with experiment=ernie_thu_finetune_tiny)"
        )
    print(f"KG: {recorded} (the model's own, from {config})")
    return Path(recorded)


def _require_entities(
    coverage: Mapping[str, Mapping[str, Any]], task: TaskSpec, kg: Path, model_dir: Path
) -> None:
    """Refuse a run with entities on in which a split has no row linked to the model's table."""
    for split, found in coverage.items():
        if found["rows_with_entity"] == 0:
            raise ValueError(
                f"{getattr(task, split)}: 0 of {found['rows']:,} {split} rows link to an entity "
                f"of {model_dir}'s table ({found['mentions']:,} mentions against KG {kg}, "
                f"{found['mentions_outside_table']:,} of them outside the table): the run would "
                "be kg-free; give finetune.kg=<the KG the model was pre-trained with>, or "
                "finetune.use_entities=false for the kg-free ablation"
            )


def finetune_ernie_thu(
    task: TaskSpec,
    *,
    model_dir: str | Path,
    kg: str | Path | None = None,
    trainer: TrainerConfig,
    seed: int = 0,
    dropout: float = 0.1,
    use_entities: bool = True,
    pool: Pool = "mentions",
    linker_options: Mapping[str, Any] | None = None,
    cache_dir: str | Path | None = None,
    num_workers: int = 0,
    provenance: Mapping[str, Any] | None = None,
    peft: PeftConfig | None = None,
) -> FinetuneResult:
    """Fine-tune a pre-trained ERNIE-THU ``final/`` on ``task`` and score its dev set.

    Args:
        task: a GLUE-style ``classification`` or ``regression`` task.
        model_dir: the ``final/`` of ``ptm pretrain experiment=ernie_thu_tiny`` (model,
            tokenizer, KG embedding table and its ``entity_ids``).
        kg: the KG folder the linker matches task text against; ``None``: the one the
            pre-training recorded in ``knowledge_config.json`` (``"kg"``).
        trainer: core trainer settings.
        seed: batch order seed (the trainer's ``seed`` sets the head's init and dropout).
        dropout: head dropout.
        use_entities: False = the kg-free ablation (see :class:`ErnieTaskModel`).
        pool: ``"mentions"`` or ``"first"`` (see :class:`ErnieTaskModel`).
        linker_options: :class:`~ptm_knowledge.linking.EntityLinker` settings; ``None``:
            those the pre-training linked its corpus with (``knowledge_config.json``'s
            ``"linker"``), else :class:`LinkerSettings`' defaults.
        cache_dir: where task links are cached (default :func:`default_links_dir`).
        num_workers: processes that featurize training batches.
        provenance: JSON-ready facts kept in ``task.json``.
        peft: a parameter-efficient method (LoRA, IA3, prompt or prefix; see
            :mod:`ptm_knowledge.ernie.peft_io`): only the adapter and the head train, and
            ``final/`` holds just those beside a pointer to ``model_dir``.

    Returns:
        The core :class:`~ptm_core.finetune.scoring.FinetuneResult`; ``final/`` loads with
        :func:`load_ernie_task_model`, ``eval.json`` holds ``dev/<metric>``.

    Raises:
        ValueError: ``kg`` is ``None`` and the model records no KG; or, with entities on,
            no row of a split links to an entity of the model's table (the run would be
            kg-free at chance while claiming entities).
    """
    model_dir = Path(model_dir)
    if not (model_dir / KNOWLEDGE_CONFIG).is_file():
        raise FileNotFoundError(
            f"{model_dir / KNOWLEDGE_CONFIG}: not found; model_dir must be the final/ of an "
            "ERNIE-THU pre-training (ptm pretrain experiment=ernie_thu_tiny)"
        )
    peft = peft if peft is not None and peft.enabled else None
    if peft is not None:
        check_peft_run(task, peft, None, model_dir, trainer, feature_based=False)
    task.check_files()
    torch.manual_seed(derive_seed(trainer.seed, "task-head"))
    tokenizer = load_task_tokenizer(model_dir)
    encoder = KnowledgeableEncoder.from_pretrained(model_dir)
    knowledge = json.loads((model_dir / KNOWLEDGE_CONFIG).read_text())
    entity_ids = knowledge["entity_ids"] or []
    index = {entity: i for i, entity in enumerate(entity_ids)}
    kg = model_kg(model_dir, knowledge, kg)
    options = task_linker_options(knowledge, linker_options)
    train = _linked_data(
        task, "train", tokenizer, index, kg, None, linker_options=options, cache_dir=cache_dir
    )
    dev = _linked_data(
        task, "dev", tokenizer, index, kg, train.label_names, linker_options=options,
        cache_dir=cache_dir,
    )  # fmt: skip
    coverage = {s: link_coverage(d.rows, index) for s, d in (("train", train), ("dev", dev))}
    print(f"{task.name}: linked {json.dumps(coverage)}")
    if use_entities:
        _require_entities(coverage, task, kg, model_dir)
    num_labels = 1 if task.kind == "regression" else len(train.label_names)
    model = build_ernie_task_model(
        encoder,
        task.kind,
        num_labels,
        dropout,
        label_names=train.label_names or None,
        use_entities=use_entities,
        pool=pool,
    )
    if peft is not None:
        attach_ernie_peft(model, peft)
    record = {
        "task": task.to_dict(),
        "kg": str(Path(kg).resolve()),
        "linker": options,
        "link_coverage": coverage,
        **({"provenance": dict(provenance)} if provenance else {}),
    }

    def save_final(final: Path) -> None:
        if peft is not None:
            save_ernie_peft_model(
                model, final, config=peft, base=model_dir, entity_ids=entity_ids,
                task_config=record, extra_writers=[tokenizer.save],
            )  # fmt: skip
        else:
            save_ernie_task_model(
                model, final, entity_ids=entity_ids, task_config=record,
                extra_writers=[tokenizer.save],
            )  # fmt: skip

    return train_task(
        model,
        task,
        train,
        dev,
        trainer,
        save_final=save_final,
        seed=seed,
        num_workers=num_workers,
        group_by_length=False,
        peft=peft,
        print_trainable=True,
    )


def predict_ernie(
    directory: str | Path,
    path: str | Path | None = None,
    *,
    labelled: bool = True,
    device: str = "cpu",
    cache_dir: str | Path | None = None,
    reinitialise: Callable[[nn.Module], None] | None = None,
) -> tuple[dict[str, float], list[Any]]:
    """Predict with an ERNIE-THU ``final/`` on a file of its task (default: its dev file).

    The file is linked against the KG ``task.json`` names (cached as in training).

    Args:
        directory: the run's ``final/``.
        path: a GLUE-style file of the task's columns.
        labelled: whether the file has a label column (metrics are empty without).
        device: where to run.
        cache_dir: the link cache (default :func:`default_links_dir`).
        reinitialise: applied to the loaded model first (``ptm evaluate``'s random-init
            baseline).

    Returns:
        ``(metrics, predictions)``: the task's metrics; label names (classification) or
        values (regression).
    """
    model, record = load_ernie_task_model(directory)
    if reinitialise is not None:
        reinitialise(model)
    model.to(device)
    task = TaskSpec.from_mapping(record["task"])
    tokenizer = load_task_tokenizer(directory)
    index = {entity: i for i, entity in enumerate(record["entity_ids"])}
    names = record.get("label_names") or None
    data = _linked_data(
        task,
        "dev",
        tokenizer,
        index,
        record["kg"],
        names,
        path=path,
        labelled=labelled,
        linker_options=saved_linker_options(record.get("linker")),
        cache_dir=cache_dir,
    )
    metrics, predictions = evaluate_task(model, task, data, device=torch.device(device))
    if task.kind == "classification" and names:
        predictions = [names[i] for i in predictions]
    return metrics, predictions


__all__ = ["finetune_ernie_thu", "predict_ernie"]
