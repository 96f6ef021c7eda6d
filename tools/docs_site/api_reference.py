"""``reference/api/``: a page per public module of each package, from its docstrings.

Each page is one mkdocstrings directive (``::: ptm_core.encoders.layers``); mkdocstrings
reads the module with griffe (statically: nothing is imported) when the site is built.
A module is public when no part of its dotted name starts with ``_``.
"""

from __future__ import annotations

import ast
import posixpath
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Import name -> the folder that holds it; the order is the order on the index page.
PACKAGES: dict[str, Path] = {
    "ptm_core": ROOT / "packages/core/src/ptm_core",
    "ptm_classic": ROOT / "packages/classic/src/ptm_classic",
    "ptm_knowledge": ROOT / "packages/knowledge/src/ptm_knowledge",
    "ptm_multilingual": ROOT / "packages/multilingual/src/ptm_multilingual",
    "ptm_multimodal": ROOT / "packages/multimodal/src/ptm_multimodal",
    "ptm_text": ROOT / "packages/text/src/ptm_text",
    "flows": ROOT / "flows",
}


# Documented elsewhere: ``flows.cli``'s docstring is ``ptm --help`` (reference/cli.md).
SKIPPED = frozenset({"flows.cli"})


def public_modules(package: str) -> list[str]:
    """Every public module of ``package`` (its ``__init__`` as the package's own name)."""
    folder = PACKAGES[package]
    names = []
    for path in sorted(folder.rglob("*.py")):
        parts = list(path.relative_to(folder).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        if any(part.startswith("_") for part in parts):
            continue
        name = ".".join([package, *parts])
        if name not in SKIPPED:
            names.append(name)
    return names


def pages() -> dict[str, str]:
    """Each API page's path on the site -> the module it documents."""
    found = {}
    for package in PACKAGES:
        for module in public_modules(package):
            found[f"reference/api/{module.replace('.', '/')}.md"] = module
    return found


def _source(module: str) -> Path:
    package, _, rest = module.partition(".")
    folder = PACKAGES[package] / Path(*rest.split(".")) if rest else PACKAGES[package]
    return folder / "__init__.py" if folder.is_dir() else folder.with_suffix(".py")


def _tree(module: str) -> ast.Module:
    return ast.parse(_source(module).read_text(encoding="utf-8"))


def _summary(module: str) -> str:
    """The first paragraph of a module's docstring, read from its source (no import)."""
    doc = ast.get_docstring(_tree(module)) or ""
    return " ".join(doc.split("\n\n")[0].split()).replace("|", "\\|")


def _literal(node: ast.AST) -> object:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def exports(module: str) -> dict[str, str | None]:
    """A package's re-exported names (its ``__all__``, less what it defines itself) -> the
    module each is imported from (``from x import N``, or a lazy ``{"N": "x"}`` table)."""
    tree = _tree(module)
    origin: dict[str, str] = {}
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:  # relative: from .config import X
                parts = module.split(".")
                base = ".".join([*parts[: len(parts) - node.level + 1], node.module])
            for alias in node.names:
                origin.setdefault(alias.asname or alias.name, base)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = _literal(node.value) if node.value is not None else None
            for target in targets:
                if isinstance(target, ast.Name) and target.id == "__all__":
                    names = [str(n) for n in value] if isinstance(value, list | tuple) else []
                elif isinstance(target, ast.Name) and isinstance(value, dict):
                    origin.update({str(k): str(v) for k, v in value.items() if isinstance(v, str)})
    own = set(defined(module))
    return {name: origin.get(name) for name in names if name not in own}


def defined(module: str) -> list[str]:
    """The public classes and functions a module defines itself (not imported)."""
    return [
        node.name
        for node in _tree(module).body
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and not node.name.startswith("_")
    ]


def _page_of(module: str) -> str:
    return module.replace(".", "/") + ".md"


def module_page(module: str) -> str:
    """The Markdown of one module's page.

    A package's page renders only what its ``__init__`` defines; what it re-exports is
    listed with a link to the module that documents it, so nothing is rendered twice.
    """
    if _source(module).name != "__init__.py":
        return f"# `{module}`\n\n::: {module}\n"
    members = defined(module)
    lines = [f"# `{module}`", "", f"::: {module}", "    options:"]
    lines.append(f"      members: [{', '.join(members)}]" if members else "      members: false")
    lines.append("")
    here = posixpath.dirname(_page_of(module))
    public = set(public_modules(module.partition(".")[0]))
    reexported = exports(module)
    if reexported:
        lines += ["## Exports", "", "| name | documented in |", "| --- | --- |"]
        for name, origin in reexported.items():
            if origin in public:
                link = posixpath.relpath(_page_of(origin), here)
                lines.append(f"| `{name}` | [`{origin}`]({link}) |")
            else:
                lines.append(f"| `{name}` | `{origin or module}` |")
        lines.append("")
    children = [
        name
        for name in sorted(public)
        if name.startswith(f"{module}.") and "." not in name[len(module) + 1 :]
    ]
    if children:
        lines += ["## Modules", "", "| module | what |", "| --- | --- |"]
        for child in children:
            link = posixpath.relpath(_page_of(child), here)
            lines.append(f"| [`{child}`]({link}) | {_summary(child)} |")
        lines.append("")
    return "\n".join(lines)


def index_page() -> str:
    """``reference/api/index.md``: every public module, by package, with its summary."""
    lines = [
        "# Python API",
        "",
        "*Generated from the docstrings when the site is built: one page per public module*",
        "*(a module none of whose dotted parts starts with `_`).*",
        "",
    ]
    for package in PACKAGES:
        lines += [f"## `{package}`", "", "| module | what |", "| --- | --- |"]
        for module in public_modules(package):
            lines.append(f"| [`{module}`]({_page_of(module)}) | {_summary(module)} |")
        lines.append("")
    return "\n".join(lines)
