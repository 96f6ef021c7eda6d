"""Compose ptm's Hydra config tree (the same tree for the CLI, the flows and the tests).

A composed config is checked against the schemas behind it before anything runs. A node
with ``_target_`` takes the keys of its target, read by introspection: a dataclass's fields
(``TrainerConfig``), a builder's or a class's parameters (``bert_encoder``,
``MaskedLMObjective``), with their type hints. Any other node (``data``, ``objective``, the
root) takes the keys it has in the config files, with the types of their values there. So a
new field or a new YAML key needs no change here.

An unknown key, with or without Hydra's ``+``, is one :class:`ConfigError` line: the key, a
"did you mean", and the valid keys of that node. A value of the wrong type (``abc`` or ``2.5``
where an int is expected, a negative count) is one line naming the key, the value and the
expected type. A key that the target accepts but the YAML does not list
(``model.embedding_size=64``) is added without the ``+`` that Hydra would ask for.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import inspect
import os
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException, MissingConfigException
from hydra.utils import get_object
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

REPO_ROOT = Path(__file__).resolve().parent.parent
# Where an installed wheel keeps its copy of configs/ and data_specs/ (pyproject.toml's
# [tool.hatch.build.targets.wheel.force-include]).
BUNDLE_ROOT = Path(__file__).resolve().parent / "_bundle"
# Keys Hydra's instantiate reads itself; every node with a ``_target_`` may have them.
HYDRA_KEYS = frozenset({"_target_", "_partial_", "_convert_", "_recursive_", "_args_"})
# Nodes without a ``_target_`` that a recipe reads into a settings dataclass
# (``TaskSpec.from_mapping(cfg.task)``): they are checked against its fields like a target.
NODE_SCHEMAS: dict[str, str] = {"task": "ptm_core.finetune.task_spec.TaskSpec"}


class ConfigError(ValueError):
    """A config cannot be composed; the message names the key or group and the fix."""


def _checkout_root() -> Path | None:
    return REPO_ROOT if (REPO_ROOT / "configs").is_dir() else None


def config_dir() -> Path:
    """The ``configs/`` directory.

    ``PTM_CONFIG_DIR`` wins; then the checkout's ``configs/``; then the copy that an
    installed ``ptm`` wheel ships (``flows/_bundle/configs``).
    """
    if os.environ.get("PTM_CONFIG_DIR"):
        return Path(os.environ["PTM_CONFIG_DIR"]).resolve()
    root = _checkout_root()
    return (root / "configs" if root else BUNDLE_ROOT / "configs").resolve()


def project_root() -> Path:
    """Root that relative paths in configs (``${ptm_root:}``) are resolved against.

    ``PTM_ROOT`` wins; then the checkout; then the installed wheel's bundle, which holds
    the small sample datasets of ``data_specs/`` so that every preset runs outside a
    checkout too.
    """
    if os.environ.get("PTM_ROOT"):
        return Path(os.environ["PTM_ROOT"]).resolve()
    return (_checkout_root() or BUNDLE_ROOT).resolve()


if not OmegaConf.has_resolver("ptm_root"):
    OmegaConf.register_new_resolver("ptm_root", lambda: str(project_root()))

#: The bundled corpora that ship the vocabulary trained on them (relative to project_root()).
SAMPLE_VOCABULARIES = {
    "data_specs/text_corpus/sample/corpus.txt": "data_specs/text_corpus/sample-vocab.txt",
    "data_specs/gain_tasks/sample/corpus.txt": "data_specs/gain_tasks/vocab.txt",
}


def sample_tokenizer(corpus: Any, *other_sources: Any) -> str | None:
    """A data preset's default ``tokenizer``: the bundled vocabulary of a bundled corpus.

    The sample vocabulary fits the sample only (2,240 tokens, 14 % ``[UNK]`` on real
    text). When ``corpus`` is the user's own, or another data source in
    ``other_sources`` is set (``data.linked_corpus``), this is ``None``: the vocabulary is
    then trained on the user's data. A ``data.tokenizer=`` given on the command line
    replaces this interpolation and is used as given.
    """
    if corpus is None or any(source is not None for source in other_sources):
        return None
    root = project_root()
    given = Path(str(corpus)).resolve()
    for sample, vocab in SAMPLE_VOCABULARIES.items():
        if given == (root / sample).resolve():
            return str(root / vocab)
    return None


if not OmegaConf.has_resolver("ptm_sample_tokenizer"):
    OmegaConf.register_new_resolver("ptm_sample_tokenizer", sample_tokenizer)


def compose_config(overrides: Sequence[str] = (), *, config_name: str = "config") -> DictConfig:
    """Compose the config with command-line style overrides, fully resolved and checked.

    Args:
        overrides: e.g. ``["experiment=bert_tiny", "trainer.max_steps=50"]``.
        config_name: the root config file (without ``.yaml``).

    Raises:
        ConfigError: unknown group option, unknown key (with a "did you mean" and the valid
            keys of its node), a value of the wrong type, or a bad interpolation; always one
            line.
    """
    directory = config_dir()
    if not directory.is_dir():
        raise ConfigError(
            f"config directory {directory} not found; set PTM_CONFIG_DIR to a ptm configs/ "
            "folder (or run from a ptm checkout)"
        )
    from flows.hub_models import HubModelError, hub_model_overrides

    try:
        overrides = hub_model_overrides(overrides, directory)
    except HubModelError as exc:
        raise ConfigError(str(exc)) from None
    try:
        parsed = OverridesParser.create().parse_overrides(overrides=list(overrides))
        groups = [o for o in parsed if _is_group(o, directory)]
        values = [o for o in parsed if not _is_group(o, directory) and not o.is_delete()]
        with initialize_config_dir(config_dir=str(directory), version_base="1.3"):
            base = compose(config_name=config_name, overrides=[str(o.input_line) for o in groups])
            valid_roots = {p.name for p in directory.iterdir() if p.is_dir()}
            added = {id(o): _check_key(base, o, valid_roots) for o in values}
            lines = [("++" if added.get(id(o)) else "") + str(o.input_line) for o in parsed]
            cfg = compose(config_name=config_name, overrides=lines)
        OmegaConf.resolve(cfg)
        _check_targets(cfg, "")
        for override in values:
            if not override.is_sweep_override():
                _check_value(cfg, base, override.key_or_group)
        _check_objective_weights(cfg)
    except MissingConfigException as exc:
        raise ConfigError(_missing_option(exc)) from None
    except (HydraException, OmegaConfBaseException) as exc:
        message = " ".join(str(exc).replace("\t", " ").split())
        raise ConfigError(f"cannot compose the config with {list(overrides)}: {message}") from None
    return cfg


def _check_objective_weights(cfg: DictConfig) -> None:
    """Each loss weight is a finite number >= 0 and one at least is above 0.

    A negative weight makes training maximise that loss; all zero trains nothing.
    """
    objective = cfg.get("objective")
    if not isinstance(objective, DictConfig):
        return
    for key in ("weights", "entity_weights"):
        node = objective.get(key)
        if not isinstance(node, DictConfig) or not len(node):
            continue
        values = {str(name): node[name] for name in node}
        for name, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue  # a wrong type is reported by the type check
            if not 0 <= value < float("inf"):
                raise ConfigError(
                    f"objective.{key}.{name}={value}: a loss weight must be a finite number "
                    ">= 0 (0 leaves that loss out)"
                )
        numbers = [v for v in values.values() if isinstance(v, int | float)]
        if key == "weights" and numbers and len(numbers) == len(values) and not any(numbers):
            raise ConfigError(
                f"objective.weights are all 0 ({', '.join(values)}): nothing would be "
                "trained; give at least one loss a weight above 0"
            )


def _missing_option(exc: MissingConfigException) -> str:
    """One line for an unknown group option: the valid options and a "did you mean"."""
    missing = str(exc.missing_cfg_file or "")
    group, _, name = missing.rpartition("/")
    options = sorted(exc.options or [])
    if not group or not options:
        return " ".join(str(exc).replace("\t", " ").split())
    close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    hint = f"did you mean {group}={close[0]}? " if close else ""
    return f"unknown option {group}={name}: {hint}valid options of {group}: {', '.join(options)}"


def _is_group(override: Override, directory: Path) -> bool:
    key = override.key_or_group
    return (
        override.package is not None
        or "/" in key
        or key == "hydra"
        or key.startswith("hydra.")
        or (directory / key).is_dir()
    )


@dataclasses.dataclass(frozen=True)
class _Schema:
    """The keys a node takes: ``hints`` maps each to its type (``Any`` when unknown)."""

    hints: dict[str, Any]
    defaults: dict[str, Any]
    owner: str = ""
    any_key: bool = False
    dataclass: type | None = None


_EMPTY = inspect.Parameter.empty


def _target(node: DictConfig, path: str) -> str | None:
    target = node.get("_target_") if "_target_" in node else NODE_SCHEMAS.get(path)
    return target if isinstance(target, str) else None


def _schema(node: DictConfig, path: str) -> _Schema:
    """The schema of one node: its target's, or the keys and value types it has in YAML."""
    target = _target(node, path)
    if target is None:
        defaults: dict[str, Any] = {str(k): _plain(node, str(k)) for k in node}
        return _Schema({k: _type_of(v) for k, v in defaults.items()}, defaults)
    try:
        obj = get_object(target)
    except Exception:  # an unimportable target is reported when it is built
        return _Schema({}, {}, target, any_key=True)
    owner = getattr(obj, "__qualname__", target)
    try:
        hints = typing.get_type_hints(obj if dataclasses.is_dataclass(obj) else _callable(obj))
    except Exception:  # a hint that cannot be evaluated is simply not checked
        hints = {}
    if dataclasses.is_dataclass(obj) and isinstance(obj, type):
        fields = [f for f in dataclasses.fields(obj) if f.init]
        defaults = {
            f.name: (f.default if f.default is not dataclasses.MISSING else _EMPTY) for f in fields
        }
        keys: dict[str, Any] = {f.name: hints.get(f.name, Any) for f in fields}
        return _Schema(keys, defaults, owner, dataclass=obj)
    try:
        parameters = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return _Schema({}, {}, owner, any_key=True)
    partial = bool(node.get("_partial_", False))
    keys, defaults, any_key = dict[str, Any](), dict[str, Any](), False
    for p in parameters:
        if p.kind is p.VAR_KEYWORD:
            any_key = True
        elif p.kind is not p.VAR_POSITIONAL:
            # A partial node's required arguments without a value come from the recipe.
            if partial and p.default is _EMPTY and p.name not in node:
                continue
            keys[p.name] = hints.get(p.name, Any)
            defaults[p.name] = p.default
    return _Schema(keys, defaults, owner, any_key)


