"""Loading Hugging Face VisualBERT weights into ptm's VisualBERT."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import Tensor

from ptm_core.checkpoints.hf.bert import hf_bert_to_ptm
from ptm_core.checkpoints.io import CheckpointError, read_weights
from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives import MaskedLMObjective, ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import VocabInfo
from ptm_multimodal.families import INPUT_KEYS
from ptm_multimodal.feature_spec import FeatureSpec
from ptm_multimodal.matching import ImageTextMatchObjective
from ptm_multimodal.visualbert import visualbert


def hf_visualbert_to_ptm(state: dict[str, Tensor], num_layers: int) -> dict[str, Tensor]:
    """Map a Hugging Face ``VisualBertForPreTraining``/``VisualBertModel`` state dict onto
    :class:`~ptm_core.models.pretraining.PretrainingModel` names (``encoder.*``, ``objectives.objectives.mlm.head.*``,
    ``objectives.objectives.itm.head.*``).

    The visual position row kept is ``visual_position_embeddings[0]`` (the only row used
    without ``image_text_alignment``); visual segment rows follow the text rows; the
    sentence-image classifier rows are swapped (HF: 0 = match; ptm: 1 = match).

    Raises:
        CheckpointError: tensors are missing or unknown.
    """
    source = {k.removeprefix("visual_bert."): v for k, v in state.items()}
    text_state, head_state, missing, unknown = hf_bert_to_ptm(
        {k: v for k, v in source.items() if not k.startswith("embeddings.visual_")}, num_layers
    )
    out = {f"encoder.encoder.{k}": v for k, v in text_state.items()}
    try:
        out["encoder.encoder.embeddings.position.weight"] = torch.cat(
            [
                text_state["embeddings.position.weight"],
                source["embeddings.visual_position_embeddings.weight"][:1],
            ]
        )
        out["encoder.encoder.embeddings.token_type.weight"] = torch.cat(
            [
                text_state["embeddings.token_type.weight"],
                source["embeddings.visual_token_type_embeddings.weight"],
            ]
        )
        out["encoder.visual_projection.weight"] = source["embeddings.visual_projection.weight"]
        out["encoder.visual_projection.bias"] = source["embeddings.visual_projection.bias"]
    except KeyError as exc:
        missing.append(str(exc))
    heads = {
        "pooler.dense": "objectives.objectives.itm.head.pooler.dense",
        "cls.predictions.transform.dense": "objectives.objectives.mlm.head.dense",
        "cls.predictions.transform.LayerNorm": "objectives.objectives.mlm.head.norm",
        "cls.seq_relationship": "objectives.objectives.itm.head.classifier",
    }
    for theirs, ours in heads.items():
        for kind in ("weight", "bias"):
            tensor = head_state.get(f"{theirs}.{kind}")
            if tensor is not None:
                out[f"{ours}.{kind}"] = (
                    tensor.flip(0) if theirs == "cls.seq_relationship" else tensor
                )
    if "cls.predictions.bias" in head_state:
        out["objectives.objectives.mlm.head.decoder.bias"] = head_state["cls.predictions.bias"]
    out["objectives.objectives.mlm.head.decoder.weight"] = out[
        "encoder.encoder.embeddings.word.weight"
    ]
    unknown = [k for k in unknown if k not in ("embeddings.visual_projection.weight",)]
    if missing or unknown:
        raise CheckpointError(
            f"not a VisualBERT state dict: missing {sorted(missing)}, unknown {sorted(unknown)}"
        )
    return out


def load_hf_visualbert(
    path: str | Path, vocab: VocabInfo, *, feature_spec: FeatureSpec | None = None
) -> PretrainingModel:
    """Load a Hugging Face VisualBERT directory (``config.json`` + weights) as a
    :class:`~ptm_core.models.pretraining.PretrainingModel` with ``mlm`` and ``itm`` objectives.

    The model is built with ``box_position=False`` (VisualBERT has no box term), so its
    outputs equal Hugging Face's ``VisualBertForPreTraining`` on the same inputs.

    Args:
        path: the checkpoint directory.
        vocab: the tokenizer's special ids (for the MLM objective's data side).
        feature_spec: the features the checkpoint was trained on, if known.

    Raises:
        CheckpointError: not a VisualBERT checkpoint, or tensors missing/unknown.
    """
    directory = Path(path)
    config_path = directory / "config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{config_path}: cannot read the config ({exc})") from None
    if config.get("model_type") != "visual_bert":
        raise CheckpointError(
            f"{config_path}: model_type is {config.get('model_type')!r}, expected 'visual_bert'"
        )
    state, _ = read_weights(directory)
    model = visualbert(
        vocab_size=config["vocab_size"],
        visual_embedding_dim=config["visual_embedding_dim"],
        hidden_size=config["hidden_size"],
        num_layers=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"],
        intermediate_size=config["intermediate_size"],
        max_positions=config["max_position_embeddings"],
        type_vocab_size=config.get("type_vocab_size", 2),
        dropout=config.get("hidden_dropout_prob", 0.1),
        attention_dropout=config.get("attention_probs_dropout_prob", 0.1),
        activation=config.get("hidden_act", "gelu"),
        layer_norm_eps=config.get("layer_norm_eps", 1e-12),
        box_position=False,
        feature_spec=feature_spec,
        pad_token_id=config.get("pad_token_id", 0) or 0,
    )
    mix = ObjectiveMix(
        {
            "mlm": build_objective(MaskedLMObjective, model.encoder, vocab),
            "itm": build_objective(ImageTextMatchObjective, model.encoder, vocab),
        }
    )
    wrapped = PretrainingModel(model, mix, input_keys=INPUT_KEYS)
    mapped = hf_visualbert_to_ptm(state, config["num_hidden_layers"])
    missing, unexpected = wrapped.load_state_dict(mapped, strict=False)
    if missing or unexpected:
        raise CheckpointError(
            f"{directory}: VisualBERT tensors missing {missing} or unknown {unexpected}"
        )
    return wrapped
