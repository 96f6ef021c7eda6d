"""``recipe: finetune`` for the folders whose families have no ``finetune`` hook yet.

AWD-LSTM (ULMFiT's classifier) fine-tunes here; every other folder, and a ``model`` preset, runs through its family's spec
(:func:`flows.runner.finetune`: the folder's ``"ptm_model"`` kind picks the family, the
``encoder`` family when there is none). This module goes once the AWD-LSTM family fine-tunes
through its spec; then the ``encoder`` family
claims ``recipe: finetune`` itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from flows import runner
from ptm_core.families import registry
from ptm_core.families.core_settings import TaskFinetuneSettings
from ptm_core.finetune.recipe import FinetuneResult
from ptm_core.finetune.task_spec import TaskSpec


def run(cfg: DictConfig, **trainer_overrides: Any) -> Any:
    """Fine-tune as configured (``configs/finetune.yaml`` + ``configs/task/<name>.yaml``)."""
    init_from = OmegaConf.select(cfg, "init_from")
    if init_from and (Path(init_from) / "config.json").is_file():
        from ptm_classic.recurrent.ulmfit import is_awd_lstm_directory

        if is_awd_lstm_directory(init_from):
            return _finetune_ulmfit(cfg, str(init_from), trainer_overrides)
    spec = runner.family_of_folder(init_from) if init_from else None
    return runner.finetune(spec or registry.get("encoder"), cfg, **trainer_overrides)


def _settings(cfg: DictConfig, trainer_overrides: dict[str, Any]) -> tuple[Any, TaskSpec, Any]:
    settings: TaskFinetuneSettings = runner.settings_of(registry.get("encoder"), cfg)
    task = TaskSpec.from_mapping(settings.task)
    task.check_files()  # before any model is built or loaded
    trainer = instantiate(cfg.trainer, _convert_="all", **trainer_overrides)
    return settings.finetune, task, trainer


def _finetune_ulmfit(
    cfg: DictConfig, init_from: str, trainer_overrides: dict[str, Any]
) -> FinetuneResult:
    """An AWD-LSTM ``final/`` (``experiment=awd_lstm_tiny``): ULMFiT's classifier (concat
    pooling, BN/dropout/linear head); the ULMFiT switches are the trainer's
    (``trainer.schedule=slanted_triangular trainer.layer_lr_decay=0.3846
    trainer.unfreeze_every=<steps>``)."""
    from ptm_classic.recurrent.ulmfit import finetune_ulmfit

    options, task, trainer = _settings(cfg, trainer_overrides)
    unsupported = [key for key in ("feature_based", "text_to_text") if getattr(options, key)]
    if unsupported:
        raise ValueError(
            f"finetune.{unsupported[0]}=true is not supported for an AWD-LSTM model "
            f"({init_from}); drop it (the ULMFiT classifier fine-tunes the whole encoder)"
        )
    return finetune_ulmfit(
        task,
        model_dir=init_from,
        trainer=trainer,
        seed=int(cfg.seed),
        random_init=options.random_init,
        num_workers=options.num_workers,
        provenance={"init_from": init_from, "random_init": options.random_init},
    )
