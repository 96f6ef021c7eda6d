"""What determines a composed run's result, as flat config keys, and a short hash of it.

Every recipe runs inside :func:`ptm_core.training.run_folder.run_identity` with
:func:`config_identity` of its config (see :func:`flows.runner.run_composed`), so the
trainer's fingerprint of a run folder covers the model, the data and every setting, not
only the trainer's own keys. A config value that names an existing file or folder (a model
``final/``, a corpus, a task file, a KG, a tokenizer) stands for its content, not its path.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ptm_core.training.run_folder import path_identity
from ptm_core.training.trainer import COSMETIC_KEYS

# Keys (last component) that say where outputs and caches go or how fast work runs, never
# what is computed; folders the run writes itself would change under a resume.
_NOT_RESULT_KEYS = frozenset(
    {
        "experiment_name",
        "cache_dir",
        "corpus_dir",
        "word_corpus_dir",
        "num_workers",
        "workers",
        "progress",
        "report",
    }
)
# Keys that differ between the seeds of one setting (the folder hash leaves them out).
_SEED_KEYS = frozenset({"seed", "trainer.seed"})


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, Mapping):
        flat: dict[str, Any] = {}
        for key, value in node.items():
            flat.update(_flatten(value, f"{prefix}{key}."))
        return flat
    return {prefix[:-1]: node}


def _looks_like_path(value: str) -> bool:
    return ("/" in value or bool(Path(value).suffix)) and len(value) < 4096


def _is_result_key(key: str) -> bool:
    parts = key.split(".")
    if parts[0] == "hydra" or parts[-1] in _NOT_RESULT_KEYS:
        return False
    return not (parts[0] == "trainer" and len(parts) == 2 and parts[1] in COSMETIC_KEYS)


def config_identity(cfg: DictConfig) -> dict[str, Any]:
    """The result-relevant keys of a composed config, flat, with paths replaced by content.

    Args:
        cfg: a composed root config (``config.yaml`` or ``finetune.yaml``).

    Returns:
        ``{"model.hidden_size": 128, "init_from": "folder:1a2b...", ...}``.
    """
    container = OmegaConf.to_container(cfg, resolve=True)
    identity = {}
    for key, value in _flatten(container).items():
        if not _is_result_key(key):
            continue
        if isinstance(value, str) and _looks_like_path(value) and Path(value).exists():
            value = path_identity(value)
        identity[key] = value
    return identity


def settings_hash(identity: Mapping[str, Any], *, without: Sequence[str] = ()) -> str:
    """8 hex digits of ``identity`` without the seed keys (and ``without``): the runs of one
    setting share it, runs of different models, data or settings do not."""
    skip = _SEED_KEYS | set(without)
    kept = {k: v for k, v in identity.items() if k not in skip}
    text = json.dumps(kept, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def model_tag(init_from: str | None, preset: str) -> str:
    """A folder-name part for the model: the preset's name, or the model folder's name
    (``<parent>-final`` for a run's ``final/``)."""
    if init_from:
        path = Path(init_from)
        name = f"{path.parent.name}-{path.name}" if path.name == "final" else path.name
    else:
        name = preset
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"
