"""Which code loads and saves each model kind: the registry behind ``from_pretrained``.

Model classes never import checkpoint code. Their ``from_pretrained`` / ``save_pretrained``
call :func:`load` / :func:`save` here with their ``"ptm_model"`` kind
(:mod:`ptm_core.model_kinds`); this module maps the kind to a ``"module:function"``
string and imports it on first use, so it imports no model and no format module
itself. Hugging Face ``model_type`` values (``bert``, ``albert``, ``electra``, ``xlnet``) map to
converter modules through the family specs' ``hf_model_types``: modules exposing
``config_from_hf``, ``config_to_hf``, ``state_from_hf``, ``state_to_hf`` and
``check_exportable``.

An extension registers its kinds from the module that defines the model, with strings::

    register(XLM, load="ptm_multilingual.checkpoint:load_xlm",
             save="ptm_multilingual.checkpoint:save_xlm")
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ptm_core import model_kinds

# kind -> "module:function" (load(path, **options) / save(model, path, **options)), for the
# kinds no family spec names yet (:func:`register`); specs' ``load``/``save`` come first.
_LOADERS: dict[str, str] = {}
_SAVERS: dict[str, str] = {}


def register(kind: str, *, load: str | None = None, save: str | None = None) -> None:
    """Name the functions that load and save ``kind`` (``"module:function"`` strings)."""
    if kind not in model_kinds.known_kinds():
        raise ValueError(
            f"unknown model kind {kind!r}; a family claims it in its FamilySpec.kinds first"
        )
    for table, target in ((_LOADERS, load), (_SAVERS, save)):
        if target is not None:
            _check_target(target)
            table[kind] = target


def resolve(target: str) -> Callable[..., Any]:
    """The function a ``"module:function"`` string names (its module imported now)."""
    _check_target(target)
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _from_spec(kind: str, table: str) -> Callable[..., Any] | None:
    from ptm_core.families import registry as families

    for spec in families.families().values():
        target = getattr(spec, table).get(kind)
        if target is not None:
            return resolve(target)
    return None


def loader(kind: str) -> Callable[..., Any]:
    """The function that loads a ``kind`` directory (its family's ``load`` hook)."""
    found = _from_spec(kind, "load")
    if found is not None:
        return found
    try:
        return resolve(_LOADERS[kind])
    except KeyError:
        raise KeyError(f"no loader registered for model kind {kind!r}") from None


def saver(kind: str) -> Callable[..., Any]:
    """The function that saves a ``kind`` model (its family's ``save`` hook)."""
    found = _from_spec(kind, "save")
    if found is not None:
        return found
    try:
        return resolve(_SAVERS[kind])
    except KeyError:
        raise KeyError(f"no saver registered for model kind {kind!r}") from None


def load(kind: str, path: Any, /, **options: Any) -> Any:
    """Load a ``kind`` checkpoint directory."""
    return loader(kind)(path, **options)


def save(kind: str, model: Any, path: Any, /, **options: Any) -> Any:
    """Save ``model`` (of ``kind``) to ``path``."""
    return saver(kind)(model, path, **options)


def hf_encoder_families() -> tuple[str, ...]:
    """The Hugging Face ``model_type``\\ s that load into a TransformerEncoder."""
    from ptm_core.families import registry as families

    return tuple(t for s in families.families().values() for t in s.hf_model_types)


def hf_encoder_family(model_type: str) -> ModuleType | None:
    """The family module for a Hugging Face ``model_type``; ``None`` if unregistered."""
    from ptm_core.families import registry as families

    module = families.for_hf_model_type(model_type)
    return importlib.import_module(module) if module is not None else None


def _check_target(target: str) -> None:
    module, sep, name = target.partition(":")
    if not (module and sep and name):
        raise ValueError(f"expected 'module:function', got {target!r}")
