"""ptm-core: shared Transformer, pre-training objectives, checkpoints and trainer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ptm_core._lazy import lazy_exports

# Names load on first use (PEP 562): `import ptm_core` alone does not pull in torch,
# so data-preparation workers and the CLI start light.
_EXPORTS = {
    "CheckpointError": "ptm_core.checkpoints",
    "EncoderConfig": "ptm_core.encoders",
    "EncoderOutput": "ptm_core.encoders",
    "TransformerEncoder": "ptm_core.encoders",
    "bert_base": "ptm_core.encoders",
    "bert_encoder": "ptm_core.encoders",
    "bert_mini": "ptm_core.encoders",
    "bert_tiny": "ptm_core.encoders",
}

if TYPE_CHECKING:
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


__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)

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
