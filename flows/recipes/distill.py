"""Distillation (DistilBERT, TinyBERT) from a composed config: ``recipe: distill``.

Config keys besides the text recipe's: ``distill.teacher`` (an MLM run's ``final/``
directory, or null to pre-train one here for ``distill.teacher_steps`` steps with
``distill.teacher_model`` at ``distill.teacher_learning_rate``), ``distill.init_from_teacher``
(copy every other teacher layer into the student, DistilBERT). ``cfg.model`` is the student.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ptm_core.objectives import MaskedLMObjective, MaskedLMTeacher, init_student_from_teacher
from ptm_core.pretraining import PretrainResult, pretrain


def _trainer(cfg: DictConfig, **overrides: Any) -> Any:
    trainer = instantiate(cfg.trainer, _convert_="all", **overrides)
    return trainer


def run(cfg: DictConfig, **trainer_overrides: Any) -> PretrainResult:
    """Resolve (or pre-train) the teacher, build the student and distil.

    Args:
        cfg: a config composed by :func:`flows.config.compose_config`.
        **trainer_overrides: TrainerConfig fields to change (``output_dir=...``).
    """
    data, distill = cfg.data, cfg.distill
    student_trainer = _trainer(cfg, **trainer_overrides)
    output_dir = Path(student_trainer.output_dir)
    common = dict(
        tokenizer=data.tokenizer,
        vocab_size=data.vocab_size,
        lowercase=data.lowercase,
        max_length=data.max_length,
        batch_size=data.batch_size,
        seed=cfg.seed,
    )
    teacher_dir = distill.get("teacher")
    if teacher_dir is None:
        teacher_run = pretrain(
            data.corpus,
            encoder=instantiate(distill.teacher_model),
            objectives={"mlm": functools.partial(MaskedLMObjective, mode="dynamic")},
            trainer=_trainer(
                cfg,
                **{
                    **trainer_overrides,
                    "output_dir": str(output_dir / "teacher"),
                    "max_steps": distill.teacher_steps,
                    "learning_rate": distill.get("teacher_learning_rate")
                    or cfg.trainer.learning_rate,
                },
            ),
            **common,
        )
        teacher_dir = teacher_run.encoder_dir
    teacher = MaskedLMTeacher.from_pretrained(teacher_dir)

    def student(vocab_size: int) -> Any:
        encoder = instantiate(cfg.model)(vocab_size=vocab_size)
        if distill.get("init_from_teacher", False):
            init_student_from_teacher(encoder, teacher.encoder)
        return encoder

    objectives = {
        name: functools.partial(instantiate(node), teacher=teacher)
        for name, node in cfg.objective.objectives.items()
    }
    weights = OmegaConf.to_container(cfg.objective.get("weights", {}), resolve=True)
    return pretrain(
        data.corpus,
        encoder=student,
        objectives=objectives,
        weights=weights,  # type: ignore[arg-type]
        trainer=student_trainer,
        **common,
    )
