"""The CogQA family: its model kind and its :class:`~ptm_core.families.FamilySpec`.

Light on purpose (no torch): the ``ptm.families`` entry point imports this module to list
the families, and ``ptm evaluate`` reads the kind from here.

CogQA trains a task system (System 1 reader + System 2 GNN) on labelled multi-hop
questions, from a random-init encoder built by ``model``: the runner's ``finetune`` stage
(:func:`ptm_knowledge.cogqa.run.finetune_cogqa`), which ``recipe: cogqa`` (and so
``ptm pretrain experiment=cogqa_tiny``) selects. It has no self-supervised pre-training.
"""

from __future__ import annotations

from pathlib import Path

from ptm_core.families.spec import FamilySpec

#: The ``"ptm_model"`` kind of a saved CogQA system (``final/``: ``encoder/``,
#: ``heads.safetensors``, ``vocab.txt``, ``cogqa.json``).
COGQA = "cogqa"


def is_cogqa_folder(path: str | Path) -> bool:
    """Whether ``path`` holds a saved CogQA system (its ``cogqa.json``); the folder has no
    ``config.json`` of its own (``encoder/`` has the encoder's)."""
    return (Path(path) / "cogqa.json").is_file()


COGQA_FAMILY = FamilySpec(
    name="cogqa",
    description="CogQA: System 1 span reader + System 2 GNN over a cognitive graph, multi-hop QA",
    kinds=(COGQA,),
    input_keys=("input_ids", "attention_mask", "token_type_ids", "span_mask"),
    settings="ptm_knowledge.cogqa_settings:CogQASettings",
    finetune="ptm_knowledge.cogqa.run:finetune_cogqa",
    load={COGQA: "ptm_knowledge.cogqa.checkpoint:load_cogqa"},
    save={COGQA: "ptm_knowledge.cogqa.checkpoint:save_cogqa"},
    evaluation="ptm_knowledge.evaluation_kinds:COGQA",
    recognizes="ptm_knowledge.family_cogqa:is_cogqa_folder",
    recipes={"cogqa": "finetune"},
)
