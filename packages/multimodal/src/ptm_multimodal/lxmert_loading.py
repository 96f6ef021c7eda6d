"""Loading a ptm LXMERT ``final/`` (``ptm pretrain experiment=lxmert_*``) with its heads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch import Tensor

from ptm_core.checkpoints import CheckpointError, read_weights
from ptm_core.finetune.data.task_tokenizer import TaskTokenizer, load_task_tokenizer
from ptm_core.models.pretraining import PretrainingModel
from ptm_core.objectives import Objective, ObjectiveMix
from ptm_core.objectives.inputs import build_objective
from ptm_core.tokenization import VocabInfo
from ptm_multimodal.checkpoint_kinds import NOT_NUMBERS, current_names
from ptm_multimodal.families import INPUT_KEYS
from ptm_multimodal.feature_spec import FeatureSpec
from ptm_multimodal.lxmert import lxmert
from ptm_multimodal.lxmert_pretraining import (
    LxmertImageQAObjective,
    LxmertMaskedLMObjective,
    LxmertMatchingObjective,
    LxmertObjectPredictionObjective,
)

OBJECTIVE_CLASSES: dict[str, type[Objective]] = {
    cls.__name__: cls
    for cls in (
        LxmertMaskedLMObjective,
        LxmertObjectPredictionObjective,
        LxmertMatchingObjective,
        LxmertImageQAObjective,
    )
}


def build_lxmert_pretraining(
    numbers: dict[str, Any],
    vocab: VocabInfo | None,
    heads: dict[str, dict[str, Any]],
    *,
    feature_spec: FeatureSpec | None = None,
    weights: dict[str, float] | None = None,
) -> PretrainingModel:
    """An LXMERT with the objectives ``heads`` names (``name -> {"class", **settings}``)."""
    model = lxmert(**numbers, feature_spec=feature_spec)
    objectives: dict[str, Objective] = {}
    for name, entry in heads.items():
        settings = dict(entry)
        cls = OBJECTIVE_CLASSES[settings.pop("class")]
        objectives[name] = build_objective(cls, model, vocab, **settings)
    return PretrainingModel(model, ObjectiveMix(objectives, weights), input_keys=INPUT_KEYS)


def load_checked(
    wrapped: PretrainingModel,
    state: dict[str, Tensor],
    directory: Path,
    *,
    allow_missing: tuple[str, ...] = (),
) -> None:
    """Load ``state`` into ``wrapped``; missing or unknown tensors are a :class:`CheckpointError`.

    Folders written before the family spec name the network ``model.`` (now ``encoder.``).
    """
    missing, unexpected = wrapped.load_state_dict(current_names(state), strict=False)
    # the LM decoder is tied to the word table; safetensors stores the shared tensor once
    missing = [
        k
        for k in missing
        if not k.endswith("head.decoder.weight") and not any(a in k for a in allow_missing)
    ]
    if missing or unexpected:
        raise CheckpointError(
            f"{directory}: LXMERT tensors missing {missing}, unknown {unexpected}"
        )


def load_lxmert(
    directory: str | Path, *, features: FeatureSpec | None = None
) -> tuple[PretrainingModel, TaskTokenizer]:
    """Rebuild an LXMERT ``final/`` (``ptm pretrain experiment=lxmert_*``) with its heads.

    Head sizes (answers, detector classes, which object decoders) are read from the
    weights' shapes, so the objectives' data-side settings are their defaults.

    Raises:
        FeatureMismatchError: ``features`` differ from the checkpoint's.
        CheckpointError: an unreadable config, not an LXMERT, or tensors that do not fit.
    """
    directory = Path(directory)
    source = str(directory / "config.json")
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{source}: cannot read the config ({exc})") from None
    if config.get("architecture") != "lxmert":
        raise CheckpointError(
            f"{source}: field 'architecture' is {config.get('architecture')!r}, expected 'lxmert'"
        )
    spec = config.get("feature_spec")
    feature_spec = None if spec is None else FeatureSpec.from_dict(spec, source=source)
    state = current_names(read_weights(directory)[0])
    numbers = {k: v for k, v in config.items() if k not in NOT_NUMBERS}
    tokenizer = load_task_tokenizer(directory)
    heads: dict[str, dict[str, Any]] = {}
    weights: dict[str, float] = {}
    for name, entry in config.get("objectives", {}).items():
        cls = entry.get("class")
        if cls not in OBJECTIVE_CLASSES:
            raise CheckpointError(
                f"{source}: objective {name!r} has class {cls!r}; known: {sorted(OBJECTIVE_CLASSES)}"
            )
        settings: dict[str, Any] = {"class": cls}
        p = f"objectives.objectives.{name}.head."
        if cls == "LxmertImageQAObjective":
            rows = state[f"{p}out.weight"].shape[0]
            answers = entry.get("settings", {}).get("answer_token_ids")
            if answers is not None and len(answers) != rows:
                raise CheckpointError(
                    f"{source}: objective {name!r} lists {len(answers)} answer_token_ids but "
                    f"its head has {rows} answers; the config and the weights come from "
                    "different runs"
                )
            settings["num_answers" if answers is None else "answer_token_ids"] = (
                rows if answers is None else list(answers)
            )
        if cls == "LxmertObjectPredictionObjective":
            sizes = {
                k: state[f"{p}decoders.{k}.weight"].shape[0]
                for k in ("obj", "attr", "feat")
                if f"{p}decoders.{k}.weight" in state
            }
            settings.update(
                num_classes=sizes.get("obj", 0),
                num_attributes=sizes.get("attr", 0),
                feature_regression="feat" in sizes,
            )
        heads[name] = settings
        weights[name] = float(entry.get("weight", 1.0))
    wrapped = build_lxmert_pretraining(
        numbers, tokenizer.vocab_info, heads, feature_spec=feature_spec, weights=weights
    )
    if features is not None:
        wrapped.encoder.check_features(features, source="the given features")  # type: ignore[operator]
    load_checked(wrapped, state, directory)
    return wrapped, tokenizer
