"""ViLBERT pre-training from a composed config: ``recipe: vilbert``.

The data side and the training loop are those of ``recipe: visualbert``; the config's
model (``ptm_multimodal.vilbert``) and objectives (``vl_vilbert``) make it ViLBERT.
"""

from __future__ import annotations

from flows.recipes.visualbert import run

__all__ = ["run"]
