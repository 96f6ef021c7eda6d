"""ERNIE-THU fine-tuning from a composed config: ``recipe: ernie_thu_finetune``.

``init_from`` is an ERNIE-THU ``final/`` (``ptm pretrain experiment=ernie_thu_tiny``); the
``ernie_finetune`` block (``configs/experiment/ernie_thu_finetune_tiny.yaml``) names the task
(a ``configs/task`` preset), the KG the task text is linked against, the linker settings
and the kg-free switch ``use_entities``. The model code is
:func:`ptm_knowledge.ernie.finetune.finetune_ernie_thu`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ptm_core.finetune.recipe import FinetuneResult
from ptm_core.finetune.task_spec import TaskSpec
from ptm_knowledge.ernie.finetune import finetune_ernie_thu


def run(cfg: DictConfig, **trainer_overrides: Any) -> FinetuneResult:
    """Fine-tune ``init_from`` on ``ernie_finetune.task`` with linked entity inputs.

    Args:
        cfg: a config composed with ``experiment=ernie_thu_finetune_tiny``.
        **trainer_overrides: TrainerConfig fields to change (``output_dir=...``).
    """
    init_from = cfg.get("init_from")
    if not init_from or not (Path(init_from) / "knowledge_config.json").is_file():
        raise FileNotFoundError(
            f"init_from={init_from}: experiment=ernie_thu_finetune_tiny fine-tunes a pre-trained "
            "ERNIE-THU; give init_from=<final/ of ptm pretrain experiment=ernie_thu_tiny>"
        )
    options = cfg.ernie_finetune
    settings = OmegaConf.to_container(options.task, resolve=True)
    if not isinstance(settings, dict):
        raise ValueError("ernie_finetune.task must be a mapping (a configs/task preset)")
    task = TaskSpec.from_mapping({str(k): v for k, v in settings.items()})
    task.check_files()
    trainer = instantiate(cfg.trainer, _convert_="all", **trainer_overrides)
    linker = OmegaConf.to_container(options.get("linker", {}), resolve=True)
    return finetune_ernie_thu(
        task,
        model_dir=init_from,
        kg=options.get("kg"),
        trainer=trainer,
        seed=int(cfg.seed),
        dropout=float(options.get("dropout", 0.1)),
        use_entities=bool(options.get("use_entities", True)),
        pool=options.get("pool", "mentions"),
        linker_options=linker,  # type: ignore[arg-type]
        cache_dir=options.get("cache_dir"),
        num_workers=int(options.get("num_workers", 0)),
        provenance={"init_from": str(init_from)},
    )
