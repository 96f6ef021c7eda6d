"""The family registry: every installed package's :class:`FamilySpec`, by entry point.

A package registers its families in its ``pyproject.toml``::

    [project.entry-points."ptm.families"]
    xlm = "ptm_multilingual.families:XLM"

An entry point names one ``FamilySpec`` or a sequence of them. ``pip install ptm-knowledge``
adds its families; nothing in core or flows names them. The modules the entry points name
import only :mod:`ptm_core.families.spec` (their hooks are strings), so listing the
families is cheap. :func:`register` adds a spec in-process (tests, notebooks).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace
from importlib.metadata import EntryPoint, entry_points

from ptm_core.families.spec import FamilySpec

logger = logging.getLogger(__name__)

GROUP = "ptm.families"

_loaded: dict[str, FamilySpec] | None = None
_extra: dict[str, FamilySpec] = {}


class UnknownFamilyError(LookupError):
    """No registered family has the asked name, kind or recipe (the message lists them)."""


def _specs_of(point: EntryPoint) -> list[FamilySpec]:
    try:
        value = point.load()
    except Exception as exc:  # a broken plugin must not break every other family
        logger.warning("entry point %s = %s does not load: %s", point.name, point.value, exc)
        return []
    given = [value] if isinstance(value, FamilySpec) else list(_as_sequence(value))
    specs = [s for s in given if isinstance(s, FamilySpec)]
    bad = [s for s in given if not isinstance(s, FamilySpec)]
    if bad:
        raise TypeError(
            f"entry point {GROUP}:{point.name} = {point.value} must name a FamilySpec or a "
            f"sequence of them; got {type(bad[0]).__name__}"
        )
    package = point.dist.name if point.dist is not None else point.module.partition(".")[0]
    return [replace(spec, package=spec.package or package) for spec in specs]


def _as_sequence(value: object) -> Iterable[object]:
    return value if isinstance(value, (list, tuple)) else [value]


def _add(table: dict[str, FamilySpec], specs: Iterable[FamilySpec]) -> None:
    for spec in specs:
        old = table.get(spec.name)
        if old is not None and old != spec:
            raise ValueError(
                f"two families are named {spec.name!r} (from {old.package or '?'} and "
                f"{spec.package or '?'}); uninstall one"
            )
        table[spec.name] = spec


def families() -> dict[str, FamilySpec]:
    """Every registered family by name (entry points, then :func:`register`)."""
    global _loaded
    if _loaded is None:
        table: dict[str, FamilySpec] = {}
        for point in sorted(entry_points(group=GROUP), key=lambda p: p.name):
            _add(table, _specs_of(point))
        _loaded = table
    merged = dict(_loaded)
    merged.update(_extra)
    _check_kinds(merged)
    return merged


def _check_kinds(table: dict[str, FamilySpec]) -> None:
    owner: dict[str, str] = {}
    for spec in table.values():
        for kind in spec.kinds:
            if owner.setdefault(kind, spec.name) != spec.name:
                raise ValueError(
                    f"model kind {kind!r} is claimed by families {owner[kind]!r} and "
                    f"{spec.name!r}; a kind belongs to one family"
                )


def register(spec: FamilySpec) -> FamilySpec:
    """Add ``spec`` in this process (for tests and notebooks; packages use entry points)."""
    table = dict(families())
    _add(table, [spec])  # the same checks as entry points, before anything is kept
    _check_kinds(table)
    _extra[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Drop a family added by :func:`register`."""
    _extra.pop(name, None)


def get(name: str) -> FamilySpec:
    """The family called ``name``.

    Raises:
        UnknownFamilyError: none is; the message has a "did you mean" and the list.
    """
    table = families()
    try:
        return table[name]
    except KeyError:
        raise UnknownFamilyError(_unknown("family", name, sorted(table))) from None


def for_kind(kind: str) -> FamilySpec:
    """The family whose folders carry ``"ptm_model": kind``."""
    for spec in families().values():
        if kind in spec.kinds:
            return spec
    known = sorted(k for s in families().values() for k in s.kinds)
    raise UnknownFamilyError(
        _unknown("model kind", kind, known)
        + " (is the package that saved it installed? e.g. pip install ptm-knowledge)"
    )


def for_recipe(recipe: str) -> tuple[FamilySpec, str]:
    """The family and stage an older ``recipe:`` name stands for."""
    for spec in families().values():
        if recipe in spec.recipes:
            return spec, spec.recipes[recipe]
    known = sorted(r for s in families().values() for r in s.recipes)
    raise UnknownFamilyError(_unknown("recipe", recipe, known))


def known_kinds() -> frozenset[str]:
    """Every kind some registered family saves."""
    return frozenset(k for spec in families().values() for k in spec.kinds)


def for_hf_model_type(model_type: str) -> str | None:
    """The converter module of a Hugging Face ``model_type``; ``None`` when none is known."""
    for spec in families().values():
        if model_type in spec.hf_model_types:
            return spec.hf_model_types[model_type]
    return None


def _unknown(what: str, name: str, known: list[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown {what} {name!r}{hint} Known: {', '.join(known) or 'none'}"
