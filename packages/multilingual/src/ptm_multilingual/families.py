"""The ``xlm`` family's spec (Lample & Conneau, 2019): the only thing core and flows know of it.

Registered through the ``ptm.families`` entry point in this package's ``pyproject.toml``.
This module imports only :mod:`ptm_core.families.spec` and the standard library: hooks are
``"module:attribute"`` strings, so listing families loads no torch.

- pre-training (``recipe: xlm``, ``experiment=xlm_mlm_tiny``/``xlm_tlm_tiny``):
  :func:`ptm_multilingual.pretraining.plan_xlm_pretraining`;
- zero-shot fine-tuning (``recipe: xlm_finetune``, ``experiment=xlm_zero_shot``):
  :func:`ptm_multilingual.finetune_run.finetune_xlm`;
- folders: ``"ptm_model": "xlm"`` (:mod:`ptm_multilingual.checkpoint`); a folder written
  before the key is recognised by its ``ptm_format`` (:func:`recognizes_xlm`).

The ``xnlg`` family (Chi et al., 2020; :mod:`ptm_multilingual.xnlg`) starts from an XLM
``final/``: stage 2 (``recipe: xnlg``, ``experiment=xnlg_tiny``) and generation fine-tuning
(``recipe: xnlg_finetune``, ``experiment=xnlg_zero_shot``); its folders say
``"ptm_model": "xnlg"``.
"""

from __future__ import annotations

import json
from pathlib import Path

from ptm_core.families.spec import FamilySpec
from ptm_multilingual import kinds

# Mirrors ptm_multilingual.model.PTM_XLM_FORMAT's prefix; importing the model loads torch.
_FORMAT_PREFIX = "ptm-xlm"


def recognizes_xlm(path: str | Path) -> bool:
    """Whether ``path`` is an XLM folder saved before ``config.json`` carried ``"ptm_model"``
    (its ``ptm_format`` is ``ptm-xlm-*``), or a Hugging Face XLM folder with ptm's shared
    tokenizer (``languages.json``)."""
    directory = Path(path)
    try:
        raw = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(raw, dict):
        return False
    if str(raw.get("ptm_format", "")).startswith(_FORMAT_PREFIX):
        return True
    return raw.get("model_type") == "xlm" and (directory / "languages.json").is_file()


XLM = FamilySpec(
    name="xlm",
    description="XLM: cross-lingual MLM + TLM with language embeddings (Lample & Conneau, 2019)",
    kinds=(kinds.XLM,),
    input_keys=("input_ids", "attention_mask", "position_ids", "langs"),
    settings="ptm_multilingual.settings:XLMSettings",
    plan_pretraining="ptm_multilingual.pretraining:plan_xlm_pretraining",
    finetune="ptm_multilingual.finetune_run:finetune_xlm",
    predictors={"xlm": "ptm_multilingual.predict_rows:predict_xlm_rows"},
    load={kinds.XLM: "ptm_multilingual.checkpoint:load_xlm"},
    save={kinds.XLM: "ptm_multilingual.checkpoint:save_xlm"},
    evaluation="ptm_multilingual.evaluation_kinds:XLM",
    export="ptm_multilingual.hf_export:export_xlm",
    recognizes="ptm_multilingual.families:recognizes_xlm",
    recipes={"xlm": "pretrain", "xlm_finetune": "finetune"},
)

XNLG = FamilySpec(
    name="xnlg",
    description=(
        "XNLG: cross-lingual generation, XLM encoder + a decoder pre-trained with XAE + DAE "
        "under it (Chi et al., 2020)"
    ),
    kinds=(kinds.XNLG,),
    input_keys=(
        "input_ids",
        "attention_mask",
        "langs",
        "decoder_input_ids",
        "decoder_attention_mask",
        "decoder_langs",
    ),
    settings="ptm_multilingual.xnlg.settings:XNLGSettings",
    plan_pretraining="ptm_multilingual.xnlg.pretraining:plan_xnlg_pretraining",
    finetune="ptm_multilingual.xnlg.finetune:finetune_xnlg",
    load={kinds.XNLG: "ptm_multilingual.xnlg.checkpoint:load_xnlg"},
    save={kinds.XNLG: "ptm_multilingual.xnlg.checkpoint:save_xnlg"},
    evaluation="ptm_multilingual.xnlg.evaluation:XNLG",
    recipes={"xnlg": "pretrain", "xnlg_finetune": "finetune"},
)

__all__ = ["XLM", "XNLG", "recognizes_xlm"]
