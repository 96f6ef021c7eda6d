"""The ``final/`` folder of a VisualBERT, ViLBERT or LXMERT pre-training: save and load.

``model.safetensors`` (network + objective heads, as the generic
:class:`~ptm_core.models.pretraining.PretrainingModel` names them), ``config.json``
(``"ptm_model"``, ``architecture``, the builder's numbers, ``feature_spec``, the
objectives) and the tokenizer files. These are the families' ``load``/``save`` hooks.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import safetensors.torch

from ptm_core.atomic import atomic_directory
from ptm_core.checkpoints import CheckpointError, read_weights
from ptm_core.encoders import EncoderConfig, TransformerEncoder
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer, load_task_tokenizer
from ptm_core.model_kinds import KIND_KEY
from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives import MaskedLMObjective, Objective, ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_multimodal.alignment import AlignmentObjective
from ptm_multimodal.checkpoint_kinds import NOT_NUMBERS, current_names, with_model_kind
from ptm_multimodal.families import INPUT_KEYS
from ptm_multimodal.feature_spec import FeatureSpec
from ptm_multimodal.imagebert import ImageBertModel
from ptm_multimodal.lxmert import lxmert
from ptm_multimodal.matching import ImageTextMatchObjective
from ptm_multimodal.region_masking import MaskedRegionObjective
from ptm_multimodal.vilbert import vilbert
from ptm_multimodal.visualbert import VisualBertModel
from ptm_multimodal.vlbert import VlbertModel

OBJECTIVE_CLASSES: dict[str, type[Objective]] = {
    cls.__name__: cls
    for cls in (
        MaskedLMObjective,
        ImageTextMatchObjective,
        MaskedRegionObjective,
        AlignmentObjective,
    )
}


def _build(config: dict[str, Any], source: str):
    spec = config.get("feature_spec")
    feature_spec = None if spec is None else FeatureSpec.from_dict(spec, source=source)
    architecture = config.get("architecture")
    if architecture == "visualbert":
        encoder = TransformerEncoder(EncoderConfig.from_dict(config["encoder"], source=source))
        return VisualBertModel(
            encoder,
            config["visual_embedding_dim"],
            text_positions=config["text_positions"],
            text_type_vocab_size=config["text_type_vocab_size"],
            box_position=config["box_position"],
            feature_spec=feature_spec,
        )
    if architecture == "imagebert":
        encoder = TransformerEncoder(EncoderConfig.from_dict(config["encoder"], source=source))
        return ImageBertModel(
            encoder,
            config["visual_embedding_dim"],
            text_positions=config["text_positions"],
            text_type_vocab_size=config["text_type_vocab_size"],
            feature_spec=feature_spec,
        )
    if architecture == "vlbert":
        encoder = TransformerEncoder(EncoderConfig.from_dict(config["encoder"], source=source))
        return VlbertModel(
            encoder,
            config["visual_embedding_dim"],
            text_positions=config["text_positions"],
            text_type_vocab_size=config["text_type_vocab_size"],
            visual_scale_init=config["visual_scale_init"],
            feature_spec=feature_spec,
            # folders saved before text-only rows have no e_text
            text_only_rows=config.get("text_only_rows", False),
        )
    if architecture == "vilbert":
        numbers = {
            k: v for k, v in config.items() if k not in ("architecture", "objectives", KIND_KEY)
        }
        numbers["feature_spec"] = feature_spec
        return vilbert(**numbers)
    if architecture == "lxmert":  # a fine-tuned LXMERT's backbone (no objective heads)
        numbers = {k: v for k, v in config.items() if k not in NOT_NUMBERS}
        return lxmert(**numbers, feature_spec=feature_spec)
    raise CheckpointError(
        f"{source}: field 'architecture' is {architecture!r}; expected 'visualbert', "
        "'vilbert', 'vlbert', 'imagebert' or 'lxmert'"
    )


def load_multimodal(
    directory: str | Path, *, features: FeatureSpec | None = None
) -> tuple[PretrainingModel, TaskTokenizer]:
    """Rebuild a trained VisualBERT/ViLBERT/LXMERT with its heads and tokenizer.

    Objectives are rebuilt from the class names in ``config.json`` with their default
    settings (head shapes only depend on the model and the feature spec, except a
    ``MaskedRegionObjective`` trained with ``target="classes"``, whose missing feature
    head is reported as an error).

    Args:
        directory: a ``final/`` directory (``config.json``, ``model.safetensors``, tokenizer).
        features: the features you are about to feed; checked against the checkpoint's
            ``feature_spec``.

    Raises:
        FeatureMismatchError: ``features`` differ from the checkpoint's.
        CheckpointError: an unreadable config, unknown architecture/objective, a truncated
            or damaged weights file, or tensors that do not fit.
    """
    directory = Path(directory)
    source = str(directory / "config.json")
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(
            f"{source}: cannot read the config ({type(exc).__name__}: {exc}); is {directory} "
            "a final/ directory of ptm pretrain experiment=visualbert_tiny (vilbert, lxmert)?"
        ) from None
    if isinstance(config, dict) and config.get("architecture") == "lxmert":
        # LXMERT's heads are sized from its weights (ptm_multimodal.lxmert_loading).
        from ptm_multimodal.lxmert_loading import load_lxmert

        return load_lxmert(directory, features=features)
    model = _build(config, source)
    if features is not None:
        model.check_features(features, source="the given features")
    tokenizer = load_task_tokenizer(directory)
    vocab = tokenizer.vocab_info
    objectives: dict[str, Objective] = {}
    weights: dict[str, float] = {}
    for name, entry in config.get("objectives", {}).items():
        cls = OBJECTIVE_CLASSES.get(entry.get("class"))
        if cls is None:
            raise CheckpointError(
                f"{source}: objective {name!r} has class {entry.get('class')!r}; known: "
                f"{sorted(OBJECTIVE_CLASSES)}"
            )
        # settings the heads' use depends on (MaskedRegionObjective's target, class_loss)
        factory = functools.partial(cls, **entry.get("settings", {}))
        objectives[name] = build_objective(factory, model, vocab)
        weights[name] = float(entry.get("weight", 1.0))
    wrapped = PretrainingModel(model, ObjectiveMix(objectives, weights), input_keys=INPUT_KEYS)
    # read_weights turns a truncated or damaged file into a one-line CheckpointError.
    state, _ = read_weights(directory)
    missing, unexpected = wrapped.load_state_dict(current_names(state), strict=False)
    # the MLM decoder is tied to the word table; safetensors stores the shared tensor once
    missing = [k for k in missing if not k.endswith("head.decoder.weight")]
    if missing or unexpected:
        raise CheckpointError(
            f"{directory / 'model.safetensors'}: missing tensors {missing}, unknown {unexpected}"
        )
    return wrapped, tokenizer


def _objective_record(objective: Objective, weight: float) -> dict[str, Any]:
    record: dict[str, Any] = {"class": type(objective).__name__, "weight": weight}
    settings = getattr(type(objective), "checkpoint_settings", None)
    if settings is not None:
        record["settings"] = settings(objective)
    return record


def checkpoint_config(model: PretrainingModel) -> dict[str, Any]:
    """What ``config.json`` records: the network's own config (architecture, numbers,
    feature spec), the objectives and the ``"ptm_model"`` kind."""
    network: Any = model.encoder
    return with_model_kind(
        {
            **network.checkpoint_config(),
            "objectives": {
                name: _objective_record(obj, model.objectives.weights[name])
                for name, obj in model.objectives
            },
        }
    )


def load_pretrained(directory: str | Path, **options: Any) -> PretrainingModel:
    """The families' ``load`` hook: :func:`load_multimodal`'s model, carrying the folder's
    tokenizer as ``model.tokenizer`` (so :func:`save_multimodal` writes a whole folder)."""
    model, tokenizer = load_multimodal(directory, **options)
    model.tokenizer = tokenizer  # type: ignore[assignment]
    return model


def save_multimodal(
    model: PretrainingModel,
    directory: str | Path,
    *,
    tokenizer: TaskTokenizer | None = None,
) -> Path:
    """Write ``model`` (network + objective heads) and its tokenizer as a ``final/`` that
    :func:`load_multimodal` reads, atomically (the families' ``save`` hook).

    Args:
        model: the network and its objectives.
        directory: the folder to write.
        tokenizer: the captions' tokenizer (default: the one :func:`load_pretrained` put
            on the model).

    Returns:
        ``directory``.

    Raises:
        ValueError: no tokenizer given and none on the model.
    """
    tokenizer = tokenizer or getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise ValueError("save_multimodal needs tokenizer= (the captions' tokenizer)")
    directory = Path(directory)
    with atomic_directory(directory) as tmp:
        safetensors.torch.save_model(model, str(tmp / "model.safetensors"))
        (tmp / "config.json").write_text(
            json.dumps(checkpoint_config(model), indent=2, sort_keys=True) + "\n"
        )
        tokenizer.save(tmp)
    return directory