def _callable(obj: Any) -> Any:
    return typing.cast(Any, obj).__init__ if isinstance(obj, type) else obj


def _plain(node: DictConfig, key: str) -> Any:
    try:
        if OmegaConf.is_missing(node, key):
            return None
        value = node[key]
    except OmegaConfBaseException:
        return None
    return value


def _type_of(default: Any) -> Any:
    """The type a YAML default stands for (``None``: any value)."""
    if default is None or isinstance(default, str):
        return Any  # a null default takes anything; a number typed for a string is fine
    if isinstance(default, bool):
        return bool
    if isinstance(default, int):
        return int
    if isinstance(default, float):
        return float
    if isinstance(default, ListConfig):
        return list
    if isinstance(default, DictConfig):
        return dict
    return Any


def _check_key(base: DictConfig, override: Override, valid_roots: set[str]) -> bool:
    """Raise for an unknown key; True when a key its target takes must be added (``++``)."""
    parts = override.key_or_group.split(".")
    node: Any = base
    for depth, part in enumerate(parts):
        if isinstance(node, ListConfig):
            return False
        schema = _schema(node, ".".join(parts[:depth]))
        last = depth == len(parts) - 1
        if part in node:
            if last:
                return False
            node = node[part]
            if not isinstance(node, DictConfig | ListConfig):
                return False  # Hydra names a value used as a node itself
            continue
        if part in schema.hints or schema.any_key:
            return last and not override.is_add() and not override.is_force_add()
        extra = valid_roots if depth == 0 else set()
        raise _unknown(parts[:depth], part, schema, extra) from None
    return False


