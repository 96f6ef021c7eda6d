"""The one-line errors of a config that does not compose (the CLI prints them as ``ptm: ...``).

Kept apart from :mod:`flows.config` so that the runner, which raises them too, and the
schemas, which need the runner to find the family's typed settings, import no cycle.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf


class ConfigError(ValueError):
    """A config cannot be composed; the message names the key or group and the fix."""


def unknown_key(path: list[str], key: str, valid: Iterable[str], owner: str = "") -> ConfigError:
    """``unknown key a.b.c: did you mean a.b.d? valid keys of a.b (Owner): ...``."""
    prefix = "".join(f"{p}." for p in path)
    listed = sorted(set(valid))
    close = difflib.get_close_matches(key, listed, n=1, cutoff=0.6)
    hint = f"did you mean {prefix}{close[0]}? " if close else ""
    node = prefix[:-1] if path else "the config's root"
    of = f" ({owner})" if owner else ""
    return ConfigError(
        f"unknown key {prefix}{key}: {hint}valid keys of {node}{of}: {', '.join(listed)}"
    )


def bad_value(key: str, value: Any, expected: Any, owner: str = "") -> ConfigError:
    """``bad config at a.b: expected int (Owner), got 'x' (str); set a.b=<int>``."""
    of = f" ({owner})" if owner else ""
    shown = OmegaConf.to_container(value) if isinstance(value, DictConfig | ListConfig) else value
    wanted = describe(expected)
    return ConfigError(
        f"bad config at {key}: expected {wanted}{of}, got {shown!r} "
        f"({type(shown).__name__}); set {key}=<{wanted}>"
    )


def negative_count(key: str, value: int, default: int) -> ConfigError:
    """A negative value where the default is a count (``data.batch_size=-1``)."""
    return ConfigError(
        f"bad config at {key}: expected a non-negative int (like the default {default}), "
        f"got {value}; set {key}=<int >= 0>"
    )


def describe(expected: Any) -> str:
    """A type hint as a user reads it: ``int``, ``'post' | 'pre'``, ``float | null``."""
    if expected is Any:
        return "any value"
    origin, args = typing.get_origin(expected), typing.get_args(expected)
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join(describe(a) for a in args)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if expected is type(None):
        return "null"
    if origin is not None:
        return str(expected).replace("typing.", "")
    return getattr(expected, "__name__", str(expected))
