"""The typed schemas of ptm's config tree: OmegaConf structured dataclasses in Hydra's ConfigStore.

Which dataclass types a node of a composed config:

- a node with ``_target_`` (and ``task``, which the fine-tuning reads into ``TaskSpec``): the
  target's own dataclass (``TrainerConfig``), or for a builder or a class
  (``bert_encoder``, ``MaskedLMObjective``) a dataclass made once from its signature and
  type hints. Hints OmegaConf cannot hold are mapped: ``Sequence[X]`` -> ``list[X]``,
  ``Literal[...]`` -> its base type (the value is checked here), ``PathLike`` -> ``str``, a
  module, a tokenizer or a union with one -> ``Any`` (such a node is checked on its own);
- a block the selected family reads (``data``, ``knowledge``, ``finetune``): that field's
  dataclass in the family's typed settings (``FamilySpec.settings``);
- any other node (``objective``, ``attention``, the root) and, until its family has a
  settings dataclass, a family's blocks: the keys its YAML has, with the types of their
  values there (:mod:`flows.config` keeps that fallback).

A node is merged into its dataclass, so OmegaConf types each value; what OmegaConf would
silently convert (``'3'`` or ``yes`` for an int or a bool) or cannot express (a Literal's
values, a fixed tuple's length) is refused here, because the composed config is passed on
as written. Each schema is stored in Hydra's ConfigStore: ``schema/trainer``,
``schema/family/<name>``, ``schema/target/<target>`` (:func:`register_schemas`).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import inspect
import keyword
import os
import re
import types
import typing
from collections.abc import Mapping
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.utils import get_object
from omegaconf import MISSING, DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException, ValidationError

from flows.config_errors import ConfigError, bad_value, unknown_key

# Keys Hydra's instantiate reads itself; every node with a ``_target_`` may have them.
HYDRA_KEYS = frozenset({"_target_", "_partial_", "_convert_", "_recursive_", "_args_"})
# Nodes without a ``_target_`` that are read into a dataclass, checked like a target.
NODE_SCHEMAS: dict[str, str] = {"task": "ptm_core.finetune.task_spec.TaskSpec"}
TRAINER = "ptm_core.training.TrainerConfig"
# The default of a required argument (and of a dataclass field with a default_factory).
REQUIRED = inspect.Parameter.empty
_PRIMITIVES = (int, float, bool, str)
_SEQUENCES = (list, tuple, set, frozenset, collections.abc.Sequence)
_MAPPINGS = (dict, collections.abc.Mapping)


@dataclasses.dataclass(frozen=True)
class Schema:
    """The keys of one config node and the structured dataclass that types them.

    Attributes:
        keys: each key the node takes -> its type hint as written (messages describe it).
        defaults: each key's default (:data:`REQUIRED` when it has none).
        structured: the dataclass the node is merged into.
        owner: named in messages after the node's path (``TrainerConfig``); empty for a
            family's settings, whose errors read like the YAML nodes' they replace.
        any_key: the target takes ``**kwargs``.
        dataclass: the target's own dataclass, built at compose time so that its own checks
            (``__post_init__``: ranges, choices) run before anything does.
    """

    keys: Mapping[str, Any]
    defaults: Mapping[str, Any]
    structured: type | None = None
    owner: str = ""
    any_key: bool = False
    dataclass: type | None = None

    def valid_keys(self, node: DictConfig) -> list[str]:
        """The keys to list for ``node``: a partial node's missing required arguments (the
        recipe gives them) are not offered."""
        partial = self.dataclass is None and bool(node.get("_partial_", False))
        return [
            key
            for key, default in self.defaults.items()
            if key not in HYDRA_KEYS and not (partial and default is REQUIRED and key not in node)
        ]


@functools.cache
def target_schema(target: str) -> Schema:
    """The schema of a ``_target_``: its dataclass's fields or its parameters, typed."""
    try:
        obj = get_object(target)
    except Exception:  # an unimportable target is reported when it is built
        return Schema({}, {}, owner=target, any_key=True)
    owner = getattr(obj, "__qualname__", target)
    if dataclasses.is_dataclass(obj) and isinstance(obj, type):
        schema = dataclasses.replace(dataclass_schema(obj), owner=owner, dataclass=obj)
    else:
        try:
            parameters = list(inspect.signature(obj).parameters.values())
        except (TypeError, ValueError):
            return Schema({}, {}, owner=owner, any_key=True)
        hints = _hints(typing.cast(Any, obj).__init__ if isinstance(obj, type) else obj)
        named = [p for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        keys = {p.name: hints.get(p.name, Any) for p in named}
        defaults = {p.name: p.default for p in named}
        any_key = any(p.kind is p.VAR_KEYWORD for p in parameters)
        structured = _make_dataclass(owner, keys, defaults)
        schema = Schema(keys, defaults, structured, owner, any_key)
    if schema.structured is not None:
        store = ConfigStore.instance()
        store.store(group="schema/target", name=target, node=schema.structured)
        if target == TRAINER:
            store.store(group="schema", name="trainer", node=schema.structured)
    return schema


@functools.cache
def dataclass_schema(cls: type) -> Schema:
    """A dataclass's schema: the class itself when OmegaConf can type every field, else a
    copy with the fields' types mapped."""
    hints = _hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    keys = {f.name: hints.get(f.name, Any) for f in fields}
    defaults = {
        f.name: f.default if f.default is not dataclasses.MISSING else REQUIRED for f in fields
    }
    try:
        OmegaConf.structured(cls)
        structured = cls
    except OmegaConfBaseException:
        structured = _make_dataclass(cls.__qualname__, keys, defaults)
    return Schema(keys, defaults, structured)


def settings_schema(settings: type | None, path: str) -> Schema | None:
    """The schema of block ``path`` (``data``, ``data.linked``) in a family's settings
    dataclass; ``None`` when the settings do not type that block."""
    cls: Any = settings
    for part in path.split(".") if path and settings is not None else []:
        if not (dataclasses.is_dataclass(cls) and isinstance(cls, type)):
            return None
        cls = _without_none(_hints(cls).get(part))
    if path and dataclasses.is_dataclass(cls) and isinstance(cls, type):
        return dataclass_schema(cls)
    return None


def schema_of(node: DictConfig, path: str, settings: type | None) -> Schema | None:
    """The schema that types ``node`` (at ``path``); ``None`` for a YAML-only node."""
    target = node.get("_target_") if "_target_" in node else NODE_SCHEMAS.get(path)
    if isinstance(target, str):
        return target_schema(target)
    return settings_schema(settings, path)


def yaml_schema(node: DictConfig) -> Schema:
    """The fallback schema of a node no dataclass types: the keys it has in the YAML files,
    each typed like its value there (a null or a string there takes any value)."""
    defaults = {str(k): value_of(node, str(k)) for k in node}
    keys = {k: _type_of(v) for k, v in defaults.items()}
    return Schema(keys, defaults, _make_dataclass("yaml", keys, defaults))


def value_of(node: DictConfig, key: str) -> Any:
    """``node[key]``; ``None`` when it is missing (``???``) or cannot be read."""
    try:
        if OmegaConf.is_missing(node, key):
            return None
        return node[key]
    except OmegaConfBaseException:
        return None


def _type_of(default: Any) -> Any:
    """The type a YAML default stands for (``Any``: any value)."""
    if default is None or isinstance(default, str):
        return Any  # a null default takes anything; a number typed for a string is fine
    if isinstance(default, bool | int | float):
        return type(default)
    if isinstance(default, ListConfig):
        return list
    if isinstance(default, DictConfig):
        return dict
    return Any


def check(node: DictConfig, path: str, schema: Schema) -> None:
    """``node`` against ``schema``: its keys, the dataclass's own checks, then the types.

    Raises:
        ConfigError: one line naming the key, as in :mod:`flows.config_errors`.
    """
    parts = path.split(".") if path else []
    if not schema.any_key:
        for key in map(str, node):
            if key not in schema.keys and key not in HYDRA_KEYS:
                raise unknown_key(parts, key, schema.valid_keys(node), schema.owner)
    if schema.dataclass is not None and not node.get("_partial_", False):
        _build(schema.dataclass, node, path)
    if schema.structured is None:
        return
    # A key that is no identifier (a YAML mapping's) has no field: it takes any value.
    fields = {f.name for f in dataclasses.fields(schema.structured)}
    given = OmegaConf.masked_copy(node, [k for k in map(str, node) if k in fields])
    prefix = f"{path}." if path else ""
    failed, reason = None, ""
    converted: dict[str, Any] = {}
    try:
        merged = OmegaConf.merge(_empty(schema.structured), given)
        converted = typing.cast(dict[str, Any], OmegaConf.to_container(merged))
    except ValidationError as exc:
        failed = re.split(r"[.\[]", str(exc.full_key or ""))[0]
        reason = str(exc).splitlines()[0]
    for key in map(str, given):
        if OmegaConf.is_missing(given, key):
            continue
        value = given[key]
        plain = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
        refused = key in converted and _refused(plain, converted[key], schema.keys[key])
        if key == failed or refused:
            raise bad_value(prefix + key, value, schema.keys[key], schema.owner)
    if failed is not None:  # OmegaConf named no key of the node
        raise ConfigError(f"bad config at {path or 'the root'}: {reason}")


def typed(node: DictConfig) -> DictConfig:
    """A checked target node merged into its schema: every key reads its typed value, and a
    key the YAML leaves out reads the schema's default (``typed(cfg.trainer).devices``)."""
    target = node.get("_target_")
    schema = target_schema(str(target))
    if schema.structured is None:
        return node
    fields = {f.name for f in dataclasses.fields(schema.structured)}
    given = OmegaConf.masked_copy(node, [k for k in map(str, node) if k in fields])
    return typing.cast(DictConfig, OmegaConf.merge(_empty(schema.structured), given))


def check_settings(cfg: DictConfig, settings: type) -> None:
    """The family's settings fields at the root (a block's keys are checked with the tree),
    then the settings built from ``cfg`` so that their own checks (``__post_init__``) run now.

    Raises:
        ConfigError: one line naming the key or the block.
    """
    names = [f.name for f in dataclasses.fields(settings) if f.name in cfg]
    check(OmegaConf.masked_copy(cfg, names), "", dataclass_schema(settings))
    for name in names:
        try:
            OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(settings), {name: cfg[name]}))
        except OmegaConfBaseException as exc:  # a required field left out (``???``)
            key = str(getattr(exc, "full_key", "") or name)
            raise ConfigError(f"bad config at {key}: {str(exc).splitlines()[0]}") from None
        except ValueError as exc:
            raise ConfigError(f"bad config at {name}: {' '.join(str(exc).split())}") from None


