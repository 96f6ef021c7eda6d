"""The ``"ptm_model"`` kind every saved ``config.json`` carries.

A ptm-format model directory says what it holds, so loading (``from_pretrained``, the
checkpoint registry) and scoring (``ptm evaluate``'s registry) dispatch on one key
instead of guessing from marker files. This module imports nothing heavy: the CLI and
the registries read it before torch is loaded.

Directories written before the key existed have no ``"ptm_model"``;
:func:`read_model_kind` returns ``None`` for them and callers fall back to the old
markers (so every existing checkpoint still loads).
"""

from __future__ import annotations

import json
from pathlib import Path

#: ``config.json`` key naming the kind of model saved in a directory.
KIND_KEY = "ptm_model"

# Core (ptm-core); the families of ptm_core.families.core_specs register the first three.
ENCODER = "encoder"  # TransformerEncoder: BERT, RoBERTa, ALBERT, ELECTRA, SpanBERT, UniLM, WKLM
XLNET = "xlnet"  # relative-position, two-stream encoder
ENCODER_DECODER = "encoder_decoder"  # BART, T5, MASS


def known_kinds() -> frozenset[str]:
    """Every kind an installed family saves: the open registry of
    :mod:`ptm_core.families.registry` (each family's ``FamilySpec.kinds``)."""
    from ptm_core.families.registry import known_kinds as registered

    return registered()


def __getattr__(name: str) -> object:
    if name == "KINDS":  # the old closed list, now the registry's view
        return known_kinds()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def read_model_kind(directory: str | Path) -> str | None:
    """The ``"ptm_model"`` of ``directory/config.json``; ``None`` when absent.

    ``None`` also for a directory with no ``config.json`` or a Hugging Face one (their
    configs have ``model_type`` instead): callers then use the legacy markers.

    Raises:
        ValueError: ``config.json`` is not valid JSON, or names an unknown kind.
    """
    path = Path(directory) / "config.json"
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(
            f"{path}: not valid JSON ({err.msg} at line {err.lineno}); re-save the model"
        ) from err
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(raw).__name__}")
    kind = raw.get(KIND_KEY)
    if kind is None:
        return None
    known = known_kinds()
    if kind not in known:
        raise ValueError(
            f"{path}: unknown {KIND_KEY!r} {kind!r}; known kinds: {', '.join(sorted(known))} "
            "(is the package that saved it installed?)"
        )
    return str(kind)


def with_kind(config: dict[str, object], kind: str) -> dict[str, object]:
    """``config`` with ``"ptm_model": kind`` first (for writing ``config.json``)."""
    known = known_kinds()
    if kind not in known:
        raise ValueError(f"unknown model kind {kind!r}; known kinds: {', '.join(sorted(known))}")
    return {KIND_KEY: kind, **{k: v for k, v in config.items() if k != KIND_KEY}}
