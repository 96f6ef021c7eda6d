"""XNLG (Chi et al., 2020): cross-lingual generation pre-trained in two stages.

Stage 1 is XLM (MLM + TLM, :mod:`ptm_multilingual.pretraining`); stage 2
(:mod:`~ptm_multilingual.xnlg.pretraining`) trains a language-conditioned decoder
(:mod:`~ptm_multilingual.xnlg.model`) under the frozen stage-1 encoder with cross-lingual
and denoising auto-encoding (:mod:`~ptm_multilingual.xnlg.objective`,
:mod:`~ptm_multilingual.xnlg.noise`); :mod:`~ptm_multilingual.xnlg.finetune` fine-tunes on
generation in one language and generates in the others (BLEU/ROUGE:
:mod:`~ptm_multilingual.xnlg.metrics`). The family's spec is
:data:`ptm_multilingual.families.XNLG`.
"""

from __future__ import annotations

from ptm_multilingual.xnlg.model import XNLGModel
from ptm_multilingual.xnlg.noise import DenoisingNoise
from ptm_multilingual.xnlg.objective import XNLGObjective, XNLGRow

__all__ = ["DenoisingNoise", "XNLGModel", "XNLGObjective", "XNLGRow"]
