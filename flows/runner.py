"""The one runner: a composed config -> the family's spec -> pretrain / finetune / evaluate.

Which family runs:

- ``family: <name>`` in the config (``ptm families`` lists them), with ``stage: pretrain``
  (the default) or ``stage: finetune``;
- else the older ``recipe: <name>`` key, which a family claims in its spec's ``recipes``
  (``recipe: xlm`` is XLM's pre-training, ``recipe: xlm_finetune`` its fine-tuning);
- to fine-tune, the ``init_from`` folder names its family: the ``"ptm_model"`` kind of its
  ``config.json`` (or, for a folder saved before the kind existed, the family whose
  ``recognizes`` hook claims it). The config's family only says what to expect.

Nothing here names a family: the specs are found by entry point
(:mod:`ptm_core.families.registry`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import os
import re
import typing
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, ValidationError

from flows.config_errors import ConfigError
from ptm_core.families import registry
from ptm_core.families.runner import FinetuneRun, PretrainRun, run_pretraining
from ptm_core.families.spec import FamilySpec

STAGES = ("pretrain", "finetune")


def select(cfg: DictConfig) -> tuple[FamilySpec, str]:
    """The family and stage ``cfg`` asks for (see the module docstring).

    Raises:
        ConfigError: an unknown family, stage or recipe (one line with the known ones), or
            an ``init_from`` folder of another family than ``family:`` names.
    """
    family = cfg.get("family")
    stage = cfg.get("stage")
    try:
        if family:
            spec = registry.get(str(family))
            stage = str(stage or "pretrain")
        else:
            spec, stage = registry.for_recipe(str(cfg.get("recipe", "text")))
    except registry.UnknownFamilyError as exc:
        raise ConfigError(str(exc)) from None
    if stage not in STAGES:
        raise ConfigError(f"stage={stage}: must be one of {', '.join(STAGES)}")
    init_from = cfg.get("init_from")
    if stage == "finetune" and init_from:
        owner = family_of_folder(init_from)
        if owner is not None and owner.name != spec.name and family:
            raise ConfigError(
                f"init_from={init_from} is a {owner.name} model but family={family}; set "
                f"family={owner.name} (or drop family: the folder names its family)"
            )
        spec = owner or spec
    return spec, stage


def family_of_folder(directory: str | Path) -> FamilySpec | None:
    """The family that saved ``directory``; ``None`` when no family claims it (a Hugging
    Face folder of a type no family converts, or no folder at all).

    Raises:
        ConfigError: ``config.json`` names a kind no installed family knows.
    """
    from ptm_core.model_kinds import read_model_kind

    path = Path(directory)
    if not path.is_dir():
        return None
    try:
        kind = read_model_kind(path)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if kind is not None:
        return registry.for_kind(kind)
    try:
        return registry.recognizing(path)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def settings_of(spec: FamilySpec, cfg: DictConfig) -> Any:
    """The family's typed settings, read from the config blocks its dataclass names.

    Each field of ``spec.settings`` is a top-level block (``data``, ``knowledge``,
    ``finetune``); its defaults are the dataclass's. ``None`` when the family has none.

    Raises:
        ConfigError: an unknown key (with a "did you mean") or a value of the wrong type,
            one line naming ``<block>.<key>``.
    """
    if not spec.has("settings"):
        return None
    schema = spec.hook("settings")
    if not dataclasses.is_dataclass(schema):
        raise TypeError(f"family {spec.name!r}: settings {spec.settings} is not a dataclass")
    given = {f.name: cfg[f.name] for f in dataclasses.fields(schema) if f.name in cfg}
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), given)
        return OmegaConf.to_object(merged)
    except ConfigKeyError as exc:
        raise ConfigError(_unknown_key_message(exc)) from None
    except ValidationError as exc:
        key = getattr(exc, "full_key", "") or "config"
        reason = str(exc).splitlines()[0]
        raise ConfigError(f"{key}: {reason}") from None


def _unknown_key_message(exc: ConfigKeyError) -> str:
    full_key = str(getattr(exc, "full_key", "") or "")
    parent, _, key = full_key.rpartition(".")
    schema = getattr(exc, "object_type", None)
    valid = [f.name for f in dataclasses.fields(schema)] if dataclasses.is_dataclass(schema) else []
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f"; did you mean {parent + '.' if parent else ''}{close[0]}?" if close else ""
    listed = f" Valid keys of {parent or 'the root'}: {', '.join(valid)}" if valid else ""
    return f"unknown config key {full_key!r}{hint}{listed}"


def _builder(cfg: DictConfig) -> Any:
    def build(path: str) -> Any:
        node = OmegaConf.select(cfg, path)
        if node is None:
            return {}
        if isinstance(node, DictConfig) and "_target_" not in node:
            return {str(name): _built(child) for name, child in node.items()}
        return _built(node)

    return build


def _built(node: Any) -> Any:
    # A plain value (objective.dropout, a weight) is itself; Hydra builds only config nodes.
    return instantiate(node) if OmegaConf.is_config(node) else node


def _trainer(cfg: DictConfig, overrides: dict[str, Any]) -> Any:
    return instantiate(cfg.trainer, _convert_="all", **overrides)


def pretrain(spec: FamilySpec, cfg: DictConfig, **trainer_overrides: Any) -> Any:
    """Pre-train ``spec``'s family as ``cfg`` says (``trainer_overrides``: TrainerConfig
    fields to change, e.g. ``output_dir``)."""
    if not (spec.has("plan_pretraining") or spec.has("pretrain")):
        raise ConfigError(f"family {spec.name!r} has no pre-training; use stage=finetune")
    objective = cfg.get("objective") or {}
    weights = OmegaConf.to_container(objective.get("weights", {}), resolve=True)
    run = PretrainRun(
        settings=settings_of(spec, cfg),
        model=instantiate(cfg.model) if cfg.get("model") is not None else None,
        objectives=_builder(cfg)("objective.objectives"),
        weights=weights,  # type: ignore[arg-type]
        trainer=_trainer(cfg, trainer_overrides),
        seed=int(cfg.seed),
        init_from=str(cfg.init_from) if cfg.get("init_from") else None,
        build=_builder(cfg),
    )
    return run_pretraining(spec, run)


def finetune(spec: FamilySpec, cfg: DictConfig, **trainer_overrides: Any) -> Any:
    """Fine-tune with ``spec``'s task adapter (the ``init_from`` folder's family)."""
    if not spec.has("finetune"):
        raise ConfigError(f"family {spec.name!r} does not fine-tune (it has no task adapter)")
    _refuse_unread_peft(spec, cfg)
    run = FinetuneRun(
        settings=settings_of(spec, cfg),
        trainer=_trainer(cfg, trainer_overrides),
        seed=int(cfg.seed),
        init_from=str(cfg.init_from) if cfg.get("init_from") else None,
        model=_model_factory(cfg),
        build=_builder(cfg),
    )
    return spec.hook("finetune")(run)


def _refuse_unread_peft(spec: FamilySpec, cfg: DictConfig) -> None:
    """Refuse ``finetune.peft`` for a family whose settings have no ``finetune`` block:
    ``settings_of`` would drop the block and the run would fine-tune every weight."""
    method = OmegaConf.select(cfg, "finetune.peft", default=None)
    if method in (None, "none"):
        return
    schema = spec.hook("settings") if spec.has("settings") else None
    if schema is not None and any(f.name == "finetune" for f in dataclasses.fields(schema)):
        return  # the family reads the block (and applies or refuses the method itself)
    own = _own_peft_block(schema)
    where = (
        f"; this family takes its adapter as {own}.peft=<method> in its own experiment "
        f"(docs/guides/peft.md#other-families)"
        if own
        else " (docs/guides/peft.md lists the families that take an adapter)"
    )
    raise ConfigError(
        f"finetune.peft={method} is not supported for a {spec.name} model "
        f"(init_from={cfg.get('init_from')}); set finetune.peft=none{where}"
    )


def _own_peft_block(schema: Any) -> str | None:
    """The settings block where a family reads its own ``peft`` (``kbert``, ``xlm_finetune``)."""
    if schema is None:
        return None
    try:
        hints = typing.get_type_hints(schema)
    except (NameError, TypeError):  # a settings class with unresolvable annotations
        return None
    for name, hint in hints.items():
        for kind in (hint, *typing.get_args(hint)):  # a block may be ``Block | None``
            block = isinstance(kind, type) and dataclasses.is_dataclass(kind)
            if block and any(f.name == "peft" for f in dataclasses.fields(kind)):
                return name
    return None


def _model_factory(cfg: DictConfig) -> Any:
    # A fine-tune from a folder never builds the preset; only random-init runs do.
    if cfg.get("init_from") or cfg.get("model") is None:
        return None
    return instantiate(cfg.model)


def run_composed(cfg: DictConfig) -> Any:
    """Run a composed config (``ptm pretrain``/``ptm finetune``, the flows) in its run folder:
    :func:`run` under the folder's lock and its fingerprint.

    Raises:
        ConfigError: an unknown family or recipe, or a config node that cannot be built
            (``trainer.max_steps=abc``): the message names the node and keeps the builder's
            own reason, without Hydra's wrapping.
    """
    from hydra.errors import InstantiationException

    from flows.run_identity import config_identity
    from ptm_core.training.run_folder import locked_run_folder, run_identity

    output_dir = cfg.get("trainer", {}).get("output_dir")
    try:
        with contextlib.ExitStack() as stack:
            # One writer per run folder from the first write (tokenizer, caches) to final/;
            # under torchrun rank 0 holds it for all.
            if output_dir and os.environ.get("RANK", "0") == "0":
                stack.enter_context(locked_run_folder(output_dir))
            # The run folder's fingerprint covers the whole config (model, data, settings).
            stack.enter_context(run_identity(config_identity(cfg)))
            return run(cfg)
    except InstantiationException as exc:
        raise ConfigError(instantiation_message(exc)) from None


def instantiation_message(exc: Exception) -> str:
    """One line for a config node that failed to build: ``<key>: <the builder's reason>``."""
    found = re.search(r"^full_key: (\S+)$", str(exc), flags=re.MULTILINE)
    key = found.group(1) if found else "config"
    cause = exc.__cause__
    reason = str(cause) if cause is not None else str(exc).splitlines()[0]
    # One line however the builder worded it (a multi-line reason is joined).
    return f"bad config at {key}: {' '.join(reason.split())}"


def run(cfg: DictConfig, **trainer_overrides: Any) -> Any:
    """Run what ``cfg`` asks for: its family's pre-training or fine-tuning."""
    spec, stage = select(cfg)
    if stage == "pretrain":
        return pretrain(spec, cfg, **trainer_overrides)
    return finetune(spec, cfg, **trainer_overrides)


def families_table() -> str:
    """``ptm families``: one line per installed family (name, stages, kinds, package)."""
    from ptm_core.families import families

    hooks = {"pretrain": "plan_pretraining", "finetune": "finetune"}
    rows = [("family", "stages", "kinds", "package", "description")]
    for spec in sorted(families().values(), key=lambda s: s.name):
        has = {stage for stage, hook in hooks.items() if spec.has(hook)}
        has |= {"pretrain"} if spec.has("pretrain") else set()
        stages = ",".join(stage for stage in hooks if stage in has) or "-"
        kinds = ",".join(spec.kinds) or "-"
        rows.append((spec.name, stages, kinds, spec.package, spec.description))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:4], widths, strict=True)]
        lines.append("  ".join([*cells, row[4]]))
    return "\n".join(lines)
