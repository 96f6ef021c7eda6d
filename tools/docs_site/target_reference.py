"""The ``model=`` and ``objective=`` keys of ``reference/config.md``, from their targets.

A model or objective preset (``configs/model/*.yaml``, ``configs/objective/*.yaml``) is a
node with a ``_target_``: a builder or a class whose signature is the node's schema
(:func:`flows.config_schema.target_schema`, what the composed config is checked against).
Each target gets one table, with the presets that use it.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tools.docs_site.config_reference import field_docs, type_name

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
# Config group -> (section title, how its keys are written).
GROUPS = {
    "model": ("Models", "`model=NAME` picks a preset; its keys are `model.<key>`."),
    "objective": (
        "Objectives",
        "`objective=NAME` picks a preset; its keys are `objective.objectives.<name>.<key>`.",
    ),
}


def _targets(node: Any) -> Iterator[str]:
    """Every ``_target_`` in a loaded YAML tree."""
    if isinstance(node, dict):
        if isinstance(node.get("_target_"), str):
            yield node["_target_"]
        for value in node.values():
            yield from _targets(value)
    elif isinstance(node, list):
        for value in node:
            yield from _targets(value)


def presets_by_target(group: str) -> dict[str, list[str]]:
    """Each ``_target_`` of a config group -> the presets (file stems) that name it."""
    from omegaconf import OmegaConf

    found: dict[str, list[str]] = {}
    for path in sorted((CONFIGS / group).glob("*.yaml")):
        tree = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        for target in dict.fromkeys(_targets(tree)):
            found.setdefault(target, []).append(path.stem)
    return found


def _default(value: Any) -> str:
    from flows.config_schema import REQUIRED

    if value is REQUIRED:
        return "required (from the data or the model)"
    return f"`{value!r}`".replace("|", "\\|")


def target_rows(target: str) -> list[str]:
    """One row per key a ``_target_`` node takes (its type, default and docstring)."""
    from hydra.utils import get_object

    from flows.config_schema import HYDRA_KEYS, target_schema

    schema = target_schema(target)
    try:
        obj = get_object(target)
    except Exception:  # an unimportable target: its keys without descriptions
        obj = None
    docs = field_docs(obj)
    if isinstance(obj, type):
        docs = {**field_docs(typing.cast(Any, obj).__init__), **docs}
    return [
        f"| `{key}` | {type_name(hint)} | {_default(schema.defaults[key])} | {docs.get(key, '')} |"
        for key, hint in schema.keys.items()
        if key not in HYDRA_KEYS
    ]


def sections() -> list[str]:
    """The Markdown sections for every model and objective target."""
    lines: list[str] = []
    for group, (title, intro) in GROUPS.items():
        lines += [f"## {title}", "", intro, ""]
        for target, presets in sorted(presets_by_target(group).items()):
            names = ", ".join(f"`{name}`" for name in presets)
            lines += [
                f"### `{target}`",
                "",
                f"Presets: {names}.",
                "",
                "| key | type | default | what |",
                "| --- | --- | --- | --- |",
                *target_rows(target),
                "",
            ]
    return lines
