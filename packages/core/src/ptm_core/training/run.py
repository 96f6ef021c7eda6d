"""One training tail for every family: train, rank 0 writes ``final/``, barrier, metrics.

Every pre-training and fine-tuning entry point (text encoders, seq2seq, ERNIE, XLM,
VisualBERT/ViLBERT, K-BERT) builds its data and model, then hands both to
:func:`train_and_save`. The run, the save and the result live here once, so a torchrun
job never writes ``final/`` from several ranks at once and no family forgets the barrier.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from ptm_core.atomic import TRAINING_HINT, DiskFullError
from ptm_core.training.config import TrainerConfig
from ptm_core.training.distributed import barrier, is_main_process
from ptm_core.training.metrics import MetricsLog
from ptm_core.training.protocols import BatchSource
from ptm_core.training.run_folder import locked_run_folder
from ptm_core.training.trainer import Trainer, TrainResult


@dataclass
class TrainingRun:
    """What :func:`train_and_save` did.

    Attributes:
        result: the trainer's result (steps, paths, the metrics logged by this call).
        final_dir: the directory the final model was written to (by rank 0).
        final_metrics: the last metrics record (from this call, else from the log file when
            a finished run is run again).
    """

    result: TrainResult
    final_dir: Path
    final_metrics: dict[str, Any] = field(default_factory=dict)


def train_and_save(
    model: nn.Module,
    data: BatchSource,
    config: TrainerConfig,
    *,
    save_final: Callable[[Path], object],
    callbacks: Iterable[object] = (),
    final_dir: Path | None = None,
) -> TrainingRun:
    """Train ``model`` on ``data`` (resuming if configured), then write the final model.

    Args:
        model: the model the trainer optimises.
        data: its batch source.
        config: trainer settings (``output_dir`` is the run directory).
        save_final: writes the final model into the directory it is given, atomically
            (``save_pretrained`` of the family); called on rank 0 only.
        callbacks: trainer callbacks.
        final_dir: where the final model goes (default ``<output_dir>/final``).

    Returns:
        :class:`TrainingRun`; every rank returns once rank 0 has written ``final/``.
    """
    with contextlib.ExitStack() as stack:
        if is_main_process():  # the folder stays locked until final/ is written
            stack.enter_context(locked_run_folder(config.output_dir))
        try:
            result = Trainer(model, data, config, callbacks=callbacks).fit()
            target = final_dir if final_dir is not None else result.output_dir / "final"
            if is_main_process():  # in a torchrun job, rank 0 writes
                save_final(target)
        except DiskFullError as exc:  # the same command resumes: say so
            raise exc.with_hint(TRAINING_HINT) from exc.__cause__
    barrier()
    final_metrics = (
        dict(result.history[-1]) if result.history else MetricsLog(result.metrics_path).last()
    )
    return TrainingRun(result=result, final_dir=target, final_metrics=final_metrics)
