"""``reference/config.md``: every typed config key, with its type, default and meaning.

Read at build time from the typed schemas that check a composed config
(:mod:`flows.config_schema`, what ``ptm config --schema`` prints): the trainer's
``TrainerConfig``, a task preset's ``TaskSpec`` and each family's settings dataclass
(``FamilySpec.settings``), nested blocks flattened to their dotted keys. The meaning of a
key is its entry in the dataclass's ``Args:`` or ``Attributes:`` docstring section.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from typing import Any

_SECTION = re.compile(r"^\s*(Args|Arguments|Attributes|Fields):\s*$")
_ENTRY = re.compile(r"^(?P<indent>\s+)(?P<name>\w+)(?:\s*\([^)]*\))?:\s*(?P<text>.*)$")


def _inline(text: str) -> str:
    """reST inline markup as Markdown: ``x`` and :role:`x` -> `x`; table-safe."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text)
    text = text.replace("``", "`")
    return " ".join(text.split()).replace("|", "\\|")


def field_docs(cls: object) -> dict[str, str]:
    """Each field's (or argument's) description from the Google-style ``Args:`` or
    ``Attributes:`` section of ``cls``'s docstring (a class, dataclass or function)."""
    docs: dict[str, str] = {}
    current, indent, inside = "", None, False
    for line in (cls.__doc__ or "").splitlines():
        if _SECTION.match(line):
            inside, indent, current = True, None, ""
            continue
        if not inside:
            continue
        if not line.strip():
            continue
        entry = _ENTRY.match(line)
        if entry and (indent is None or len(entry["indent"]) == indent):
            indent = len(entry["indent"])
            current = entry["name"]
            docs[current] = entry["text"]
        elif indent is not None and len(line) - len(line.lstrip()) > indent and current:
            docs[current] += " " + line.strip()
        elif indent is not None and len(line) - len(line.lstrip()) < indent:
            inside = False
    return {name: _inline(text) for name, text in docs.items()}


def type_name(hint: Any) -> str:
    """A type hint as it reads in source: ``int | None``, ``Literal['auto', 'bf16']``."""
    if hint is type(None):
        return "None"
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return " \\| ".join(repr(value) for value in typing.get_args(hint))
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(type_name(arg) for arg in typing.get_args(hint))
    if origin is not None:
        args = ", ".join(type_name(arg) for arg in typing.get_args(hint))
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{args}]" if args else name
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "")


def _default(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required"
    if dataclasses.is_dataclass(value):
        return "(block below)"
    return f"`{value!r}`".replace("|", "\\|")


def _nested(hint: Any) -> type | None:
    """The dataclass a field holds (``Block`` or ``Block | None``), if any."""
    for candidate in (hint, *typing.get_args(hint)):
        if dataclasses.is_dataclass(candidate) and isinstance(candidate, type):
            return candidate
    return None


def rows(cls: type, prefix: str = "") -> list[str]:
    """Table rows for every key of ``cls``, nested dataclasses as dotted keys."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    lines, blocks = [], []
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        hint = hints.get(field.name, Any)
        key = f"{prefix}{field.name}"
        lines.append(
            f"| `{key}` | {type_name(hint)} | {_default(field)} | {docs.get(field.name, '')} |"
        )
        block = _nested(hint)
        if block is not None:
            blocks.append((key, block))
    for key, block in blocks:
        lines += rows(block, f"{key}.")
    return lines


def _table(title: str, cls: type, prefix: str, intro: str, level: int = 2) -> list[str]:
    return [
        f"{'#' * level} {title}",
        "",
        intro,
        "",
        "| key | type | default | what |",
        "| --- | --- | --- | --- |",
        *rows(cls, prefix),
        "",
    ]


def page() -> str:
    """The Markdown of ``reference/config.md``."""
    from hydra.utils import get_class

    from flows.config_schema import NODE_SCHEMAS, TRAINER
    from ptm_core.families import registry

    trainer = get_class(TRAINER)
    task = get_class(NODE_SCHEMAS["task"])
    lines = [
        "# Config keys",
        "",
        "*Generated from the typed schemas (`flows/config_schema.py`) when the site is built.*",
        "Each key is set on the command line as a Hydra override (`trainer.max_steps=50`);",
        "an unknown key or a wrong type is refused with one line before anything runs.",
        "`ptm config --schema experiment=NAME` prints the same schemas for one preset, and",
        "`ptm config experiment=NAME` the composed values. Model and objective nodes are",
        "typed by their `_target_`'s signature: the keys are the builder's arguments",
        "([Models](#models), [Objectives](#objectives)).",
        "",
        *_table(
            f"Trainer (`trainer.*`, `{trainer.__qualname__}`)",
            trainer,
            "trainer.",
            f"The `trainer` block of every run: `{TRAINER}`.",
        ),
        *_table(
            f"Task presets (`task.*`, `{task.__qualname__}`)",
            task,
            "task.",
            f"A fine-tuning task (`configs/task/`, `ptm finetune task=NAME`): "
            f"`{NODE_SCHEMAS['task']}`.",
        ),
        "## Families",
        "",
    ]
    untyped = []
    families = registry.families()
    for name, spec in sorted(families.items()):
        if not spec.has("settings"):
            untyped.append(f"`{name}`")
            continue
        settings = spec.hook("settings")
        lines += _table(
            f"`{name}` ({settings.__qualname__})",
            settings,
            "",
            f"{spec.description}. Keys at the root of the composed config "
            f"(`{spec.package}`, `{spec.settings}`).",
            level=3,
        )
    if untyped:
        lines += [
            "The blocks of the other families are checked against the keys and types their",
            f"presets' YAML has: {', '.join(untyped)}.",
            "",
        ]
    from tools.docs_site import target_reference

    return "\n".join([*lines, *target_reference.sections()])
