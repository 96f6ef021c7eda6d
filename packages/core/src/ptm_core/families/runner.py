"""The one pre-training runner: a family's plan -> the shared model wrapper -> the Trainer.

A family's ``plan_pretraining`` hook turns its typed settings into a
:class:`PretrainingPlan` (data, network, objectives, how to save); everything after that is
the same for every family: :class:`~ptm_core.models.pretraining.PretrainingModel` reads the
spec's ``input_keys``, :func:`~ptm_core.training.run.train_and_save` trains, resumes and
writes ``final/``, and ``plan.finish`` turns the run into the family's result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ptm_core.families.spec import FamilySpec

if TYPE_CHECKING:
    from torch import nn

    from ptm_core.objectives.mix import ObjectiveMix
    from ptm_core.training import TrainerConfig
    from ptm_core.training.run import TrainingRun


@dataclass
class PretrainRun:
    """What the runner gives a family's ``plan_pretraining`` hook.

    Attributes:
        settings: the family's typed config (an instance of ``spec.settings``).
        model: the ``model`` config node, instantiated: a factory (``_partial_``) the family
            calls with what only the data knows (``vocab_size``, special ids); ``None`` when
            the config has no ``model`` node.
        objectives: the ``objective.objectives`` factories by name.
        weights: the ``objective.weights`` by name.
        trainer: the trainer settings (``output_dir`` is the run folder).
        seed: the run's seed.
        init_from: a checkpoint to start from, if any.
        build: instantiates the config node at a dotted path
            (``"objective.entity_objectives"``), for the other nodes with ``_target_`` that
            a family builds itself; ``None`` outside a composed config.
        callbacks: trainer callbacks of a Python caller (``on_log``, ``on_save``), passed on
            by the family's plan.
    """

    settings: Any
    model: Callable[..., Any] | None
    objectives: Mapping[str, Callable[..., Any]]
    weights: Mapping[str, float]
    trainer: TrainerConfig
    seed: int
    init_from: str | None = None
    build: Callable[[str], Any] | None = None
    callbacks: Iterable[object] = ()

    @property
    def output_dir(self) -> Path:
        """The run folder."""
        return Path(self.trainer.output_dir)


@dataclass
class PretrainingPlan:
    """What a family's ``plan_pretraining`` hook returns.

    Attributes:
        network: the model being pre-trained (its forward reads the spec's ``input_keys``
            and returns an output every objective of ``objectives`` scores).
        objectives: the objective mix.
        data: the trainer's batch source.
        save_final: writes the final model into the folder it is given (rank 0).
        finish: turns the finished run into the family's result (paths, metrics); the
            default returns the :class:`~ptm_core.training.run.TrainingRun`.
        callbacks: trainer callbacks (evaluation during training, ...).
        final_dir: where ``final/`` goes (default ``<output_dir>/final``).
    """

    network: nn.Module
    objectives: ObjectiveMix
    data: Any
    save_final: Callable[[Path], object]
    finish: Callable[[TrainingRun], Any] | None = None
    callbacks: Iterable[object] = ()
    final_dir: Path | None = None


def run_pretraining(spec: FamilySpec, run: PretrainRun) -> Any:
    """Pre-train ``spec``'s family as ``run`` says; returns what ``plan.finish`` returns (or,
    for a family that trains outside the Trainer, what its ``pretrain`` hook returns)."""
    from ptm_core.models.pretraining import PretrainingModel

    if not spec.has("plan_pretraining") and spec.has("pretrain"):
        return spec.hook("pretrain")(run)
    from ptm_core.training.run import train_and_save

    plan: PretrainingPlan = spec.hook("plan_pretraining")(run)
    model = PretrainingModel(plan.network, plan.objectives, input_keys=spec.input_keys or None)
    trained = train_and_save(
        model,
        plan.data,
        run.trainer,
        save_final=plan.save_final,
        callbacks=plan.callbacks,
        final_dir=plan.final_dir,
    )
    return plan.finish(trained) if plan.finish is not None else trained


@dataclass
class FinetuneRun:
    """What the runner gives a family's ``finetune`` hook.

    Attributes:
        settings: the family's typed config (an instance of ``spec.settings``).
        trainer: the trainer settings (``output_dir`` is the run folder).
        seed: the run's seed.
        init_from: the folder to fine-tune (its ``"ptm_model"`` kind chose this family);
            ``None`` for a model built at random init from ``model``.
        model: the ``model`` config node, instantiated (a factory), or ``None``.
        build: instantiates the config node at a dotted path (``"objective.objectives"``),
            for the nodes with ``_target_`` that a family builds itself.
    """

    settings: Any
    trainer: TrainerConfig
    seed: int
    init_from: str | None = None
    model: Callable[..., Any] | None = None
    build: Callable[[str], Any] | None = None

    @property
    def output_dir(self) -> Path:
        """The run folder."""
        return Path(self.trainer.output_dir)