def _unknown(path: list[str], key: str, schema: _Schema, extra: set[str]) -> ConfigError:
    prefix = "".join(f"{p}." for p in path)
    valid = sorted({k for k in schema.hints if k not in HYDRA_KEYS} | extra)
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    hint = f"did you mean {prefix}{close[0]}? " if close else ""
    node = prefix[:-1] if path else "the config's root"
    owner = f" ({schema.owner})" if schema.owner else ""
    return ConfigError(
        f"unknown key {prefix}{key}: {hint}valid keys of {node}{owner}: {', '.join(valid)}"
    )


def _check_value(cfg: DictConfig, base: DictConfig, key: str) -> None:
    """The overridden ``key``'s value against its type; raises ConfigError."""
    parts = key.split(".")
    parent = OmegaConf.select(cfg, ".".join(parts[:-1])) if len(parts) > 1 else cfg
    if not isinstance(parent, DictConfig) or parts[-1] not in parent:
        return
    name = parts[-1]
    value = _plain(parent, name)
    schema = _schema(parent, ".".join(parts[:-1]))
    if _target(parent, ".".join(parts[:-1])):
        expected = schema.hints.get(name, Any)
        default = schema.defaults.get(name, _EMPTY)
    else:
        base_parent = OmegaConf.select(base, ".".join(parts[:-1])) if len(parts) > 1 else base
        if not isinstance(base_parent, DictConfig) or name not in base_parent or value is None:
            return  # null is how a YAML-only key is switched off (data.tokenizer=null)
        default = _plain(base_parent, name)
        expected = _type_of(default)
    _check_type(key, value, expected, default, schema.owner)
    if (
        isinstance(value, int)
        and not isinstance(value, bool)
        and value < 0
        and isinstance(default, int)
        and not isinstance(default, bool)
        and default >= 0
    ):
        raise ConfigError(
            f"bad config at {key}: expected a non-negative int (like the default {default}), "
            f"got {value}; set {key}=<int >= 0>"
        )


