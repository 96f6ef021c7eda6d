"""ptm-text's family specs (torch-free: the ``ptm.families`` entry point imports this).

StructBERT, InfoWord and GLM are objectives on the core ``encoder`` family; SentiLARE is a
family of its own because it reads a labelled corpus and its model reads per-word POS and
polarity inputs, in pre-training and in fine-tuning.
"""

from __future__ import annotations

from ptm_core.families.spec import FamilySpec

SENTILR_KIND = "sentilr"

SENTILR = FamilySpec(
    name="sentilr",
    description="SentiLARE: POS + word polarity inputs, label-aware MLM on a labelled "
    "sentiment corpus (Ke et al., 2020)",
    kinds=(SENTILR_KIND,),
    input_keys=(
        "input_ids",
        "attention_mask",
        "token_type_ids",
        "sentilr_pos",
        "sentilr_polarity",
        "sentilr_label_ids",
    ),
    settings="ptm_text.sentilr.settings:SentiLRSettings",
    plan_pretraining="ptm_text.sentilr.pretraining:plan_sentilr",
    finetune="ptm_text.sentilr.finetune:finetune_sentilr",
    load={SENTILR_KIND: "ptm_text.sentilr.checkpoint:load_sentilr"},
    save={SENTILR_KIND: "ptm_text.sentilr.checkpoint:save_sentilr"},
    evaluation="ptm_text.sentilr.evaluation:SENTILR",
    task_loaders={"sentilr": "ptm_text.sentilr.finetune:load_sentilr_task"},
    predictors={"sentilr": "ptm_text.sentilr.finetune:SentiLRPredictions"},
    recipes={"sentilr": "pretrain"},
)

__all__ = ["SENTILR", "SENTILR_KIND"]
