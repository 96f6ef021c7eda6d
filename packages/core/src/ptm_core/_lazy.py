"""Package ``__init__`` names that load on first use (PEP 562)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, namespace: dict[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for a package whose names live in submodules.

    ``import package`` then costs nothing beyond the package itself: a name's module is
    imported when the name is first read, and the value is kept in ``namespace``.

    Args:
        package: the package's ``__name__`` (for the error of an unknown name).
        namespace: the package's ``globals()``.
        exports: name -> module that defines it.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted([*namespace, *exports])

    return __getattr__, __dir__
