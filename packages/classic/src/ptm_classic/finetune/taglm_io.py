"""Save and load TagLM taggers and word-feature classifiers as one self-contained directory.

Layout (written atomically, an existing directory replaced as a whole)::

    taglm.json            {"format": "ptm-taglm", "version": 1, "kind", "num_labels",
                           "label_names", "settings", "features": WordFeatures.describe(),
                           **task_config}
    taglm.safetensors     everything trained (static vectors, char CNN, scalar mix, BiLSTM,
                          output layer, CRF); never the frozen LM
    static_vocab.txt      the static table's words, in row order (when there is a table)
    lm/                   the frozen LM: an encoder as ``save_pretrained`` writes it with its
                          tokenizer, or a copy of the biLM's ``final/``
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from ptm_classic.finetune.taglm import TagLMTagger
from ptm_classic.finetune.word_classifier import WordClassifier
from ptm_classic.finetune.word_features import (
    BiLMWordFeatures,
    CharCNNFeatures,
    EncoderWordFeatures,
    LMFeatures,
    StaticWordEmbedding,
    WordFeatures,
)
from ptm_core.atomic import atomic_directory
from ptm_core.checkpoints import CheckpointError

FORMAT, VERSION = "ptm-taglm", 1
JSON_FILE, WEIGHTS_FILE, VOCAB_FILE, LM_DIR = (
    "taglm.json",
    "taglm.safetensors",
    "static_vocab.txt",
    "lm",
)
WordModel = TagLMTagger | WordClassifier


def _trained_state(model: WordModel) -> dict[str, torch.Tensor]:
    prefix = model.features.frozen_prefix()
    return {
        name: value.detach().contiguous()
        for name, value in model.state_dict().items()
        if prefix is None or not name.startswith(prefix)
    }


def save_word_model(
    model: WordModel,
    directory: str | Path,
    *,
    task_config: dict[str, Any] | None = None,
    extra_files: dict[str, str] | None = None,
) -> Path:
    """Write a trained :class:`TagLMTagger` or :class:`WordClassifier` atomically.

    Args:
        model: the trained model.
        directory: target directory (replaced as a whole if it exists).
        task_config: JSON-ready settings to keep in ``taglm.json`` (task name, metric).
        extra_files: more text files to write in the same atomic save (name -> text).

    Returns:
        The directory written.

    Raises:
        ValueError: a biLM without the ``final/`` it came from (nothing to copy), or a
            non-JSON ``task_config``; nothing is written.
    """
    features = model.features
    record: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "kind": model.kind,
        "num_labels": model.num_labels,
        "label_names": model.label_names,
        "settings": model.settings,
        "features": features.describe(),
        **(task_config or {}),
    }
    try:
        text = json.dumps(record, indent=2) + "\n"
    except TypeError as exc:
        raise ValueError(f"task_config must be JSON-ready ({exc})") from None
    lm = features.lm
    if isinstance(lm, BiLMWordFeatures) and (lm.source is None or not Path(lm.source).is_dir()):
        raise ValueError(
            f"the biLM's source final/ directory is {lm.source!r}; build it with "
            "BiLMWordFeatures.from_final(<final dir>) so that the tagger can be saved with it"
        )
    tensors = _trained_state(model)
    with atomic_directory(directory) as tmp:
        save_file(tensors, str(tmp / WEIGHTS_FILE), metadata={"format": "pt"})
        if features.static is not None:
            (tmp / VOCAB_FILE).write_text(
                "".join(f"{word}\n" for word in features.static.vocab), encoding="utf-8"
            )
        if isinstance(lm, EncoderWordFeatures):
            lm.encoder.save_pretrained(tmp / LM_DIR, tokenizer=lm.tokenizer)
        elif isinstance(lm, BiLMWordFeatures):
            assert lm.source is not None
            shutil.copytree(lm.source, tmp / LM_DIR)
        for name, content in (extra_files or {}).items():
            (tmp / name).write_text(content, encoding="utf-8")
        (tmp / JSON_FILE).write_text(text, encoding="utf-8")
    return Path(directory)


def _read_record(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(
            f"{path}: missing; a TagLM directory holds {JSON_FILE} and {WEIGHTS_FILE} as "
            "ptm_classic.finetune.taglm_io.save_word_model writes them"
        ) from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise CheckpointError(f"{path}: format is not {FORMAT!r}; not a TagLM directory")
    if record.get("version") != VERSION:
        raise CheckpointError(
            f"{path}: version {record.get('version')!r}, this ptm reads {VERSION}; re-save it"
        )
    return record


def _load_lm(directory: Path, spec: dict[str, Any]) -> LMFeatures:
    lm_dir = directory / LM_DIR
    if not lm_dir.is_dir():
        raise CheckpointError(f"{lm_dir}: missing; taglm.json names a {spec['kind']} LM")
    if spec["kind"] == "encoder":
        return EncoderWordFeatures.from_final(lm_dir, layers=spec["layers"])
    if spec["kind"] == "bilm":
        # A tagger saved before per-layer normalisation existed (no key) used raw states.
        return BiLMWordFeatures.from_final(
            lm_dir, layers=spec["layers"], normalize=spec.get("normalize")
        )
    raise CheckpointError(
        f"{directory / JSON_FILE}: features.lm.kind {spec['kind']!r}; expected 'encoder' or 'bilm'"
    )


def load_word_model(
    directory: str | Path, *, lm: LMFeatures | None = None
) -> tuple[WordModel, dict[str, Any]]:
    """Load what :func:`save_word_model` wrote.

    Args:
        directory: the model directory.
        lm: use this frozen LM instead of the saved ``lm/`` (it must give the saved width).

    Returns:
        ``(model, record)``: the model (train mode; call ``.eval()`` to predict) and
        ``taglm.json``.

    Raises:
        CheckpointError: a missing or damaged file, or a dimension mismatch between the
            saved model and its parts, naming the file, the field and the fix.
    """
    directory = Path(directory)
    json_path = directory / JSON_FILE
    record = _read_record(json_path)
    spec = record["features"]
    static = None
    if spec.get("static"):
        vocab_path = directory / VOCAB_FILE
        if not vocab_path.is_file():
            raise CheckpointError(
                f"{vocab_path}: missing; features.static in {json_path} needs the static "
                "table's words (copy the whole directory from one save)"
            )
        vocab = vocab_path.read_text(encoding="utf-8").split("\n")[:-1]
        dim = int(spec["static"]["dim"])
        static = StaticWordEmbedding(
            vocab, torch.zeros(len(vocab), dim), freeze=bool(spec["static"]["freeze"])
        )
    chars = None
    if spec.get("chars"):
        c = spec["chars"]
        chars = CharCNNFeatures(int(c["dim"]), char_dim=int(c["char_dim"]), width=int(c["width"]))
    if spec.get("lm") and lm is None:
        lm = _load_lm(directory, spec["lm"])
    if spec.get("lm") and lm is not None and lm.hidden_size != int(spec["lm"]["hidden_size"]):
        raise CheckpointError(
            f"{json_path}: features.lm.hidden_size is {spec['lm']['hidden_size']} but the LM "
            f"given gives {lm.hidden_size}-wide features; the BiLSTM was trained on the "
            "saved width: pass the LM the tagger was trained with"
        )
    if not spec.get("lm") and lm is not None:
        raise CheckpointError(f"{json_path}: features.lm is null; this model uses no LM")
    features = WordFeatures(
        static=static, chars=chars, lm=lm, max_characters=int(spec["max_characters"])
    )
    settings = record["settings"]
    model: WordModel
    try:
        if record["kind"] == "tagging":
            model = TagLMTagger(
                features,
                int(record["num_labels"]),
                label_names=record.get("label_names"),
                crf=bool(settings["crf"]),
                constraint=settings["constraint"],
                lstm_hidden=int(settings["lstm_hidden"]),
                lstm_layers=int(settings["lstm_layers"]),
                dropout=float(settings["dropout"]),
            )
        elif record["kind"] == "classification":
            model = WordClassifier(
                features,
                int(record["num_labels"]),
                label_names=record.get("label_names"),
                lstm_hidden=int(settings["lstm_hidden"]),
                dropout=float(settings["dropout"]),
            )
        else:
            raise ValueError(f"kind {record['kind']!r}; expected 'tagging' or 'classification'")
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{json_path}: {exc}") from None
    weights_path = directory / WEIGHTS_FILE
    if not weights_path.is_file():
        raise CheckpointError(f"{weights_path}: missing (copy the whole directory from one save)")
    state = load_file(str(weights_path))
    expected = _trained_state(model)
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong = sorted(
        f"{k}: saved {tuple(state[k].shape)}, model {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state and state[k].shape != v.shape
    )
    if missing or unexpected or wrong:
        raise CheckpointError(
            f"{weights_path}: does not match {json_path} (missing {missing[:5]}, unexpected "
            f"{unexpected[:5]}, shape mismatch {wrong[:5]}); copy both from one save"
        )
    model.load_state_dict(state, strict=False)
    return model, record
