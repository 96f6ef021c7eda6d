"""Looking inside a trained model: masked-LM scoring for probes (``ptm analyze``)."""

from ptm_core.analysis.masked_lm_model import MaskedLanguageModel, load_masked_language_model

__all__ = ["MaskedLanguageModel", "load_masked_language_model"]