def register_schemas(families: Mapping[str, Any] | None = None) -> list[str]:
    """Store ``schema/trainer`` and ``schema/family/<name>`` for each family in ``families``
    (a name -> FamilySpec mapping; default: every registered family) that has typed settings.

    Returns:
        The names stored, e.g. ``["schema/trainer", "schema/family/xlm"]``.
    """
    if families is None:
        from ptm_core.families import registry

        families = registry.families()
    store = ConfigStore.instance()
    trainer = target_schema(TRAINER).structured
    store.store(group="schema", name="trainer", node=trainer)
    stored = ["schema/trainer"]
    for name, spec in sorted(families.items()):
        if spec.has("settings"):
            store.store(group="schema/family", name=name, node=spec.hook("settings"))
            stored.append(f"schema/family/{name}")
    return stored


def schema_text(cfg: DictConfig) -> str:
    """``ptm config --schema``: the typed schemas ``cfg`` is checked against, as YAML with
    their defaults (the trainer's and the selected family's settings)."""
    from flows.runner import select

    trainer = target_schema(TRAINER).structured
    assert trainer is not None
    parts = [f"# schema/trainer ({trainer.__qualname__})", OmegaConf.to_yaml(_empty(trainer))]
    try:
        spec, _ = select(cfg)
    except (ConfigError, LookupError) as exc:
        return "\n".join([*parts, f"# no family's settings: {exc}", ""])
    if not spec.has("settings"):
        note = "its blocks are checked against the keys and types of their YAML"
        return "\n".join([*parts, f"# family {spec.name} has no typed settings yet: {note}", ""])
    settings = spec.hook("settings")
    register_schemas({spec.name: spec})
    header = f"# schema/family/{spec.name} ({settings.__qualname__})"
    return "\n".join([*parts, header, OmegaConf.to_yaml(OmegaConf.structured(settings))])


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
        pass  # a value of the wrong type: the structured merge says which


