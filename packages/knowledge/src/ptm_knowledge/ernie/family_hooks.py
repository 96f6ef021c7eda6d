"""ERNIE-THU's spec hooks: fine-tuning (its task adapter), and its folder's load and save.

The runner picks :func:`finetune` whenever ``init_from`` is an ERNIE-THU folder, under
either config root:

- ``ptm pretrain experiment=ernie_thu_finetune_tiny init_from=<final/>``: the
  ``ernie_finetune`` block names the task, the KG, the linker settings and the pooling;
- ``ptm finetune task=<preset> model=<final/>``: the ``task`` preset and the ``finetune``
  block (``kg``, ``use_entities``, ``dropout``, ``peft``: LoRA, IA3, prompt or prefix on
  the encoder, see :mod:`ptm_knowledge.ernie.peft_io`); the generic switches ``random_init``,
  ``feature_based`` and ``text_to_text`` do not apply and are refused.

Heavy imports happen inside the functions: resolving a hook costs nothing.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ptm_knowledge.family_ernie import ErnieThuSettings, recognizes

if TYPE_CHECKING:
    from ptm_core.families.runner import FinetuneRun
    from ptm_core.finetune.recipe import FinetuneResult
    from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder

_GENERIC_SWITCHES = ("random_init", "feature_based", "text_to_text")


def finetune(run: FinetuneRun) -> FinetuneResult:
    """Fine-tune the ERNIE-THU ``run.init_from`` on the configured task (see the module
    docstring); its knowledge layers fine-tune too, with the task text linked to the KG.

    Raises:
        FileNotFoundError: ``init_from`` is not an ERNIE-THU ``final/``.
        ValueError: a bad task preset, or a generic switch an ERNIE-THU model cannot take.
    """
    from ptm_core.finetune.task_spec import TaskSpec
    from ptm_core.peft import PeftConfig
    from ptm_knowledge.ernie.finetune import finetune_ernie_thu

    settings: ErnieThuSettings = run.settings or ErnieThuSettings()
    init_from = run.init_from
    if not init_from or not recognizes(init_from):
        raise FileNotFoundError(
            f"init_from={init_from}: ERNIE-THU fine-tuning needs a pre-trained ERNIE-THU; give "
            "init_from=<final/ of ptm pretrain experiment=ernie_thu_tiny>"
        )
    options = settings.ernie_finetune
    if options.task is not None:  # experiment=ernie_thu_finetune_tiny
        where, task_settings = "ernie_finetune.task", options.task
        kg, use_entities, dropout = options.kg, options.use_entities, options.dropout
        extra: dict[str, Any] = {
            "pool": options.pool,
            "linker_options": dataclasses.asdict(options.linker),
            "cache_dir": options.cache_dir,
            "num_workers": options.num_workers,
        }
    else:  # ptm finetune model=<ERNIE-THU final/>
        generic = settings.finetune
        unsupported = [key for key in _GENERIC_SWITCHES if getattr(generic, key)]
        if unsupported:
            raise ValueError(
                f"finetune.{unsupported[0]}=true is not supported for an ERNIE-THU model "
                f"({init_from}); drop it, or use ernie_finetune.use_entities=false for the "
                "kg-free ablation"
            )
        where, task_settings = "task", settings.task
        kg, use_entities, dropout = generic.kg, generic.use_entities, generic.dropout
        extra = {"num_workers": generic.num_workers, "peft": PeftConfig.from_options(generic)}
    if not isinstance(task_settings, dict):
        raise ValueError(f"{where} must be a mapping (a configs/task preset)")
    task = TaskSpec.from_mapping({str(k): v for k, v in task_settings.items()})
    task.check_files()
    return finetune_ernie_thu(
        task,
        model_dir=init_from,
        kg=kg,
        trainer=run.trainer,
        seed=run.seed,
        dropout=float(dropout),
        use_entities=use_entities,
        provenance={"init_from": str(init_from)},
        **extra,
    )


def load(path: str | Path, **options: Any) -> KnowledgeableEncoder:
    """The knowledgeable encoder of an ERNIE-THU folder (T-Encoder, knowledge layers)."""
    from ptm_knowledge.ernie.thu_encoder import KnowledgeableEncoder

    if options:
        raise TypeError(f"an ERNIE-THU folder loads without options; got {sorted(options)}")
    return KnowledgeableEncoder.from_pretrained(path)


def save(model: KnowledgeableEncoder, path: str | Path, **options: Any) -> Path:
    """Write ``model`` as an ERNIE-THU folder (``options``: ``entity_ids``, ``kg``,
    ``extra_writers`` of :meth:`KnowledgeableEncoder.save_pretrained`)."""
    return model.save_pretrained(path, **options)
