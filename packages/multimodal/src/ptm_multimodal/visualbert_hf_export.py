"""Writing ptm's VisualBERT as a Hugging Face ``VisualBertModel`` / ``VisualBertForPreTraining``.

The inverse of :func:`ptm_multimodal.visualbert_hf.hf_visualbert_to_ptm`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from safetensors.torch import save_file
from torch import Tensor

from ptm_core.atomic import atomic_directory
from ptm_core.checkpoints.hf.bert import encoder_config_to_hf, ptm_to_hf_bert
from ptm_core.checkpoints.io import CheckpointError
from ptm_core.models.pretraining import PretrainingModel
from ptm_multimodal.visualbert import VisualBertModel

_PREFIX = "visual_bert."
# ptm objective head -> HF name (VisualBertForPreTraining, without the "visual_bert." prefix
# for the pooler, which belongs to the base model).
_HEADS = {
    "objectives.objectives.itm.head.pooler.dense": "pooler.dense",
    "objectives.objectives.mlm.head.dense": "cls.predictions.transform.dense",
    "objectives.objectives.mlm.head.norm": "cls.predictions.transform.LayerNorm",
    "objectives.objectives.itm.head.classifier": "cls.seq_relationship",
}


def visualbert_config_to_hf(model: VisualBertModel) -> dict[str, Any]:
    """A Hugging Face ``VisualBertConfig`` dict for ``model``.

    Raises:
        CheckpointError: ``box_position=True`` (Hugging Face's VisualBERT has no box term)
            or a pre-LN encoder.
    """
    if model.box_projection is not None:
        raise CheckpointError(
            "config.json field box_position is true: this VisualBERT adds a projected box "
            "encoding that Hugging Face's VisualBertModel does not have; pre-train with "
            "model.box_position=false to export it"
        )
    hf = encoder_config_to_hf(model.encoder.config)
    hf.update(
        model_type="visual_bert",
        architectures=["VisualBertModel"],
        max_position_embeddings=model.text_positions,
        type_vocab_size=model.text_type_vocab_size,
        visual_embedding_dim=model.visual_embedding_dim,
        bypass_transformer=False,
        special_visual_initialize=True,
    )
    hf.pop("position_embedding_type", None)
    return hf


def ptm_to_hf_visualbert(wrapped: PretrainingModel) -> tuple[dict[str, Tensor], str]:
    """HF-named tensors of a ptm VisualBERT with its ``mlm``/``itm`` heads.

    Text position rows ``0..P-1`` become ``position_embeddings``; the visual position row
    ``P`` fills every row of ``visual_position_embeddings`` (Hugging Face reads row 0
    without ``image_text_alignment``); segment rows ``T..2T-1`` become
    ``visual_token_type_embeddings``; the sentence-image classifier rows are swapped
    (ptm: 1 = match; HF: 0 = match).

    Returns:
        ``(state, architecture)``: ``VisualBertForPreTraining`` names (``visual_bert.``
        prefix) when both ``mlm`` and ``itm`` heads are present, else ``VisualBertModel``
        names (with the pooler when ``itm`` is present).
    """
    model = wrapped.encoder
    if not isinstance(model, VisualBertModel):
        raise CheckpointError(f"not a VisualBERT: {type(model).__name__}")
    config = model.encoder.config
    p, t = model.text_positions, model.text_type_vocab_size
    base = ptm_to_hf_bert(model.encoder.state_dict(), config.num_layers)
    positions = base["embeddings.position_embeddings.weight"]
    types = base["embeddings.token_type_embeddings.weight"]
    base["embeddings.position_embeddings.weight"] = positions[:p].clone()
    base["embeddings.visual_position_embeddings.weight"] = positions[p:].expand(p, -1).clone()
    base["embeddings.token_type_embeddings.weight"] = types[:t].clone()
    base["embeddings.visual_token_type_embeddings.weight"] = types[t:].clone()
    base["embeddings.visual_projection.weight"] = model.visual_projection.weight.detach().clone()
    base["embeddings.visual_projection.bias"] = model.visual_projection.bias.detach().clone()
    ours = dict(wrapped.state_dict())
    heads: dict[str, Tensor] = {}
    for name, theirs in _HEADS.items():
        for kind in ("weight", "bias"):
            tensor = ours.get(f"{name}.{kind}")
            if tensor is not None:
                flip = theirs == "cls.seq_relationship"
                heads[f"{theirs}.{kind}"] = (tensor.flip(0) if flip else tensor).detach().clone()
    if "objectives.objectives.mlm.head.decoder.bias" in ours:
        bias = ours["objectives.objectives.mlm.head.decoder.bias"].detach().clone()
        heads["cls.predictions.bias"] = bias
        heads["cls.predictions.decoder.bias"] = bias.clone()
    if "pooler.dense.weight" in heads:
        base["pooler.dense.weight"] = heads.pop("pooler.dense.weight")
        base["pooler.dense.bias"] = heads.pop("pooler.dense.bias")
    full = "cls.seq_relationship.weight" in heads and "cls.predictions.bias" in heads
    if not full:
        return {k: v.contiguous() for k, v in base.items()}, "VisualBertModel"
    state = {_PREFIX + k: v for k, v in base.items()}
    state.update(heads)
    # tied to the word table in transformers; stored as its own copy (safetensors)
    state["cls.predictions.decoder.weight"] = base["embeddings.word_embeddings.weight"].clone()
    return {k: v.contiguous() for k, v in state.items()}, "VisualBertForPreTraining"


def save_hf_visualbert(wrapped: PretrainingModel, path: str | Path) -> str:
    """Write ``config.json`` + ``model.safetensors`` that transformers' VisualBERT loads.

    Args:
        wrapped: the pre-trained VisualBERT with its objectives (``load_multimodal``).
        path: the folder to write (atomically; the tokenizer is written by the caller).

    Returns:
        The architecture written: ``VisualBertForPreTraining`` (``mlm`` and ``itm`` heads)
        or ``VisualBertModel``.

    Raises:
        CheckpointError: a VisualBERT Hugging Face cannot express (``box_position``).
    """
    model = wrapped.encoder
    if not isinstance(model, VisualBertModel):
        raise CheckpointError(f"not a VisualBERT: {type(model).__name__}")
    hf_config = visualbert_config_to_hf(model)
    state, architecture = ptm_to_hf_visualbert(wrapped)
    hf_config["architectures"] = [architecture]
    hf_config["tie_word_embeddings"] = True
    with atomic_directory(path, kind="export") as tmp:
        (tmp / "config.json").write_text(json.dumps(hf_config, indent=2) + "\n")
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    return architecture
