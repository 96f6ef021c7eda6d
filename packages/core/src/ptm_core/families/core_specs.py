"""ptm-core's Transformer families: text encoders, XLNet, encoder-decoders, distillation.

Registered by entry point (``packages/core/pyproject.toml``); imports only the spec, every
hook is a ``"module:attribute"`` string.

Distillation (DistilBERT, TinyBERT) is a family of its own with no kind: it pre-trains in
a different way (a teacher first, then a student whose objectives read the teacher) and has
settings no other run has (the ``distill`` block), but what it saves is a plain text
encoder, so its ``final/`` is loaded, evaluated and fine-tuned by the ``encoder`` family.
"""

from __future__ import annotations

from ptm_core.families.modernbert_spec import MODERNBERT
from ptm_core.families.spec import FamilySpec

_SETTINGS = "ptm_core.families.core_settings"
_TEXT_INPUTS = ("input_ids", "attention_mask", "position_ids", "token_type_ids", "extra_embeds")
_FINETUNE = "ptm_core.finetune.family:finetune_encoder"
_RECOGNIZES = "ptm_core.families.core_folders"
_EXPORT = "ptm_core.checkpoints.hf.export:export_hf"

ENCODER = FamilySpec(
    name="encoder",
    description="Transformer text encoders: BERT, RoBERTa, ALBERT, ELECTRA, SpanBERT, UniLM, GPT",
    kinds=("encoder",),
    input_keys=_TEXT_INPUTS,
    settings=f"{_SETTINGS}:TextSettings",
    plan_pretraining="ptm_core.text_pretraining:plan_encoder_pretraining",
    finetune=_FINETUNE,
    load={"encoder": "ptm_core.checkpoints.encoder:load_encoder"},
    save={"encoder": "ptm_core.checkpoints.encoder:save_encoder"},
    evaluation="ptm_core.evaluation.kinds:ENCODER_EVALUATIONS",
    export=_EXPORT,
    recognizes=f"{_RECOGNIZES}:is_encoder_folder",
    hf_model_types={
        "bert": "ptm_core.checkpoints.hf.bert",
        "albert": "ptm_core.checkpoints.hf.albert",
        "electra": "ptm_core.checkpoints.hf.electra",
        "roberta": "ptm_core.checkpoints.hf.roberta",
        "xlm-roberta": "ptm_core.checkpoints.hf.roberta",
        "distilbert": "ptm_core.checkpoints.hf.distilbert",
    },
    # `ptm finetune` (finetune.yaml): the init_from folder's family fine-tunes, this one
    # when the folder names none (a Hugging Face BERT) or a preset is built from scratch.
    recipes={"text": "pretrain", "finetune": "finetune"},
)

XLNET = FamilySpec(
    name="xlnet",
    description="XLNet: permutation LM, two-stream attention, segment recurrence",
    kinds=("xlnet",),
    input_keys=(*_TEXT_INPUTS, "query_positions", "query_attention_mask", "memory_mask"),
    settings=f"{_SETTINGS}:TextSettings",
    plan_pretraining="ptm_core.text_pretraining:plan_xlnet_pretraining",
    finetune=_FINETUNE,
    load={"xlnet": "ptm_core.checkpoints.encoder:load_encoder"},
    save={"xlnet": "ptm_core.checkpoints.encoder:save_encoder"},
    evaluation="ptm_core.evaluation.kinds:PERMUTATION_LM",
    export=_EXPORT,
    recognizes=f"{_RECOGNIZES}:is_xlnet_folder",
    hf_model_types={"xlnet": "ptm_core.checkpoints.hf.xlnet"},
)

SEQ2SEQ = FamilySpec(
    name="seq2seq",
    description="Encoder-decoders: BART, T5, MASS",
    kinds=("encoder_decoder",),
    input_keys=("input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask"),
    settings=f"{_SETTINGS}:Seq2SeqSettings",
    plan_pretraining="ptm_core.seq2seq_pretraining:plan_seq2seq_pretraining",
    finetune="ptm_core.finetune.family:finetune_encoder_decoder",
    load={"encoder_decoder": "ptm_core.checkpoints.seq2seq:load_seq2seq"},
    save={"encoder_decoder": "ptm_core.checkpoints.seq2seq:save_seq2seq"},
    evaluation="ptm_core.evaluation.kinds:SEQ2SEQ",
    export=_EXPORT,
    recognizes=f"{_RECOGNIZES}:is_seq2seq_folder",
    recipes={"seq2seq": "pretrain"},
)

DISTILL = FamilySpec(
    name="distill",
    description="Distillation into a smaller encoder: DistilBERT, TinyBERT (saves an encoder)",
    input_keys=_TEXT_INPUTS,
    settings=f"{_SETTINGS}:DistillSettings",
    plan_pretraining="ptm_core.distill_pretraining:plan_distillation",
    recipes={"distill": "pretrain"},
)

FAMILIES = (ENCODER, XLNET, SEQ2SEQ, DISTILL, MODERNBERT)
