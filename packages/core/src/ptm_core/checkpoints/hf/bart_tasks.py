"""Hugging Face ``BartForSequenceClassification`` folders <-> ptm's
:class:`~ptm_core.finetune.seq2seq.Seq2SeqClassifier`.

Both read the decoder state at each row's last end token (``eos_token_id``) through the
same head, ``dropout -> dense -> tanh -> dropout -> out_proj`` (BART, Lewis et al., 2020,
section 3.1), so the weights map one to one. The encoder-decoder goes through the BART
name map of :mod:`ptm_core.checkpoints.hf.bart`; the head:

=====================================  ==============================================
ptm (``Seq2SeqClassifier``)            Hugging Face
=====================================  ==============================================
``head.dense.{weight,bias}``           ``classification_head.dense.{weight,bias}``
``head.out_proj.{weight,bias}``        ``classification_head.out_proj.{weight,bias}``
``model.*``                            ``model.*`` (``BartModel``; no LM head)
=====================================  ==============================================

``id2label`` becomes the label names and is written back on export; ``problem_type:
"regression"`` (or one label) makes a regressor; ``classifier_dropout`` is the head's
dropout. ``BartForSequenceClassification`` has no LM head, so export needs the LM head
tied to the token table (BART's layout), and import ties it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from safetensors.torch import save_file
from torch import Tensor

from ptm_core.atomic import atomic_directory
from ptm_core.checkpoints.hf.bart import (
    hf_bart_to_ptm,
    hf_config_to_seq2seq,
    ptm_to_hf_bart,
    seq2seq_config_to_hf,
)
from ptm_core.checkpoints.hf.bert_tasks import label_names_from_config
from ptm_core.checkpoints.io import (
    CheckpointError,
    check_state,
    read_json_object,
    read_weights,
)
from ptm_core.checkpoints.seq2seq_ptm import build_seq2seq_model
from ptm_core.finetune.seq2seq import Seq2SeqClassifier

ARCHITECTURE = "BartForSequenceClassification"
HEAD_PREFIX = "classification_head."
HEAD_NAMES = {
    "dense.weight": "classification_head.dense.weight",
    "dense.bias": "classification_head.dense.bias",
    "out_proj.weight": "classification_head.out_proj.weight",
    "out_proj.bias": "classification_head.out_proj.bias",
}


def is_hf_bart_classifier(config: dict[str, Any]) -> bool:
    """Whether a ``config.json`` dict is a ``BartForSequenceClassification``."""
    return config.get("model_type") == "bart" and ARCHITECTURE in (
        config.get("architectures") or []
    )


def load_hf_bart_classifier(directory: str | Path) -> Seq2SeqClassifier:
    """Load a Hugging Face ``BartForSequenceClassification`` folder.

    Args:
        directory: ``config.json`` plus ``model.safetensors`` (or a tensors-only
            ``pytorch_model.bin``), as ``save_pretrained`` writes them.

    Returns:
        The classifier in training mode (``.eval()`` to predict); ``label_names`` from
        ``id2label``, head dropout from ``classifier_dropout``.

    Raises:
        CheckpointError: another architecture, ``multi_label_classification``, or
            missing/unknown/mis-shaped tensors (listed, with the file and the fix).
    """
    directory = Path(directory)
    config_path = directory / "config.json"
    source = str(config_path)
    raw = read_json_object(
        config_path, "save the model with BartForSequenceClassification.save_pretrained(folder)"
    )
    if not is_hf_bart_classifier(raw):
        raise CheckpointError(
            f"{source}: model_type={raw.get('model_type')!r}, architectures="
            f"{raw.get('architectures')!r}; this reads a {ARCHITECTURE} folder (field "
            "'architectures'). A bare BART loads with EncoderDecoderModel.from_pretrained"
        )
    if raw.get("problem_type") == "multi_label_classification":
        raise CheckpointError(
            f"{source}: problem_type 'multi_label_classification' is not supported by ptm's "
            "seq2seq classifier (single-label classification and regression are)"
        )
    names = label_names_from_config(raw, source=source)
    num_labels = len(names) if names is not None else int(raw.get("num_labels", 2))
    kind = (
        "regression"
        if raw.get("problem_type") == "regression" or num_labels == 1
        else "classification"
    )
    weights, weights_path = read_weights(directory)
    absent = sorted(theirs for theirs in HEAD_NAMES.values() if theirs not in weights)
    if absent:
        raise CheckpointError(
            f"{weights_path}: {ARCHITECTURE} needs {', '.join(absent)}, which are absent; "
            f"fix 'architectures' in {config_path} or export the model again"
        )
    body = {k: v for k, v in weights.items() if not k.startswith(HEAD_PREFIX)}
    seq2seq_config = hf_config_to_seq2seq(raw, source=source)
    try:
        state = hf_bart_to_ptm(body, seq2seq_config)
    except CheckpointError as exc:
        raise CheckpointError(f"{weights_path}: {exc}") from None
    model = build_seq2seq_model(seq2seq_config, state, source=str(weights_path))
    dropout = raw.get("classifier_dropout")
    classifier = Seq2SeqClassifier(
        model,
        kind,
        num_labels,
        float(dropout) if dropout is not None else 0.0,
        label_names=names if kind == "classification" else None,
    )
    check_state(
        classifier.head,
        {ours: weights[theirs] for ours, theirs in HEAD_NAMES.items()},
        source=str(weights_path),
    )
    return classifier


def ptm_to_hf_bart_classifier(model: Seq2SeqClassifier) -> dict[str, Tensor]:
    """The state dict of a ``BartForSequenceClassification`` with ``model``'s weights.

    Raises:
        CheckpointError: the encoder-decoder has no BART layout, or an untied LM head
            (which the HF class has no place for).
    """
    config = model.model.config
    if not config.tie_lm_head:
        raise CheckpointError(
            f"{ARCHITECTURE} has no LM head, and this model's is not tied to the token table "
            "(tie_lm_head=false); save it with save_seq2seq_classifier instead"
        )
    state = ptm_to_hf_bart(model.model.state_dict(), config)
    state.pop("final_logits_bias", None)  # a buffer of the generation class only
    for ours, theirs in HEAD_NAMES.items():
        state[theirs] = model.head.state_dict()[ours].detach().contiguous().clone()
    return state


def export_hf_bart_classifier(
    model: Seq2SeqClassifier, directory: str | Path, label_names: list[str] | None = None
) -> Path:
    """Write ``model`` as a Hugging Face ``BartForSequenceClassification`` folder, atomically.

    ``transformers`` loads it with ``BartForSequenceClassification.from_pretrained`` with
    no missing or unexpected keys (the tied ``embed_tokens`` come from ``shared``).

    Args:
        model: a :class:`Seq2SeqClassifier` on a BART-layout encoder-decoder (post-LN,
            shared embeddings, ``position_offset=2``).
        directory: target folder (replaced as a whole).
        label_names: names for ``id2label``/``label2id`` (default: the model's, else
            ``LABEL_i``).

    Returns:
        The folder written.

    Raises:
        CheckpointError: the model has no ``BartForSequenceClassification`` equivalent.
    """
    config = seq2seq_config_to_hf(model.model.config)
    state = ptm_to_hf_bart_classifier(model)
    count = model.num_labels
    names = label_names if label_names is not None else model.label_names
    names = list(names) if names is not None else [f"LABEL_{i}" for i in range(count)]
    if len(names) != count:
        raise ValueError(f"label_names has {len(names)} names but num_labels={count}")
    config.update(
        architectures=[ARCHITECTURE],
        id2label={str(i): name for i, name in enumerate(names)},
        label2id={name: i for i, name in enumerate(names)},
        num_labels=count,
        problem_type="regression" if model.kind == "regression" else "single_label_classification",
        classifier_dropout=float(model.head.dropout.p),
    )
    with atomic_directory(Path(directory)) as tmp:
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    return Path(directory)


__all__ = [
    "ARCHITECTURE",
    "export_hf_bart_classifier",
    "is_hf_bart_classifier",
    "load_hf_bart_classifier",
    "ptm_to_hf_bart_classifier",
]
