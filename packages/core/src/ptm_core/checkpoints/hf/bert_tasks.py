"""Hugging Face ``...For{SequenceClassification, TokenClassification, QuestionAnswering,
MultipleChoice}`` folders <-> ptm's :class:`~ptm_core.finetune.model.TaskModel`.

BERT's (``BertFor...``), RoBERTa's, XLM-R's and DistilBERT's classes. The encoder goes
through the model type's converter module (:mod:`ptm_core.checkpoints.hf.bert`,
:mod:`~ptm_core.checkpoints.hf.roberta`, ...); the head tensors map one to one by the
tables of :mod:`~ptm_core.checkpoints.hf.task_layouts` (BERT's: ``pooler.dense`` <-
``bert.pooler.dense``, ``classifier``, ``qa_outputs``).

The task comes from the config's ``architectures`` (``problem_type: "regression"`` or one
label makes a sequence classifier a regressor); ``id2label`` becomes the label names and
is written back on export, so a model moves between ptm and ``transformers`` with its
labels. Only BERT's layer layout (post-LN, absolute positions, no sharing or factorised
embeddings) has these classes; other encoders are saved with
:func:`~ptm_core.finetune.model.save_task_model`. An encoder imported from RoBERTa, XLM-R
or DistilBERT exports to that model type's classes again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from safetensors.torch import load_file, save_file

from ptm_core.checkpoints import registry
from ptm_core.checkpoints.hf.task_layouts import (
    BERT,
    TaskLayout,
    all_architectures,
    layout_for_architecture,
    layout_for_config,
)
from ptm_core.checkpoints.io import CheckpointError, check_state, read_json_object, read_weights
from ptm_core.encoders.factory import encoder_from_config
from ptm_core.finetune.model import TaskModel, build_task_model, head_settings

# Hugging Face architecture -> ptm task kind (regression is decided by the config).
HF_TASK_ARCHITECTURES = all_architectures()
_KIND_TO_ARCHITECTURE = {
    kind: BERT.architecture(kind)
    for kind in ("classification", "regression", "tagging", "qa", "multiple_choice")
}
# ptm head parameter name -> Hugging Face tensor name, per kind (BERT's classes).
HEAD_NAMES: dict[str, Mapping[str, str]] = {
    kind: BERT.names(kind) for kind in _KIND_TO_ARCHITECTURE
}


def _read_config(path: Path) -> dict[str, Any]:
    return read_json_object(
        path,
        "a Hugging Face model folder holds config.json and model.safetensors (save it with "
        "model.save_pretrained(folder))",
    )


def hf_task_kind(config: dict[str, Any], *, source: str = "config.json") -> str:
    """The ptm task kind of a Hugging Face ``BertFor...`` config dict.

    Raises:
        CheckpointError: ``architectures`` names no supported task class (the message lists
            them).
    """
    architectures = config.get("architectures") or []
    found = [a for a in architectures if a in HF_TASK_ARCHITECTURES]
    if not found:
        raise CheckpointError(
            f"{source}: architectures {architectures!r} has no fine-tuning class ptm reads; "
            f"valid: {', '.join(HF_TASK_ARCHITECTURES)}. A bare encoder (BertModel, "
            "BertForPreTraining) loads with TransformerEncoder.from_pretrained and gets a "
            "fresh head from build_task_model"
        )
    kind = HF_TASK_ARCHITECTURES[found[0]]
    if kind == "classification" and (
        config.get("problem_type") == "regression" or _num_labels(config) == 1
    ):
        return "regression"
    if kind == "classification" and config.get("problem_type") == "multi_label_classification":
        raise CheckpointError(
            f"{source}: problem_type 'multi_label_classification' is not supported by ptm's "
            "fine-tuning heads (single-label classification and regression are)"
        )
    return kind


def is_hf_task_directory(directory: str | Path) -> bool:
    """Whether ``directory/config.json`` is a Hugging Face ``BertFor...`` task config."""
    path = Path(directory) / "config.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return (
        isinstance(raw, dict)
        and "ptm_format" not in raw
        and any(a in HF_TASK_ARCHITECTURES for a in raw.get("architectures") or [])
    )


def _num_labels(config: dict[str, Any]) -> int:
    if isinstance(config.get("id2label"), dict) and config["id2label"]:
        return len(config["id2label"])
    return int(config.get("num_labels", 2))


def label_names_from_config(config: dict[str, Any], *, source: str) -> list[str] | None:
    """The label names of an HF ``config.json``'s ``id2label`` in index order (``None``
    without one); keys that are not exactly ``0..N-1`` raise :class:`CheckpointError`."""
    id2label = config.get("id2label")
    if not isinstance(id2label, dict) or not id2label:
        return None
    try:
        by_index = {int(k): str(v) for k, v in id2label.items()}
    except ValueError:
        raise CheckpointError(
            f"{source}: id2label keys must be label indices 0..N-1, got {sorted(id2label)}"
        ) from None
    if sorted(by_index) != list(range(len(by_index))):
        raise CheckpointError(
            f"{source}: id2label keys must be 0..{len(by_index) - 1}, got {sorted(by_index)}"
        )
    return [by_index[i] for i in range(len(by_index))]


def load_hf_task_model(directory: str | Path, *, strict: bool = True) -> TaskModel:
    """Load a Hugging Face ``BertFor...`` fine-tuning folder as a :class:`TaskModel`.

    Args:
        directory: folder with ``config.json`` and ``model.safetensors`` (or a
            ``pytorch_model.bin`` holding tensors only).
        strict: raise on missing or unknown *encoder* tensors (the head's tensors and every
            shape are always checked).

    Returns:
        The model (training mode; call ``.eval()`` to predict); its ``label_names`` come
        from ``id2label`` for classification and tagging, the head dropout from
        ``classifier_dropout`` (else ``hidden_dropout_prob``).

    Raises:
        CheckpointError: unsupported architecture, or missing/unknown/mis-shaped tensors
            (listed, with the file).
    """
    directory = Path(directory)
    config_path = directory / "config.json"
    raw = _read_config(config_path)
    source = str(config_path)
    kind = hf_task_kind(raw, source=source)
    layout = _layout(raw, source)
    family = registry.hf_encoder_family(layout.model_type)
    assert family is not None, layout.model_type
    encoder_config = family.config_from_hf(raw, source=source)
    weights, weights_path = read_weights(directory)
    names = layout.names(kind)
    head_sources = set(names.values())
    encoder_weights = {k: v for k, v in weights.items() if k not in head_sources}
    absent = sorted(theirs for theirs in head_sources if theirs not in weights)
    state, _, missing, unknown = family.state_from_hf(encoder_weights, encoder_config)
    if absent:
        # ``unknown`` lists the heads of other tasks (a classifier in a QA folder).
        raise CheckpointError(
            f"{weights_path}: {', '.join(raw['architectures'])} needs the head tensors "
            f"{', '.join(absent)}, which are absent"
            + (f" (the file holds {', '.join(unknown)} instead)" if unknown else "")
            + f"; fix 'architectures' in {config_path} or export the model again"
        )
    encoder = encoder_from_config(encoder_config)
    check_state(
        encoder,
        state,
        source=str(weights_path),
        strict=strict,
        unknown=unknown,
        missing_source_names=missing or None,
    )
    dropout = raw.get("classifier_dropout")
    if dropout is None:
        dropout = raw.get("seq_classif_dropout", raw.get("hidden_dropout_prob", 0.1))
    num_labels = 2 if kind == "qa" else _num_labels(raw)
    label_names = (
        label_names_from_config(raw, source=source)
        if kind in ("classification", "tagging")
        else None
    )
    model = build_task_model(
        encoder,
        kind,
        num_labels,
        float(dropout),
        pool="first",
        label_names=label_names,
        **_activation(layout),
    )
    head_state = {ours: weights[theirs] for ours, theirs in names.items()}
    check_state(model.head, head_state, source=str(weights_path))
    return model


def _activation(layout: TaskLayout) -> dict[str, str]:
    # Only a non-default pooler activation is passed, so BERT's heads are built as before.
    return {} if layout.activation == "tanh" else {"activation": layout.activation}


def _layout(raw: dict[str, Any], source: str) -> TaskLayout:
    """The layout of the folder's task class, checked against its ``model_type``."""
    architecture = next(a for a in raw.get("architectures") or [] if a in HF_TASK_ARCHITECTURES)
    layout = layout_for_architecture(architecture)
    assert layout is not None, architecture
    model_type = raw.get("model_type", "bert")
    if model_type != layout.model_type:
        raise CheckpointError(
            f"{source}: architectures names {architecture} (model_type "
            f"{layout.model_type!r}) but model_type is {model_type!r}; fix one of the two"
        )
    return layout


