"""SentiLARE folders (kind ``sentilr``): the ``sentilr`` family's ``load``/``save``.

``config.json`` holds ``"ptm_model": "sentilr"``, ``ptm_format``, the encoder fields and a
``sentilr`` record: the label names of the pre-training corpus and where its knowledge came
from (the POS pipeline or WordNet folder, the polarity threshold; fine-tuning annotates its
task text the same way). ``model.safetensors`` holds the encoder (``encoder.*``) and the
knowledge tables (``knowledge.*``). A run's ``final/`` adds the tokenizer and
``heads.safetensors`` (the label-aware MLM's heads). This module sits above the model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ptm_core.checkpoints.io import (
    CheckpointError,
    atomic_directory,
    check_state,
    read_json_object,
    read_weights,
    write_json,
    write_weights,
)
from ptm_core.encoders import EncoderConfig
from ptm_core.encoders.factory import encoder_from_config
from ptm_core.model_kinds import with_kind
from ptm_text.families import SENTILR_KIND
from ptm_text.sentilr.model import SentiLRKnowledgeEmbeddings, SentiLRModel

PTM_SENTILR_FORMAT = "ptm-sentilr/1"


def save_sentilr(
    model: SentiLRModel,
    path: str | Path,
    *,
    record: dict[str, Any] | None = None,
    extra_writers: Sequence[Callable[[Path], object]] = (),
) -> Path:
    """Write ``config.json`` and ``model.safetensors`` atomically.

    Args:
        model: the network.
        path: the folder (replaced as a whole).
        record: the ``sentilr`` record (label names, knowledge settings); default: the one
            the model was loaded with, else just the number of labels.
        extra_writers: callables given the folder being written (tokenizer, heads).
    """
    saved = record if record is not None else model.record
    config = with_kind(
        {
            "ptm_format": PTM_SENTILR_FORMAT,
            "sentilr": {**saved, "num_labels": model.knowledge.num_labels},
            "encoder": model.encoder.config.to_dict(),
        },
        SENTILR_KIND,
    )
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    with atomic_directory(path) as tmp:
        write_json(tmp / "config.json", config)
        write_weights(state, tmp / "model.safetensors", metadata={"format": "pt"})
        for writer in extra_writers:
            writer(tmp)
    return Path(path)


def read_sentilr_record(path: str | Path) -> dict[str, Any]:
    """The ``sentilr`` record of a SentiLARE folder's ``config.json``."""
    config_path = Path(path) / "config.json"
    raw = read_json_object(config_path)
    if raw.get("ptm_format") != PTM_SENTILR_FORMAT or "sentilr" not in raw:
        raise CheckpointError(
            f"{config_path}: not a SentiLARE folder (ptm_format {raw.get('ptm_format')!r}, "
            f"expected {PTM_SENTILR_FORMAT!r}); give the final/ of `ptm pretrain "
            "experiment=sentilr_tiny`"
        )
    return dict(raw["sentilr"])


def load_sentilr(path: str | Path, **overrides: Any) -> SentiLRModel:
    """Load what :func:`save_sentilr` wrote.

    Args:
        path: the folder.
        **overrides: encoder config fields to change (``dropout=0.0``).
    """
    directory = Path(path)
    record = read_sentilr_record(directory)
    raw = read_json_object(directory / "config.json")
    config = EncoderConfig.from_dict(
        {**raw["encoder"], **overrides}, source=str(directory / "config.json")
    )
    knowledge = SentiLRKnowledgeEmbeddings(config.embedding_size or config.hidden_size,
                                           int(record["num_labels"]))  # fmt: skip
    model = SentiLRModel(encoder_from_config(config), knowledge, record)
    weights, weights_path = read_weights(directory)
    check_state(model, weights, source=str(weights_path))
    return model
