"""ptm-core: shared Transformer, pre-training objectives, checkpoints and trainer."""

from ptm_core.checkpoints import CheckpointError
from ptm_core.encoders import (
    EncoderConfig,
    EncoderOutput,
    TransformerEncoder,
    bert_base,
    bert_encoder,
    bert_mini,
    bert_tiny,
)

__all__ = [
    "CheckpointError",
    "EncoderConfig",
    "EncoderOutput",
    "TransformerEncoder",
    "bert_base",
    "bert_encoder",
    "bert_mini",
    "bert_tiny",
]
__version__ = "0.1.0"