def export_hf_task_model(
    model: TaskModel, directory: str | Path, label_names: list[str] | None = None
) -> Path:
    """Write ``model`` as a Hugging Face ``BertFor...`` folder, atomically.

    ``transformers`` loads the result with ``BertFor<Task>.from_pretrained(directory)`` with
    no missing or unexpected keys.

    Args:
        model: a :class:`TaskModel` on a BERT-layout encoder, with ``pool="first"``.
        directory: target folder (replaced as a whole if it exists).
        label_names: names for ``id2label`` / ``label2id`` (default: the model's
            ``label_names``, else ``LABEL_i``).

    Returns:
        The folder written.

    Raises:
        CheckpointError: the encoder or head has no ``BertFor...`` equivalent.
    """
    kind = model.kind
    settings = head_settings(model.head)
    if settings["pool"] != "first":
        raise CheckpointError(
            f"pool={settings['pool']!r}: Hugging Face BERT heads pool the first token; "
            "save this model with save_task_model instead"
        )
    names = label_names if label_names is not None else model.label_names
    if kind in ("classification", "regression", "tagging"):
        count = model.num_labels
        names = list(names) if names is not None else [f"LABEL_{i}" for i in range(count)]
        if len(names) != count:
            raise ValueError(f"label_names has {len(names)} names but num_labels={count}")
    else:
        names = None
    layout = layout_for_config(model.encoder.config)
    activation = getattr(getattr(model.head, "pooler", None), "activation", "tanh")
    if kind in ("classification", "regression", "multiple_choice") and (
        activation != layout.activation
    ):
        raise CheckpointError(
            f"this {kind} head's pooler uses {activation}, but {layout.architecture(kind)} "
            f"uses {layout.activation}; save this model with save_task_model instead"
        )
    head = {
        theirs: model.head.state_dict()[ours].detach().contiguous().clone()
        for ours, theirs in layout.names(kind).items()
    }

    def rewrite(tmp: Path) -> None:
        config_path, weights_path = tmp / "config.json", tmp / "model.safetensors"
        config = json.loads(config_path.read_text(encoding="utf-8"))
        config["architectures"] = [layout.architecture(kind)]
        if names is not None:
            config["id2label"] = {str(i): name for i, name in enumerate(names)}
            config["label2id"] = {name: i for i, name in enumerate(names)}
        if kind == "regression":
            config["problem_type"] = "regression"
        elif kind == "classification":
            config["problem_type"] = "single_label_classification"
        if kind != "qa" and layout.model_type == "distilbert":
            config["seq_classif_dropout"] = settings["dropout"]
        elif kind != "qa":
            config["classifier_dropout"] = settings["dropout"]
        config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        encoder_state = load_file(str(weights_path))
        state = {f"{layout.prefix}{k}": v for k, v in encoder_state.items()}
        state.update(head)
        save_file(state, str(weights_path), metadata={"format": "pt"})

    return model.encoder.save_pretrained(
        directory, format=f"hf-{layout.model_type}", extra_writers=[rewrite]
    )
