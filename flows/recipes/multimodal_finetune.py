"""VisualBERT/ViLBERT fine-tuning from a composed config: ``recipe: multimodal_finetune``.

``init_from`` is a VisualBERT or ViLBERT ``final/`` (``ptm pretrain
experiment=visualbert_tiny``); the ``multimodal_finetune`` block of the experiment
(``configs/experiment/visualbert_vqa_tiny.yaml``, ``vilbert_vqa_tiny.yaml``,
``multimodal_match_finetune.yaml``) names the task (kind, JSONL files, feature directory)
and the baseline switch::

    ptm pretrain experiment=visualbert_vqa_tiny init_from=runs/visualbert_tiny/final
    ptm pretrain experiment=visualbert_vqa_tiny init_from=... multimodal_finetune.random_init=true
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ptm_core.finetune.recipe import FinetuneResult
from ptm_multimodal.finetune import finetune_image_text
from ptm_multimodal.task_data import ImageTextTask


def run(cfg: DictConfig, **trainer_overrides: Any) -> FinetuneResult:
    """Fine-tune ``init_from`` on ``multimodal_finetune.task`` and score its dev file.

    Args:
        cfg: a config composed with ``experiment=visualbert_vqa_tiny`` (or another
            experiment whose ``recipe`` is ``multimodal_finetune``).
        **trainer_overrides: TrainerConfig fields to change (``output_dir=...``).

    Raises:
        FileNotFoundError: ``init_from`` is missing.
        ValueError: ``init_from`` is not the architecture the experiment names.
    """
    experiment = str(cfg.get("experiment_name"))
    init_from = cfg.get("init_from")
    if not init_from or not (Path(init_from) / "config.json").is_file():
        raise FileNotFoundError(
            f"init_from={init_from}: experiment={experiment} fine-tunes a pre-trained "
            "VisualBERT/ViLBERT; give init_from=<final/ of ptm pretrain "
            "experiment=visualbert_tiny (or vilbert_tiny)>"
        )
    options = cfg.multimodal_finetune
    expected = options.get("architecture")
    found = json.loads((Path(init_from) / "config.json").read_text(encoding="utf-8")).get(
        "architecture"
    )
    if expected and found != expected:
        raise ValueError(
            f"init_from={init_from} is a {found!r} model but experiment={experiment} sets "
            f"multimodal_finetune.architecture={expected}; use the {found} experiment or set "
            "multimodal_finetune.architecture=null"
        )
    task = ImageTextTask.from_mapping(OmegaConf.to_container(options.task, resolve=True))  # type: ignore[arg-type]
    trainer = instantiate(cfg.trainer, _convert_="all", **trainer_overrides)
    random_init = bool(options.get("random_init", False))
    freeze_backbone = bool(options.get("freeze_backbone", False))
    return finetune_image_text(
        task,
        init_from=init_from,
        trainer=trainer,
        seed=int(cfg.seed),
        dropout=float(options.get("dropout", 0.1)),
        random_init=random_init,
        head=str(options.get("head", "cls")),
        freeze_backbone=freeze_backbone,
        provenance={
            "init_from": str(init_from),
            "experiment": experiment,
            "random_init": random_init,
            "freeze_backbone": freeze_backbone,
        },
    )
