"""Compose ptm's Hydra config tree (the same tree for the CLI, the flows and the tests).

A composed config is checked against typed schemas before anything runs
(:mod:`flows.config_schema`): a node with ``_target_`` is merged into its target's dataclass
(``TrainerConfig``) or the one made from a builder's signature (``bert_encoder``); the blocks
the selected family reads (``data``, ``knowledge``) into its typed settings; any other node
(``objective``, the root) keeps the keys and value types its YAML has. So a new field or a
new YAML key needs no change here.

An unknown key, with or without Hydra's ``+``, is one :class:`ConfigError` line: the key, a
"did you mean", and the valid keys of that node. A value of the wrong type (``abc`` or ``2.5``
where an int is expected, a negative count) is one line naming the key, the value and the
expected type. A key that the schema takes but the YAML does not list
(``model.embedding_size=64``) is added without the ``+`` that Hydra would ask for.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException, MissingConfigException
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from flows.config_errors import ConfigError, negative_count, unknown_key
from flows.config_schema import (
    HYDRA_KEYS,
    Schema,
    check,
    check_settings,
    schema_of,
    value_of,
    yaml_schema,
)

__all__ = ["ConfigError", "compose_config", "config_dir", "project_root", "sample_tokenizer"]

REPO_ROOT = Path(__file__).resolve().parent.parent
# Where an installed wheel keeps its copy of configs/ and data_specs/ (pyproject.toml's
# [tool.hatch.build.targets.wheel.force-include]).
BUNDLE_ROOT = Path(__file__).resolve().parent / "_bundle"


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
            settings = _family_settings(base, values)
            roots = {p.name for p in directory.iterdir() if p.is_dir()}
            added = {id(o): _check_key(base, o, roots, settings) for o in values}
            lines = [("++" if added.get(id(o)) else "") + str(o.input_line) for o in parsed]
            cfg = compose(config_name=config_name, overrides=lines)
        OmegaConf.resolve(cfg)
        _check_tree(cfg, "", settings)
        if settings is not None:
            check_settings(cfg, settings)
        for override in values:
            if not override.is_sweep_override():
                _check_value(cfg, base, override.key_or_group, settings)
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


def _family_settings(base: DictConfig, values: list[Override]) -> type | None:
    """The typed settings dataclass of the family the config selects (``family``/``stage``,
    else ``recipe``; ``init_from``'s family to fine-tune: :func:`flows.runner.select`).

    ``None`` when no registered family is selected or the family has no settings yet: its
    blocks then keep the keys and types of their YAML (the fallback until every family has
    settings). An unknown family is reported by the runner, as before.
    """
    from flows.runner import select

    keys = ("family", "stage", "recipe", "init_from")
    probe = OmegaConf.create({key: value_of(base, key) for key in keys if key in base})
    for override in values:
        if override.key_or_group in keys and not override.is_sweep_override():
            probe[override.key_or_group] = override.value()
    try:
        spec, _ = select(probe)
    except (ConfigError, LookupError):  # the runner says so when it runs
        return None
    if not spec.has("settings"):
        return None
    from flows.config_schema import register_schemas

    register_schemas({spec.name: spec})
    return typing.cast(type, spec.hook("settings"))


def _schema(node: DictConfig, path: str, settings: type | None) -> Schema:
    return schema_of(node, path, settings) or yaml_schema(node)


def _check_key(
    base: DictConfig, override: Override, roots: set[str], settings: type | None
) -> bool:
    """Raise for an unknown key; True when a key its schema takes must be added (``++``).

    ``roots`` (the group folders) are listed as valid keys of the root.
    """
    blocks = {f.name for f in dataclasses.fields(settings)} if settings is not None else set()
    parts = override.key_or_group.split(".")
    node: Any = base
    for depth, part in enumerate(parts):
        if isinstance(node, ListConfig):
            return False
        last = depth == len(parts) - 1
        if part in node:
            if last:
                return False
            node = node[part]
            if not isinstance(node, DictConfig | ListConfig):
                return False  # Hydra names a value used as a node itself
            continue
        schema = _schema(node, ".".join(parts[:depth]), settings)
        if part in schema.keys or schema.any_key or (depth == 0 and part in blocks):
            return last and not override.is_add() and not override.is_force_add()
        valid = schema.valid_keys(node) + (sorted(roots | blocks) if depth == 0 else [])
        raise unknown_key(parts[:depth], part, valid, schema.owner) from None
    return False


def _check_tree(node: Any, path: str, settings: type | None) -> None:
    """Every node a dataclass types (targets, the family's blocks), in the config's order."""
    if isinstance(node, ListConfig):
        for index, item in enumerate(node):
            _check_tree(item, f"{path}[{index}]", settings)
        return
    if not isinstance(node, DictConfig):
        return
    schema = schema_of(node, path, settings)
    if schema is not None:
        check(node, path, schema)
    prefix = f"{path}." if path else ""
    for key in node:
        if key not in HYDRA_KEYS:
            _check_tree(value_of(node, str(key)), prefix + str(key), settings)


def _check_value(cfg: DictConfig, base: DictConfig, key: str, settings: type | None) -> None:
    """The overridden ``key``'s value: a YAML-only key's against the type of its value in
    the YAML (the typed nodes are checked whole); a count's sign against its default."""
    parts = key.split(".")
    path, name = ".".join(parts[:-1]), parts[-1]
    parent = OmegaConf.select(cfg, path) if path else cfg
    if not isinstance(parent, DictConfig) or name not in parent:
        return
    value = value_of(parent, name)
    schema = schema_of(parent, path, settings)
    if schema is None:
        base_parent = OmegaConf.select(base, path) if path else base
        if not isinstance(base_parent, DictConfig) or name not in base_parent or value is None:
            return  # null is how a YAML-only key is switched off (data.tokenizer=null)
        schema = yaml_schema(base_parent)
        check(OmegaConf.masked_copy(parent, [name]), path, schema)
    default = schema.defaults.get(name)
    if _is_count(value) and _is_count(default) and value < 0 <= default:
        raise negative_count(key, value, default)


def _is_count(value: Any) -> typing.TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
