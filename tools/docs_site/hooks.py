"""MkDocs hooks (``mkdocs.yml``: ``hooks:``): the generated pages and repository links.

- ``on_files`` adds every page of :func:`tools.docs_site.pages.generated` to the build:
  the CLI, config and API reference, the results pages and the published repository
  files (package READMEs, ``ARCHITECTURE.md``, the data specs).
- ``on_page_markdown`` points links at repository files to their pages on the site
  (``../../packages/knowledge/README.md#kg-embeddings`` -> ``../packages/knowledge.md#...``),
  so a page reads the same on GitHub and on the site. A link to a repository file the
  site does not publish (a source file, a folder) becomes its path in code; a link to a
  path that does not exist is left alone, so ``mkdocs build --strict`` fails on it.
"""

from __future__ import annotations

import functools
import posixpath
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # MkDocs loads this file by path, not as tools.docs_site
    sys.path.insert(0, str(ROOT))

from tools.docs_site.links import prose_lines  # noqa: E402
from tools.docs_site.pages import DOCS, generated, published  # noqa: E402

_LINK = re.compile(r"(?<!\\)(?P<bang>!?)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages (each written now, in memory)."""
    from mkdocs.structure.files import File

    for name, write in generated().items():
        if files.get_file_from_path(name) is not None:
            raise ValueError(
                f"docs/{name}: this page is generated when the site is built "
                "(tools/docs_site/pages.py); remove the file or rename it"
            )
        files.append(File.generated(config, name, content=write()))
    return files


def _sources() -> dict[str, Path]:
    """Each published page's path on the site -> the repository file it shows."""
    return {site: path for path, site in published().items()}


def site_target(source: Path, page: str, target: str) -> str | None:
    """Where a link ``target`` in repository file ``source`` (shown as site page ``page``)
    should point on the site; ``None`` to leave it, ``""`` for no page (code instead)."""
    path, _, anchor = target.partition("#")
    if not path or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or path.startswith("/"):
        return None
    resolved = (source.parent / path).resolve()
    if resolved.is_relative_to(DOCS) and source.is_relative_to(DOCS):
        return None  # a docs page: MkDocs checks it
    mapping = published()
    mapping[ROOT / "README.md"] = "index.md"
    site = mapping.get(resolved)
    if site is None and resolved.is_relative_to(DOCS):
        site = resolved.relative_to(DOCS).as_posix()
    if site is None:
        return "" if resolved.exists() and resolved.is_relative_to(ROOT) else None
    relative = posixpath.relpath(site, posixpath.dirname(page) or ".")
    return f"{relative}#{anchor}" if anchor else relative


def rewrite(markdown: str, source: Path, page: str) -> str:
    """``markdown`` with its links to repository files pointed at the site's pages."""

    def replace(match: re.Match[str], spans: list[tuple[int, int]]) -> str:
        if any(start <= match.start() < end for start, end in spans):
            return match.group(0)  # inside inline code
        target = site_target(source, page, match["target"])
        if target is None:
            return match.group(0)
        if target:
            return f"{match['bang']}[{match['text']}]({target})"
        path = (source.parent / match["target"].partition("#")[0]).resolve()
        shown = path.relative_to(ROOT).as_posix()
        return match["text"] if shown in match["text"] else f"{match['text']} (`{shown}`)"

    lines = markdown.split("\n")
    for number, line in prose_lines(markdown):
        spans = [m.span() for m in _CODE_SPAN.finditer(line)]
        lines[number - 1] = _LINK.sub(functools.partial(replace, spans=spans), line)
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Point the page's links at repository files to their pages on the site."""
    name = page.file.src_uri
    source = _sources().get(name, DOCS / name)
    return rewrite(markdown, source, name)
