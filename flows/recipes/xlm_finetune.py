"""XLM zero-shot cross-lingual fine-tuning from a composed config: ``recipe: xlm_finetune``.

``init_from`` is an XLM ``final/`` (``ptm pretrain experiment=xlm_tlm_tiny``); the
``xlm_finetune`` block (``configs/experiment/xlm_zero_shot.yaml``) names the training file and
language and the dev files per language.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from ptm_multilingual.finetune import XLMFinetuneResult, finetune_xlm_classifier


def run(cfg: DictConfig, **trainer_overrides: Any) -> XLMFinetuneResult:
    """Fine-tune ``init_from`` on ``xlm_finetune.train_file`` and score every dev language.

    Args:
        cfg: a config composed with ``experiment=xlm_zero_shot``.
        **trainer_overrides: TrainerConfig fields to change (``output_dir=...``).
    """
    init_from = cfg.get("init_from")
    if not init_from or not Path(init_from).is_dir():
        raise FileNotFoundError(
            f"init_from={init_from}: experiment=xlm_zero_shot fine-tunes a pre-trained XLM; "
            "give init_from=<final/ of ptm pretrain experiment=xlm_tlm_tiny (or xlm_mlm_tiny)>"
        )
    options = cfg.xlm_finetune
    trainer = instantiate(cfg.trainer, _convert_="all", **trainer_overrides)
    return finetune_xlm_classifier(
        init_from,
        train=(options.train_file, str(options.train_lang)),
        dev={str(lang): path for lang, path in options.dev.items()},
        trainer=trainer,
        batch_size=int(options.batch_size),
        eval_batch_size=int(options.eval_batch_size),
        max_length=int(options.max_length),
        dropout=float(options.dropout),
        seed=int(cfg.seed),
        random_init=bool(options.random_init),
        freeze=str(options.freeze),
        provenance={"init_from": str(init_from), "experiment": str(cfg.experiment_name)},
    )
