"""KnowBERT's spec hooks: fine-tuning (its task adapter), and its folder's load and save.

The runner picks :func:`finetune` whenever ``init_from`` is a KnowBERT folder:

- ``ptm pretrain experiment=knowbert_finetune_tiny init_from=<final/>``: the
  ``knowbert_finetune`` block names the task, ``use_kar`` and the pooling;
- ``ptm finetune task=<preset> model=<final/>``: the ``task`` preset and the ``finetune``
  block (``use_entities=false`` is the ablation without KARs, ``dropout``).

Heavy imports happen inside the functions: resolving a hook costs nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ptm_core.families.core_settings import refuse_unread_finetune_options
from ptm_knowledge.family_knowbert import KnowBertSettings

if TYPE_CHECKING:
    from ptm_core.families.runner import FinetuneRun
    from ptm_core.finetune.recipe import FinetuneResult
    from ptm_knowledge.knowbert.model import KnowBertEncoder


def recognizes(path: str | Path) -> bool:
    """A KnowBERT folder: ``knowbert_config.json`` beside the text encoder."""
    return (Path(path) / "knowbert_config.json").is_file()


def finetune(run: FinetuneRun) -> FinetuneResult:
    """Fine-tune the KnowBERT ``run.init_from`` on the configured task.

    Raises:
        FileNotFoundError: ``init_from`` is not a KnowBERT ``final/``.
        ValueError: a bad task preset, or a generic switch KnowBERT cannot take.
    """
    from ptm_core.finetune.task_spec import TaskSpec
    from ptm_knowledge.knowbert.finetune import finetune_knowbert

    settings: KnowBertSettings = run.settings or KnowBertSettings()
    init_from = run.init_from
    if not init_from or not recognizes(init_from):
        raise FileNotFoundError(
            f"init_from={init_from}: KnowBERT fine-tuning needs a pre-trained KnowBERT; give "
            "init_from=<final/ of ptm pretrain experiment=knowbert_tiny>"
        )
    options = settings.knowbert_finetune
    extra: dict[str, Any]
    if options.task is not None:  # experiment=knowbert_finetune_tiny
        where, task_settings = "knowbert_finetune.task", options.task
        extra = {
            "use_kar": options.use_kar,
            "pool": options.pool,
            "dropout": options.dropout,
            "num_workers": options.num_workers,
        }
    else:  # ptm finetune model=<KnowBERT final/>
        generic = settings.finetune
        refuse_unread_finetune_options(
            generic,
            "KnowBERT",
            ("use_entities", "dropout", "num_workers"),
            "or use finetune.use_entities=false for the ablation without KARs",
        )
        where, task_settings = "task", settings.task
        extra = {
            "use_kar": generic.use_entities,
            "dropout": generic.dropout,
            "num_workers": generic.num_workers,
        }
    if not isinstance(task_settings, dict):
        raise ValueError(f"{where} must be a mapping (a configs/task preset)")
    task = TaskSpec.from_mapping({str(k): v for k, v in task_settings.items()})
    task.check_files()
    return finetune_knowbert(
        task,
        model_dir=init_from,
        trainer=run.trainer,
        seed=run.seed,
        provenance={"init_from": str(init_from)},
        **extra,
    )


def load(path: str | Path, **options: Any) -> KnowBertEncoder:
    """The KnowBERT encoder of a folder (text encoder + KARs)."""
    from ptm_knowledge.knowbert.model import KnowBertEncoder

    if options:
        raise TypeError(f"a KnowBERT folder loads without options; got {sorted(options)}")
    return KnowBertEncoder.from_pretrained(path)


def save(model: KnowBertEncoder, path: str | Path, **options: Any) -> Path:
    """Write ``model`` as a KnowBERT folder (``options``: ``extra_writers``)."""
    return model.save_pretrained(path, **options)