@functools.cache
def _empty(structured: type) -> DictConfig:
    return OmegaConf.structured(structured)


def _hints(obj: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(obj)
    except Exception:  # a hint that cannot be evaluated is simply not checked
        return {}


def _refused(given: Any, typed: Any, hint: Any) -> bool:
    """Whether ``given`` is not of ``hint`` although OmegaConf took it (as ``typed``): a
    string read as a number, anything but a bool read as a bool, a value outside a
    Literal, a fixed tuple of another length."""
    if given is None:
        return False
    if (isinstance(given, str) and not isinstance(typed, str)) or (
        isinstance(typed, bool) and not isinstance(given, bool)
    ):
        return True
    hint = _without_none(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return given not in args
    if isinstance(given, list) and isinstance(typed, list) and origin in _SEQUENCES and args:
        if origin is tuple and args[-1] is not Ellipsis:
            return len(given) != len(args) or any(map(_refused, given, typed, args))
        return any(_refused(g, t, args[0]) for g, t in zip(given, typed, strict=False))
    return False


def _without_none(hint: Any) -> Any:
    """``X`` for ``X | None``; any other hint as it is."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def _omegaconf_type(hint: Any) -> Any:
    """The nearest type OmegaConf can hold (``Any`` when there is none)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        return _omegaconf_type(args[0])
    if origin is typing.Literal:
        kinds = {type(a) for a in args}
        return kinds.pop() if len(kinds) == 1 and kinds <= set(_PRIMITIVES) else Any
    if origin is typing.Union or origin is types.UnionType:
        options = [a for a in args if a is not type(None)]
        mapped = list(dict.fromkeys(_omegaconf_type(a) for a in options))
        if len(mapped) == 1 and mapped[0] is not Any:
            inner = mapped[0]
        elif mapped and all(m in _PRIMITIVES for m in mapped):
            inner = typing.Union[tuple(mapped)]  # noqa: UP007 (built at run time)
        else:
            return Any
        return typing.Optional[inner] if len(options) < len(args) else inner  # noqa: UP045
    if hint in _PRIMITIVES:
        return hint
    base = origin or hint
    if base is os.PathLike or (isinstance(base, type) and issubclass(base, os.PathLike)):
        return str
    if base in _SEQUENCES:
        single = len(args) == 1 or (len(args) == 2 and args[1] is Ellipsis)
        same = bool(args) and (single or len(set(args)) == 1)
        return list[_omegaconf_type(args[0]) if same else Any]  # type: ignore[misc]
    if base in _MAPPINGS:
        value = _omegaconf_type(args[1]) if len(args) == 2 and args[0] is str else Any
        return dict[str, value]  # type: ignore[valid-type]
    return Any


def _make_dataclass(owner: str, keys: Mapping[str, Any], defaults: Mapping[str, Any]) -> type:
    """A structured dataclass with one field per key; a field OmegaConf cannot type with its
    default becomes ``Any``."""
    fields = []
    for name, hint in keys.items():
        if not name.isidentifier() or keyword.iskeyword(name):
            continue
        default = defaults[name]
        kind = _omegaconf_type(hint)
        if default is None and kind is not Any:
            kind = typing.Optional[kind]  # noqa: UP045 (a null default takes null)
        spec = _field(default)
        try:
            OmegaConf.structured(dataclasses.make_dataclass("_Field", [(name, kind, spec)]))
        except OmegaConfBaseException:
            kind, spec = Any, _field(default if _is_plain(default) else REQUIRED)
        fields.append((name, kind, spec))
    name = re.sub(r"\W", "_", owner) + "Schema"
    cls = dataclasses.make_dataclass(name, fields)
    cls.__module__ = __name__
    return cls


def _field(default: Any) -> Any:
    if default is REQUIRED or not _is_plain(default):
        return dataclasses.field(
            default=str(default) if isinstance(default, os.PathLike) else MISSING
        )
    if isinstance(default, list | tuple | dict):
        return dataclasses.field(default_factory=functools.partial(_copy, default))
    return dataclasses.field(default=default)


def _copy(default: Any) -> Any:
    return dict(default) if isinstance(default, dict) else list(default)


def _is_plain(value: Any) -> bool:
    """Whether a default can stand in a YAML file (a scalar, or lists/dicts of them)."""
    if value is None or isinstance(value, _PRIMITIVES):
        return True
    if isinstance(value, list | tuple):
        return all(map(_is_plain, value))
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    return False
