"""Distillation (DistilBERT, TinyBERT): the ``distill`` family's plan hook.

A teacher (an MLM run's ``final/``, or one pre-trained first in ``<output_dir>/teacher``
through the ``encoder`` family) and a student built from the ``model`` preset (optionally
started from every other teacher layer, DistilBERT); the student's objectives read the
teacher. What is saved is a plain text encoder (kind ``encoder``).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from ptm_core.encoders.transformer import TransformerEncoder
from ptm_core.families.core_settings import DistillSettings, TextSettings
from ptm_core.families.runner import PretrainingPlan, PretrainRun, run_pretraining
from ptm_core.objectives import MaskedLMObjective, MaskedLMTeacher, init_student_from_teacher
from ptm_core.text_pretraining import plan_encoder_pretraining


def plan_distillation(run: PretrainRun) -> PretrainingPlan:
    """Resolve (or pre-train) the teacher, then plan the student's pre-training.

    ``run.settings`` is a :class:`DistillSettings`; ``run.model`` builds the student;
    ``run.objectives`` are called with ``teacher=`` besides what the encoder plan gives.
    """
    settings: DistillSettings = run.settings
    distill = settings.distill
    if run.model is None:
        raise ValueError("no student model: give a model preset (model=distilbert_tiny)")
    if run.init_from is not None:
        raise ValueError(
            f"init_from={run.init_from}: a distilled student starts from the model preset "
            "(distill.init_from_teacher=true copies teacher layers); name the teacher in "
            "distill.teacher instead"
        )
    teacher_dir = distill.teacher or _pretrain_teacher(run, settings)
    teacher = MaskedLMTeacher.from_pretrained(teacher_dir)
    make_student = run.model

    def student(vocab_size: int) -> TransformerEncoder:
        encoder: TransformerEncoder = make_student(vocab_size=vocab_size)
        if distill.init_from_teacher:
            init_student_from_teacher(encoder, teacher.encoder)
        return encoder

    student_run = dataclasses.replace(
        run,
        settings=TextSettings(data=settings.data),
        model=student,
        objectives={
            name: functools.partial(make, teacher=teacher) for name, make in run.objectives.items()
        },
    )
    return plan_encoder_pretraining(student_run)


def _pretrain_teacher(run: PretrainRun, settings: DistillSettings) -> Any:
    """MLM pre-training of ``distill.teacher_model`` for ``distill.teacher_steps`` steps."""
    from ptm_core.families.registry import get

    distill = settings.distill
    if distill.teacher_model is None:
        raise ValueError(
            "distill.teacher is null and distill.teacher_model is not set: name an MLM run's "
            "final/ in distill.teacher, or give distill.teacher_model to pre-train one"
        )
    teacher_model = (
        run.build("distill.teacher_model") if run.build is not None else distill.teacher_model
    )
    trainer = dataclasses.replace(
        run.trainer,
        output_dir=str(run.output_dir / "teacher"),
        max_steps=distill.teacher_steps,
        learning_rate=distill.teacher_learning_rate or run.trainer.learning_rate,
    )
    teacher_run = PretrainRun(
        settings=TextSettings(data=settings.data),
        model=teacher_model,
        objectives={"mlm": functools.partial(MaskedLMObjective, mode="dynamic")},
        weights={},
        trainer=trainer,
        seed=run.seed,
    )
    return run_pretraining(get("encoder"), teacher_run).encoder_dir
