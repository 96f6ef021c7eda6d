"""Feature extraction from frozen pre-trained encoders (ELMo-style)."""

from ptm_core.features.frozen import FrozenEncoderFeatures

__all__ = ["FrozenEncoderFeatures"]
