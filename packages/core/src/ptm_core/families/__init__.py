"""Model families: one :class:`FamilySpec` each, registered by entry point.

See :mod:`ptm_core.families.spec` for what a spec holds and
:mod:`ptm_core.families.registry` for how packages register theirs.
"""

from ptm_core.families.registry import (
    UnknownFamilyError,
    families,
    for_kind,
    for_recipe,
    get,
    known_kinds,
    register,
)
from ptm_core.families.spec import FamilySpec

__all__ = [
    "FamilySpec",
    "UnknownFamilyError",
    "families",
    "for_kind",
    "for_recipe",
    "get",
    "known_kinds",
    "register",
]
