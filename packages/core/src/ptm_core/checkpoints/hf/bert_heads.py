"""Hugging Face ``BertForPreTraining`` heads <-> ptm's MLM and NSP objectives.

``TransformerEncoder.from_pretrained`` reads a BERT checkpoint's encoder and hands back
the tensors of its heads (``pooler.*``, ``cls.*``); these functions put them into (or take
them out of) a :class:`~ptm_core.objectives.MaskedLMObjective` and a
:class:`~ptm_core.objectives.NextSentenceObjective`, so a published BERT continues
pre-training with its own heads, and ptm and ``transformers`` can be compared on the same
weights.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ptm_core.checkpoints.io import read_weights

if TYPE_CHECKING:
    from ptm_core.objectives.mlm import MaskedLMObjective
    from ptm_core.objectives.nsp import NextSentenceObjective

# ptm name (relative to the objective) <- HF name (``bert.`` prefix stripped).
MLM_HEAD_NAMES = {
    "head.dense.weight": "cls.predictions.transform.dense.weight",
    "head.dense.bias": "cls.predictions.transform.dense.bias",
    "head.norm.weight": "cls.predictions.transform.LayerNorm.weight",
    "head.norm.bias": "cls.predictions.transform.LayerNorm.bias",
    "head.decoder.bias": "cls.predictions.bias",
}
NSP_HEAD_NAMES = {
    "head.pooler.dense.weight": "pooler.dense.weight",
    "head.pooler.dense.bias": "pooler.dense.bias",
    "head.classifier.weight": "cls.seq_relationship.weight",
    "head.classifier.bias": "cls.seq_relationship.bias",
}


def hf_head_state(directory: str) -> dict[str, Tensor]:
    """The head tensors of a Hugging Face BERT directory (HF names, prefix stripped)."""
    from pathlib import Path

    state, _ = read_weights(Path(directory))
    out = {}
    for name, tensor in state.items():
        key = name.removeprefix("bert.")
        key = key.replace("LayerNorm.gamma", "LayerNorm.weight").replace(
            "LayerNorm.beta", "LayerNorm.bias"
        )
        if key.startswith(("cls.", "pooler.")):
            out[key] = tensor
    return out


def load_bert_pretraining_heads(
    heads: dict[str, Tensor],
    mlm: MaskedLMObjective | None = None,
    nsp: NextSentenceObjective | None = None,
) -> list[str]:
    """Copy HF head tensors into the objectives; returns the HF names that were absent.

    Args:
        heads: HF-named head tensors (from :func:`hf_head_state`).
        mlm: the MLM objective whose head is filled (its decoder stays tied to the
            encoder's token table, as in BERT).
        nsp: the NSP objective whose pooler and classifier are filled.
    """
    missing: list[str] = []
    for objective, names in ((mlm, MLM_HEAD_NAMES), (nsp, NSP_HEAD_NAMES)):
        if objective is None:
            continue
        params = dict(objective.named_parameters())
        with torch.no_grad():
            for ours, theirs in names.items():
                if theirs not in heads:
                    missing.append(theirs)
                    continue
                if params[ours].shape != heads[theirs].shape:
                    raise ValueError(
                        f"{theirs}: checkpoint {tuple(heads[theirs].shape)} vs model "
                        f"{tuple(params[ours].shape)}"
                    )
                params[ours].copy_(heads[theirs])
    return missing


def bert_pretraining_heads_to_hf(
    mlm: MaskedLMObjective | None = None, nsp: NextSentenceObjective | None = None
) -> dict[str, Tensor]:
    """HF-named head tensors (without the tied decoder weight) from the objectives."""
    out: dict[str, Tensor] = {}
    for objective, names in ((mlm, MLM_HEAD_NAMES), (nsp, NSP_HEAD_NAMES)):
        if objective is None:
            continue
        params = dict(objective.named_parameters())
        for ours, theirs in names.items():
            out[theirs] = params[ours].detach().clone()
    return out
