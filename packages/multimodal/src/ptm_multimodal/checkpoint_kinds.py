"""The ``"ptm_model"`` kind of a multimodal ``final/`` (from its ``architecture``)."""

from __future__ import annotations

from typing import Any

from ptm_core.model_kinds import KIND_KEY, LXMERT, VILBERT, VISUALBERT, with_kind

ARCHITECTURE_KINDS = {"visualbert": VISUALBERT, "vilbert": VILBERT, "lxmert": LXMERT}
#: config.json keys that are bookkeeping, not builder numbers.
NOT_NUMBERS = ("architecture", "objectives", "feature_spec", KIND_KEY)


def with_model_kind(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with ``"ptm_model"`` set from its ``architecture`` (unchanged if unknown)."""
    kind = ARCHITECTURE_KINDS.get(str(config.get("architecture")))
    return dict(with_kind(config, kind)) if kind is not None else config
