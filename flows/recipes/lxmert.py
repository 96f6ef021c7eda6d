"""LXMERT pre-training from a composed config: ``recipe: lxmert``.

The data side (image-text pairs with swapped-sentence negatives) and the training loop are
those of ``recipe: visualbert``; the config's model (``ptm_multimodal.lxmert.lxmert``) and
objectives (``vl_lxmert``: masked cross-modality LM, masked object prediction, matching,
image QA) make it LXMERT. The result is a
:class:`~ptm_multimodal.pretraining.MultimodalPretrainResult` (``final/``, metrics with
each task's loss, matching evaluation).
"""

from __future__ import annotations

from flows.recipes.visualbert import run

__all__ = ["run"]
