"""``reference/api/``: a page per public module of each package, from its docstrings.

Each page is one mkdocstrings directive (``::: ptm_core.encoders.layers``); mkdocstrings
reads the module with griffe (statically: nothing is imported) when the site is built.
A module is public when no part of its dotted name starts with ``_``.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Import name -> the folder that holds it; the order is the order on the index page.
PACKAGES: dict[str, Path] = {
    "ptm_core": ROOT / "packages/core/src/ptm_core",
    "ptm_classic": ROOT / "packages/classic/src/ptm_classic",
    "ptm_knowledge": ROOT / "packages/knowledge/src/ptm_knowledge",
    "ptm_multilingual": ROOT / "packages/multilingual/src/ptm_multilingual",
    "ptm_multimodal": ROOT / "packages/multimodal/src/ptm_multimodal",
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


def _summary(module: str) -> str:
    """The first line of a module's docstring, read from its source without importing."""
    import ast

    package, _, rest = module.partition(".")
    folder = PACKAGES[package] / Path(*rest.split(".")) if rest else PACKAGES[package]
    path = folder / "__init__.py" if folder.is_dir() else folder.with_suffix(".py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    doc = ast.get_docstring(tree) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    return first.replace("|", "\\|")


def module_page(module: str) -> str:
    """The Markdown of one module's page."""
    return f"# `{module}`\n\n::: {module}\n"


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
            page = module.replace(".", "/") + ".md"
            lines.append(f"| [`{module}`]({page}) | {_summary(module)} |")
        lines.append("")
    return "\n".join(lines)
