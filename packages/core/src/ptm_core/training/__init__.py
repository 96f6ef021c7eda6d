"""Training: the loop, AdamW and its schedule, metrics, checkpoints and exact resume."""

from ptm_core.training.checkpointing import CheckpointError, find_latest_checkpoint, load_checkpoint
from ptm_core.training.config import TrainerConfig
from ptm_core.training.optim import build_optimizer, linear_warmup_decay
from ptm_core.training.protocols import BatchSource, ModelOutput, TrainerCallback
from ptm_core.training.trainer import Trainer, TrainResult

__all__ = [
    "BatchSource",
    "CheckpointError",
    "ModelOutput",
    "TrainResult",
    "Trainer",
    "TrainerCallback",
    "TrainerConfig",
    "build_optimizer",
    "find_latest_checkpoint",
    "linear_warmup_decay",
    "load_checkpoint",
]
