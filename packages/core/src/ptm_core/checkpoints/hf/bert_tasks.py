"""Hugging Face fine-tuning folders <-> ptm's :class:`~ptm_core.finetune.model.TaskModel`.

``BertFor...``, ``AlbertFor...``, ``ElectraFor...``, ``XLNetFor...``, ``RobertaFor...``,
``XLMRobertaFor...`` and ``DistilBertFor...``
``{SequenceClassification, TokenClassification, QuestionAnswering(Simple), MultipleChoice}``
folders load with their heads and export back. The encoder goes through its family's
converter (:mod:`ptm_core.checkpoints.hf.bert` and its siblings, by ``model_type``); the
head through the family's rows in :mod:`ptm_core.checkpoints.hf.task_heads`, which also
say the head's variant: ELECTRA's GELU classification head, RoBERTa's classifier,
DistilBERT's ReLU and the sequence summary of ELECTRA and XLNet become the head's
``pool``/``activation``/``input_dropout``, which
``task.json`` keeps, so a fine-tuned ptm folder reloads and exports with the same head.

The task comes from the config's ``architectures`` (``problem_type: "regression"`` or one
label makes a sequence classifier a regressor); ``id2label`` becomes the label names and
is written back on export, so a model moves between ptm and ``transformers`` with its
labels. Every tensor is checked by its name in the file: a missing, unknown or mis-shaped
one is refused naming the file and the tensor.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import torch
from safetensors.torch import load_file, save_file

from ptm_core.checkpoints import registry
from ptm_core.checkpoints.hf.file_tensors import check_file_tensors, expected_tensors, file_name
from ptm_core.checkpoints.hf.formats import default_hf_format
from ptm_core.checkpoints.hf.task_heads import POOLED_KINDS, HeadVariant, HFTaskHead, find_row
from ptm_core.checkpoints.io import (
    CheckpointError,
    check_state,
    fill_shared_tensors,
    read_json_object,
    read_weights,
)
from ptm_core.encoders.factory import encoder_from_config
from ptm_core.finetune.model import TaskModel, build_task_model, head_settings

logger = logging.getLogger(__name__)

_AUTO_CLASSES = {
    "classification": "AutoModelForSequenceClassification",
    "regression": "AutoModelForSequenceClassification",
    "tagging": "AutoModelForTokenClassification",
    "qa": "AutoModelForQuestionAnswering",
    "multiple_choice": "AutoModelForMultipleChoice",
}


def _read_config(path: Path) -> dict[str, Any]:
    return read_json_object(
        path,
        "a Hugging Face model folder holds config.json and model.safetensors (save it with "
        "model.save_pretrained(folder))",
    )


def _family_rows(model_type: str) -> tuple[ModuleType | None, tuple[HFTaskHead, ...]]:
    module = registry.hf_encoder_family(model_type)
    rows = getattr(module, "task_heads", None)
    return module, (rows(model_type) if rows is not None else ())


def _all_rows() -> tuple[HFTaskHead, ...]:
    return tuple(r for t in registry.hf_encoder_families() for r in _family_rows(t)[1])


def _model_type(config: dict[str, Any]) -> str:
    # BERT configs written before model_type existed carry num_hidden_layers.
    return str(config.get("model_type", "bert"))


def hf_task_head(config: dict[str, Any], *, source: str = "config.json") -> HFTaskHead:
    """The fine-tuning class a Hugging Face ``config.json`` dict names.

    Raises:
        CheckpointError: ``architectures`` names no class ptm reads for its ``model_type``
            (the message lists the valid ones).
    """
    architectures = list(config.get("architectures") or [])
    model_type = _model_type(config)
    _, rows = _family_rows(model_type)
    row = find_row(rows, architectures)
    if row is None:
        valid = [r.architecture for r in rows] or [r.architecture for r in _all_rows()]
        raise CheckpointError(
            f"{source}: architectures {architectures!r} has no fine-tuning class ptm reads "
            f"for model_type {model_type!r}; valid: {', '.join(valid)}. A bare encoder "
            "(BertModel, ElectraForPreTraining, ...) loads with "
            "TransformerEncoder.from_pretrained and gets a fresh head from build_task_model"
        )
    return row


def hf_task_kind(config: dict[str, Any], *, source: str = "config.json") -> str:
    """The ptm task kind of a Hugging Face ``...For<Task>`` config dict.

    Raises:
        CheckpointError: ``architectures`` names no supported task class (the message lists
            them), or a multi-label classifier.
    """
    kind = hf_task_head(config, source=source).kind
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
    """Whether ``directory/config.json`` is a Hugging Face fine-tuning config ptm reads."""
    path = Path(directory) / "config.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    if not isinstance(raw, dict) or "ptm_format" in raw:
        return False
    names = set(raw.get("architectures") or [])
    return any(r.architecture in names for r in _all_rows())


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
    """Load a Hugging Face fine-tuning folder (BERT, ALBERT, ELECTRA, XLNet, RoBERTa,
    XLM-R, DistilBERT) as a
    :class:`TaskModel`, with its head.

    Args:
        directory: folder with ``config.json`` and ``model.safetensors`` (or a
            ``pytorch_model.bin`` holding tensors only).
        strict: raise on missing or unknown tensors (every shape is always checked, and
            the head's tensors must be there).

    Returns:
        The model (training mode; call ``.eval()`` to predict); its ``label_names`` come
        from ``id2label`` for classification and tagging, the head's variant and dropout
        from the config (see :mod:`ptm_core.checkpoints.hf.task_heads`).

    Raises:
        CheckpointError: unsupported architecture or head variant, or a missing, unknown
            or mis-shaped tensor (named, with the file).
    """
    directory = Path(directory)
    config_path = directory / "config.json"
    raw = _read_config(config_path)
    source = str(config_path)
    row = hf_task_head(raw, source=source)
    kind = hf_task_kind(raw, source=source)
    family, _ = _family_rows(_model_type(raw))
    assert family is not None  # hf_task_head found a row
    encoder_config = family.config_from_hf(raw, source=source)
    variant = row.read(raw, source)
    weights, weights_path = read_weights(directory)
    absent = sorted(
        theirs
        for theirs in row.names.values()
        if theirs not in weights and theirs not in row.optional
    )
    head_sources = set(row.names.values())
    encoder_weights = {k: v for k, v in weights.items() if k not in head_sources}
    state, heads, missing, unknown = family.state_from_hf(encoder_weights, encoder_config)
    if absent:
        # ``unknown`` lists the heads of the family's other classes (a classifier in a QA
        # folder).
        raise CheckpointError(
            f"{weights_path}: {row.architecture} needs the head tensors "
            f"{', '.join(absent)}, which are absent"
            + (f" (the file holds {', '.join(unknown)} instead)" if unknown else "")
            + f"; fix 'architectures' in {config_path} or export the model again"
        )
    encoder = encoder_from_config(encoder_config)
    num_labels = 2 if kind == "qa" else _num_labels(raw)
    label_names = (
        label_names_from_config(raw, source=source)
        if kind in ("classification", "tagging")
        else None
    )
    try:
        model = build_task_model(
            encoder,
            kind,
            num_labels,
            variant.dropout,
            pool=cast(Any, variant.pool),
            label_names=label_names,
            activation=cast(Any, variant.activation),
            input_dropout=variant.input_dropout,
        )
    except ValueError as exc:
        raise CheckpointError(f"{source}: {exc}") from None
    prefix = str(getattr(family, "HF_PREFIX", ""))
    expected = expected_tensors(family, encoder_config)
    own = model.head.state_dict()
    present = {o: t for o, t in row.names.items() if t in weights or t not in row.optional}
    expected.update({file_name(t, prefix): (t, tuple(own[o].shape)) for o, t in present.items()})
    check_file_tensors(
        weights,
        expected,
        prefix=prefix,
        leftover={file_name(k, "") for k in heads},
        strict=strict,
        weights_path=weights_path,
        config_path=config_path,
        architecture=row.architecture,
    )
    check_state(
        encoder,
        fill_shared_tensors(encoder, state),  # ALBERT: one layer under every layer's name
        source=str(weights_path),
        strict=strict,
        unknown=unknown,
        missing_source_names=missing or None,
    )
    head_state = {ours: weights[theirs] for ours, theirs in present.items()}
    # A bias the folder's config turns off is a zero bias of ptm's head.
    head_state.update({o: torch.zeros_like(own[o]) for o in row.names if o not in present})
    check_state(model.head, head_state, source=str(weights_path))
    return model


def _variant(model: TaskModel) -> HeadVariant:
    settings = head_settings(model.head)
    if model.kind not in (*POOLED_KINDS, "regression"):
        return HeadVariant(dropout=settings["dropout"])
    return HeadVariant(
        pool=settings["pool"],
        activation=settings.get("pooler_activation", "tanh"),
        input_dropout=bool(settings.get("pooler_input_dropout", False)),
        dropout=settings["dropout"],
    )


def hf_task_export(model: TaskModel) -> tuple[str, HFTaskHead, dict[str, Any]]:
    """The Hugging Face family and class that hold ``model``, and the config keys of its
    head's variant.

    The encoder's own family comes first (:func:`~ptm_core.checkpoints.hf.formats.default_hf_format`);
    an unfactorised BERT-layout encoder may also be an ELECTRA (ELECTRA-base has
    ``embedding_size == hidden_size``), which then holds ELECTRA's heads.

    Raises:
        CheckpointError: no class holds this encoder with this head (the message says why).
    """
    kind = "classification" if model.kind == "regression" else model.kind
    variant = _variant(model)
    family = default_hf_format(model.encoder.config).removeprefix("hf-")
    candidates = [family, "electra"] if family == "bert" else [family]
    tried: list[HFTaskHead] = []
    for name in candidates:
        _, rows = _family_rows(name)
        row = next((r for r in rows if r.kind == kind), None)
        if row is None:
            continue
        extra = row.write(variant)
        if extra is not None:
            return name, row, extra
        tried.append(row)
    described = f"pool={variant.pool!r}, pooler activation {variant.activation!r}" + (
        ", dropout before the pooler" if variant.input_dropout else ""
    )
    raise CheckpointError(
        f"this {model.kind} head ({described}) has no Hugging Face class for this encoder: "
        + "; ".join(f"{r.architecture} has {r.fixed}" for r in tried)
        + ". Save the model with save_task_model instead"
    )


def export_hf_task_model(
    model: TaskModel, directory: str | Path, label_names: list[str] | None = None
) -> Path:
    """Write ``model`` as a Hugging Face ``...For<Task>`` folder, atomically.

    ``transformers`` loads the result with ``AutoModelFor<Task>.from_pretrained(directory)``
    with no missing or unexpected keys, and gives the same logits.

    Args:
        model: a :class:`TaskModel` on a BERT, ALBERT, ELECTRA or XLNet encoder, or one
            imported from RoBERTa, XLM-R or DistilBERT.
        directory: target folder (replaced as a whole if it exists).
        label_names: names for ``id2label`` / ``label2id`` (default: the model's
            ``label_names``, else ``LABEL_i``).

    Returns:
        The folder written.

    Raises:
        CheckpointError: the encoder or head has no Hugging Face equivalent.
    """
    kind = model.kind
    family, row, head_config = hf_task_export(model)
    names = label_names if label_names is not None else model.label_names
    if kind in ("classification", "regression", "tagging"):
        count = model.num_labels
        names = list(names) if names is not None else [f"LABEL_{i}" for i in range(count)]
        if len(names) != count:
            raise ValueError(f"label_names has {len(names)} names but num_labels={count}")
    else:
        names = None
    own = model.head.state_dict()
    head = {theirs: own[ours].detach().contiguous().clone() for ours, theirs in row.names.items()}
    if row.export is not None:
        head = row.export(head, model.encoder.config)
    prefix = str(getattr(registry.hf_encoder_family(family), "HF_PREFIX", ""))

    def rewrite(tmp: Path) -> None:
        config_path, weights_path = tmp / "config.json", tmp / "model.safetensors"
        config = json.loads(config_path.read_text(encoding="utf-8"))
        config["architectures"] = [row.architecture]
        if names is not None:
            config["id2label"] = {str(i): name for i, name in enumerate(names)}
            config["label2id"] = {name: i for i, name in enumerate(names)}
        if kind == "regression":
            config["problem_type"] = "regression"
            config["num_labels"] = 1
        elif kind == "classification":
            config["problem_type"] = "single_label_classification"
        config.update(head_config)
        config_path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        encoder_state = load_file(str(weights_path))
        state = {f"{prefix}{k}": v for k, v in encoder_state.items()}
        state.update(head)
        save_file(state, str(weights_path), metadata={"format": "pt"})

    with torch.no_grad():
        return model.encoder.save_pretrained(
            directory, format=f"hf-{family}", extra_writers=[rewrite]
        )


def auto_class(kind: str) -> str:
    """The ``transformers`` auto class that loads an exported ``kind`` folder."""
    return _AUTO_CLASSES[kind]


def hf_head_variants(directory: str | Path) -> dict[str, dict[str, Any]]:
    """The head each task kind gets in ``directory``'s Hugging Face family, as
    ``build_task_model`` keywords (``pool``, ``activation``, ``input_dropout``).

    A fresh head on an imported ELECTRA encoder is then ELECTRA's (GELU), on an XLNet one
    XLNet's last-token summary, as ``transformers``' ``...For<Task>`` would build it, and
    it exports back to that class. ``{}`` for a ptm folder or a family without task classes.
    """
    path = Path(directory) / "config.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    if not isinstance(raw, dict) or "ptm_format" in raw or "model_type" not in raw:
        return {}
    _, rows = _family_rows(_model_type(raw))
    variants: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.kind not in POOLED_KINDS:
            continue
        try:
            variant = row.read(raw, str(path))
        except CheckpointError:  # a summary ptm lacks: BERT's head, as for a ptm folder
            continue
        settings = {
            "pool": variant.pool,
            "activation": variant.activation,
            "input_dropout": variant.input_dropout,
        }
        variants[row.kind] = settings
        if row.kind == "classification":
            variants["regression"] = settings
    return variants
