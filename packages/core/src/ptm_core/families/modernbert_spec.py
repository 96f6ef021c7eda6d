"""ModernBERT (Warner et al., 2024) as a ptm family: its spec, registered with core's.

The network is :mod:`ptm_core.encoders.modernbert` (the core stack with rotary, GeGLU,
bias-free pre-norm and local/global blocks passed in), the Hugging Face converter
:mod:`ptm_core.checkpoints.hf.modernbert`. Everything else is the text encoders' own:
pre-training with any of ptm's text objectives, fine-tuning for every task kind, the
``ptm evaluate`` scores. This module imports only the spec.
"""

from __future__ import annotations

from ptm_core.families.spec import FamilySpec

MODERNBERT = FamilySpec(
    name="modernbert",
    description="ModernBERT: rotary positions, GeGLU, local/global attention, unpadding",
    kinds=("modernbert",),
    # Positions are rotary and there are no token types: the network reads these two.
    input_keys=("input_ids", "attention_mask"),
    settings="ptm_core.families.core_settings:TextSettings",
    plan_pretraining="ptm_core.text_pretraining:plan_encoder_pretraining",
    finetune="ptm_core.finetune.family:finetune_encoder",
    load={"modernbert": "ptm_core.checkpoints.encoder:load_encoder"},
    save={"modernbert": "ptm_core.checkpoints.encoder:save_encoder"},
    evaluation="ptm_core.evaluation.kinds:MODERNBERT_EVALUATIONS",
    export="ptm_core.checkpoints.hf.export:export_hf",
    hf_model_types={"modernbert": "ptm_core.checkpoints.hf.modernbert"},
)
