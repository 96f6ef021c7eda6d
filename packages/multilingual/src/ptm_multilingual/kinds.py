"""The ``"ptm_model"`` kind ptm-multilingual saves (torch-free: specs and registries read it).

An XLM ``final/`` (:meth:`~ptm_multilingual.model.XLMEncoder.save_pretrained`) says
``"ptm_model": "xlm"`` in its ``config.json``; folders written before the key existed are
recognised by :func:`ptm_multilingual.families.recognizes_xlm`.
"""

from __future__ import annotations

XLM = "xlm"
#: An XNLG encoder-decoder (:class:`ptm_multilingual.xnlg.model.XNLGModel`).
XNLG = "xnlg"

__all__ = ["XLM", "XNLG"]