def _check_type(key: str, value: Any, expected: Any, default: Any, owner: str) -> None:
    if value is None and default is None:
        return
    if not _accepts(value, expected):
        of = f" ({owner})" if owner else ""
        shown = (
            OmegaConf.to_container(value) if isinstance(value, DictConfig | ListConfig) else value
        )
        raise ConfigError(
            f"bad config at {key}: expected {_describe(expected)}{of}, got {shown!r} "
            f"({type(shown).__name__}); set {key}=<{_describe(expected)}>"
        )


def _check_targets(node: Any, path: str) -> None:
    """Every ``_target_`` node in the tree: known keys, typed values, a buildable dataclass."""
    if isinstance(node, ListConfig):
        for index, item in enumerate(node):
            _check_targets(item, f"{path}[{index}]")
        return
    if not isinstance(node, DictConfig):
        return
    prefix = f"{path}." if path else ""
    if _target(node, path):
        schema = _schema(node, path)
        for key in node:
            if str(key) not in schema.hints and str(key) not in HYDRA_KEYS and not schema.any_key:
                raise _unknown(path.split(".") if path else [], str(key), schema, set())
        # The dataclass's own checks first: they know the ranges, not only the types.
        if schema.dataclass is not None and not node.get("_partial_", False):
            _build(schema.dataclass, node, path)
        for key in node:
            key = str(key)
            if key in schema.hints and key not in HYDRA_KEYS:
                _check_type(
                    prefix + key,
                    _plain(node, key),
                    schema.hints[key],
                    schema.defaults.get(key),
                    schema.owner,
                )
    for key in node:
        if key not in HYDRA_KEYS:
            _check_targets(_plain(node, str(key)), prefix + str(key))


def _build(cls: type, node: DictConfig, path: str) -> None:
    """Build a settings dataclass so that its own checks (``__post_init__``) run now."""
    values = OmegaConf.to_container(node, resolve=True)
    assert isinstance(values, dict)
    try:
        cls(**{str(k): v for k, v in values.items() if k not in HYDRA_KEYS})
    except ValueError as exc:
        reason = " ".join(str(exc).split())
        raise ConfigError(f"bad config at {path or 'the root'}: {reason}") from None
    except TypeError:
        pass  # a value of the wrong type: _check_type has said which


def _accepts(value: Any, expected: Any) -> bool:
    """Whether ``value`` (from a config) fits the type hint ``expected``; True when unsure."""
    if expected is Any or isinstance(expected, str | typing.TypeVar):
        return True
    origin, args = typing.get_origin(expected), typing.get_args(expected)
    if origin is typing.Union or origin is types.UnionType:
        return any(_accepts(value, a) for a in args)
    if origin is typing.Annotated:
        return _accepts(value, args[0])
    if origin is typing.Literal:
        return value in args
    if expected is type(None):
        return value is None
    if value is None:
        return False
    if expected is bool:
        return isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    container = isinstance(value, DictConfig | ListConfig | dict | list)
    if expected is str or (isinstance(expected, type) and issubclass(expected, os.PathLike)):
        return not container
    base = origin or expected
    if base in (list, tuple, set, frozenset, collections.abc.Sequence):
        if not isinstance(value, ListConfig | list | tuple):
            return False
        if base is tuple and args and args[-1] is not Ellipsis:
            return len(value) == len(args) and all(map(_accepts, value, args))
        return not args or all(_accepts(v, args[0]) for v in value)
    if base in (dict, collections.abc.Mapping):
        return isinstance(value, DictConfig | dict)
    return True


def _describe(expected: Any) -> str:
    if expected is Any:
        return "any value"
    origin, args = typing.get_origin(expected), typing.get_args(expected)
    if origin is typing.Union or origin is types.UnionType:
        return " | ".join(_describe(a) for a in args)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if expected is type(None):
        return "null"
    if origin is not None:
        return str(expected).replace("typing.", "")
    return getattr(expected, "__name__", str(expected))
