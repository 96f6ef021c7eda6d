"""ptm-multimodal's families: VisualBERT, ViLBERT, LXMERT, VL-BERT and ImageBERT (entry points
``ptm.families``).

Only strings here (no torch, no model): ``ptm --help`` and ``read_model_kind`` list these
specs without loading the package. All four pre-train on image-text pairs through one
plan (:func:`ptm_multimodal.pretraining.plan_pretraining`) and save one folder format
(:mod:`ptm_multimodal.loading`); the config's model and objectives make the family.
VisualBERT, ViLBERT, VL-BERT and LXMERT fine-tune on image-text tasks (``recipe: multimodal_finetune``; the
``init_from`` folder's kind picks the family).
"""

from __future__ import annotations

from ptm_core.families.spec import FamilySpec

#: The batch keys every multimodal network's forward reads.
INPUT_KEYS = (
    "input_ids",
    "visual_features",
    "attention_mask",
    "token_type_ids",
    "visual_boxes",
    "visual_mask",
)
_SETTINGS = "ptm_multimodal.settings:ImageTextSettings"
_PLAN = "ptm_multimodal.pretraining:plan_pretraining"
_LOAD = "ptm_multimodal.loading:load_pretrained"
_SAVE = "ptm_multimodal.loading:save_multimodal"

VISUALBERT = FamilySpec(
    name="visualbert",
    description="VisualBERT: one stream over caption tokens and image regions (Li et al., 2019)",
    kinds=("visualbert",),
    input_keys=INPUT_KEYS,
    settings=_SETTINGS,
    plan_pretraining=_PLAN,
    finetune="ptm_multimodal.finetune:finetune_visualbert",
    predictors={"multimodal": "ptm_multimodal.predict_rows:predict_image_text_rows"},
    load={"visualbert": _LOAD},
    save={"visualbert": _SAVE},
    recognizes="ptm_multimodal.checkpoint_kinds:is_visualbert",
    evaluation="ptm_multimodal.evaluation_kinds:EVALUATIONS",
    export="ptm_multimodal.hf_export:export_visualbert",
    recipes={"visualbert": "pretrain", "multimodal_finetune": "finetune"},
)
VILBERT = FamilySpec(
    name="vilbert",
    description="ViLBERT: text and image streams joined by co-attention (Lu et al., 2019)",
    kinds=("vilbert",),
    input_keys=INPUT_KEYS,
    settings=_SETTINGS,
    plan_pretraining=_PLAN,
    finetune="ptm_multimodal.finetune:finetune_vilbert",
    load={"vilbert": _LOAD},
    save={"vilbert": _SAVE},
    recognizes="ptm_multimodal.checkpoint_kinds:is_vilbert",
    evaluation="ptm_multimodal.evaluation_kinds:EVALUATIONS",
    recipes={"vilbert": "pretrain"},
)
LXMERT = FamilySpec(
    name="lxmert",
    description="LXMERT: language, object and cross-modality encoders (Tan & Bansal, 2019)",
    kinds=("lxmert",),
    input_keys=INPUT_KEYS,
    settings=_SETTINGS,
    plan_pretraining=_PLAN,
    load={"lxmert": _LOAD},
    save={"lxmert": _SAVE},
    finetune="ptm_multimodal.finetune:finetune_lxmert",
    recognizes="ptm_multimodal.checkpoint_kinds:is_lxmert",
    evaluation="ptm_multimodal.evaluation_kinds:EVALUATIONS",
    export="ptm_multimodal.hf_export:export_lxmert",
    recipes={"lxmert": "pretrain"},
)
VLBERT = FamilySpec(
    name="vlbert",
    description="VL-BERT: one stream where every element carries a visual feature (Su et al., 2020)",
    kinds=("vlbert",),
    input_keys=INPUT_KEYS,
    settings=_SETTINGS,
    plan_pretraining=_PLAN,
    finetune="ptm_multimodal.finetune:finetune_vlbert",
    evaluation="ptm_multimodal.evaluation_kinds:VLBERT_PRETRAINED",
    load={"vlbert": _LOAD},
    save={"vlbert": _SAVE},
    recipes={"vlbert": "pretrain"},
)
IMAGEBERT = FamilySpec(
    name="imagebert",
    description="ImageBERT: one stream over captions and located regions, multi-stage "
    "pre-training (Qi et al., 2020)",
    kinds=("imagebert",),
    input_keys=INPUT_KEYS,
    settings=_SETTINGS,
    plan_pretraining=_PLAN,
    finetune="ptm_multimodal.finetune:finetune_imagebert",
    evaluation="ptm_multimodal.evaluation_kinds:IMAGEBERT_PRETRAINED",
    load={"imagebert": _LOAD},
    save={"imagebert": _SAVE},
    recipes={"imagebert": "pretrain"},
)
FAMILIES = (VISUALBERT, VILBERT, LXMERT, VLBERT, IMAGEBERT)
