"""``model=<Hugging Face Hub name>``: found in the local Hugging Face cache, or one clear line.

``model`` is the config group of ptm's presets, which build randomly initialised encoders.
A Hub name such as ``bert-base-uncased`` is not one of them, and ptm never downloads (its
runs are offline). When the model is already in the local cache (``HF_HUB_CACHE``, else
``HF_HOME/hub``, else ``~/.cache/huggingface/hub``: where ``from_pretrained`` put it on
this machine), ``model=<name>`` becomes ``init_from=<its snapshot folder>``, the path
``model=DIR`` takes, so ptm's Hugging Face import loads it with its tokenizer. Otherwise
the error says that ptm is offline and how to bring the model in as a folder.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path

logger = logging.getLogger(__name__)

# A Hub repository id: "name" or "org/name" (letters, digits, "-", "_", ".").
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?$")


class HubModelError(ValueError):
    """A Hub model name that the local cache does not hold (ptm does not download)."""


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, read from the environment at call time."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface"
    return Path(home) / "hub"


def looks_like_hub_name(value: str) -> bool:
    """Whether ``value`` has the shape of a Hub repository id, not of a local path or a
    preset: it holds ``-`` or ``/`` (``bert-base-uncased``, ``org/model``), while a preset
    name with a typo (``bert_tny``) is left to the "did you mean" of the config group."""
    return (
        bool(_HUB_ID.match(value))
        and not value.startswith((".", "~"))
        and ("-" in value or "/" in value)
    )


def resolve_hub_model(name: str, presets: Sequence[str] = ()) -> Path:
    """The snapshot folder of Hub model ``name`` in the local cache.

    Args:
        name: A Hub repository id such as ``bert-base-uncased`` or ``org/model``.
        presets: ptm's ``model`` presets, for a "did you mean" in the error.

    Returns:
        The folder holding the model's ``config.json`` and weights.

    Raises:
        HubModelError: The cache does not hold the model (or holds no ``config.json`` of
            it): one line that says ptm is offline and how to give the model as a folder.
    """
    from huggingface_hub import snapshot_download

    cache = hub_cache_dir()
    try:
        folder = Path(snapshot_download(name, cache_dir=cache, local_files_only=True))
    except Exception:
        folder = None
    if folder is not None and (folder / "config.json").is_file():
        logger.info("model=%s: the Hugging Face cache copy at %s", name, folder)
        return folder
    close = difflib.get_close_matches(name.replace("-", "_"), list(presets), n=1, cutoff=0.6)
    preset = (
        f" (model={close[0]} is a ptm preset with random weights, not this model)" if close else ""
    )
    folder_note = f" (and no folder {name} exists here)" if "/" in name else ""
    raise HubModelError(
        f"model={name} is not in the local Hugging Face cache ({cache}){folder_note} and ptm "
        "works offline"
        f"{preset}: on a machine with network, run transformers.AutoModel.from_pretrained("
        f"{name!r}).save_pretrained(DIR) and AutoTokenizer.from_pretrained({name!r})"
        ".save_pretrained(DIR), copy DIR here and pass model=DIR (or set HF_HOME to a cache "
        "that holds it)"
    )


def hub_model_overrides(overrides: Sequence[str], config_dir: Path) -> list[str]:
    """``model=<Hub name>`` rewritten to ``init_from=<cached snapshot>``; others unchanged.

    A value that is a preset of ``config_dir/model``, an existing folder, or not shaped
    like a Hub id is left to the usual handling.

    Raises:
        HubModelError: A Hub-shaped name that is neither a preset nor in the cache.
    """
    presets = sorted(p.stem for p in (config_dir / "model").glob("*.yaml"))
    out = []
    for item in overrides:
        key, sep, value = item.partition("=")
        if (
            sep
            and key == "model"
            and value not in presets
            and not Path(value).exists()
            and looks_like_hub_name(value)
        ):
            out.append(f"init_from={resolve_hub_model(value, presets)}")
        else:
            out.append(item)
    return out


__all__ = [
    "HubModelError",
    "hub_cache_dir",
    "hub_model_overrides",
    "looks_like_hub_name",
    "resolve_hub_model",
]
