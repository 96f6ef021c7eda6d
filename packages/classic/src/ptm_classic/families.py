"""ptm-classic's model families, registered by entry point (``ptm.families`` in
``packages/classic/pyproject.toml``).

Light on purpose: only the spec type and the kind names are imported, every hook is a ``"module:attribute"``
string, so listing the families (``ptm families``, ``read_model_kind``) loads no torch.

Static embeddings (word2vec, GloVe, NNLM) have a ``pretrain`` hook, not a plan: word2vec
(gensim) and GloVe train in their own loops, not a network for the one Trainer. Their
``final/`` is a vector table (``ptm_core.data.vector_table``), which no spec loads as a
model: the Transformer families read it through ``init_embeddings``.
"""

from __future__ import annotations

from ptm_classic import kinds
from ptm_core.families.spec import FamilySpec

_RECURRENT = "ptm_classic.recurrent"

AWD_LSTM = FamilySpec(
    name="awd_lstm",
    description="AWD-LSTM language model (ULMFiT stage 1) and ULMFiT's classifier",
    kinds=(kinds.AWD_LSTM,),
    input_keys=("input_ids", "labels", "reset"),
    settings="ptm_classic.settings:AWDLSTMSettings",
    plan_pretraining=f"{_RECURRENT}.awd_lstm_pretrain:plan_awd_lstm",
    finetune=f"{_RECURRENT}.ulmfit:finetune_awd_lstm",
    load={kinds.AWD_LSTM: f"{_RECURRENT}.folders:load_awd_lstm"},
    save={kinds.AWD_LSTM: f"{_RECURRENT}.folders:save_awd_lstm"},
    evaluation="ptm_classic.evaluation_kinds:AWD_LSTM",
    recognizes=f"{_RECURRENT}.ulmfit:is_awd_lstm_directory",
    task_loaders={"ulmfit": f"{_RECURRENT}.ulmfit:load_ulmfit_classifier"},
    recipes={"awd_lstm": "pretrain"},
)

ELMO = FamilySpec(
    name="elmo",
    description="ELMo's biLM: char CNN + forward and backward LSTMP language models",
    kinds=(kinds.ELMO,),
    input_keys=("char_ids", "attention_mask", "word_targets"),
    settings="ptm_classic.settings:ElmoSettings",
    plan_pretraining=f"{_RECURRENT}.elmo_pretraining:plan_elmo",
    load={kinds.ELMO: f"{_RECURRENT}.folders:load_elmo"},
    save={kinds.ELMO: f"{_RECURRENT}.folders:save_elmo"},
    evaluation="ptm_classic.evaluation_kinds:ELMO",
    recipes={"elmo": "pretrain"},
)

STATIC_EMBEDDINGS = FamilySpec(
    name="static_embeddings",
    description="Static word vectors: word2vec (gensim), GloVe, NNLM (model= picks the method)",
    settings="ptm_classic.settings:StaticEmbeddingsSettings",
    pretrain="ptm_classic.static.run:pretrain_static",
    recipes={"static_embeddings": "pretrain"},
)

COVE = FamilySpec(
    name="cove",
    description="CoVe: GloVe -> MT-LSTM -> attentional decoder (translation); fine-tunes "
    "a classifier or tagger on [GloVe; CoVe] with the MT-LSTM frozen",
    kinds=(kinds.COVE,),
    input_keys=("source_ids", "source_mask", "target_ids", "target_labels"),
    settings="ptm_classic.settings:CoVeSettings",
    plan_pretraining="ptm_classic.cove.pretraining:plan_cove",
    finetune="ptm_classic.cove.finetune:finetune_cove",
    load={kinds.COVE: "ptm_classic.cove.translation:load_cove"},
    save={kinds.COVE: "ptm_classic.cove.translation:save_cove_folder"},
    evaluation="ptm_classic.evaluation_kinds:COVE",
    recipes={"cove": "pretrain"},
)

FAMILIES = (AWD_LSTM, ELMO, STATIC_EMBEDDINGS, COVE)
