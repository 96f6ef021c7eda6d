"""Markdown links and heading anchors, read without MkDocs.

The link test (``tests/docs/test_links.py``) and the site's hook both need to know which
links a page holds and which anchors a page defines. Anchors follow Python-Markdown's
``toc`` extension (what MkDocs renders, and what GitHub renders for the headings ptm
writes): lower case, punctuation dropped, runs of spaces and hyphens made one hyphen; a
repeated heading gets ``_1``, ``_2``.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

# [text](target) and ![alt](target), not inside inline code; the target has no spaces.
_LINK = re.compile(r"(?<!\\)!?\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^(?P<hashes>#{1,6})\s+(?P<title>.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_EXPLICIT_ID = re.compile(r"\s*\{:?\s*#(?P<id>[\w-]+)[^}]*\}\s*$")


@dataclass(frozen=True)
class Link:
    """A link in a Markdown file: where it is and what it points at."""

    line: int
    text: str
    target: str

    @property
    def external(self) -> bool:
        """Whether the target is a URL (``https:``, ``mailto:``) rather than a path."""
        return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", self.target))

    def split(self) -> tuple[str, str]:
        """The path and the anchor (``""`` when absent) of the target."""
        path, _, anchor = self.target.partition("#")
        return path, anchor


def slugify(title: str) -> str:
    """The anchor Python-Markdown's ``toc`` gives a heading titled ``title``."""
    text = _CODE_SPAN.sub(lambda m: m.group(0).strip("`"), title)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text only
    text = re.sub(r"[*_]{1,2}(?=\w)|(?<=\w)[*_]{1,2}", "", text)  # emphasis markers
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines of ``text`` outside fenced code blocks, numbered from 1."""
    lines, fence = [], ""
    for number, line in enumerate(text.splitlines(), start=1):
        opening = _FENCE.match(line)
        if opening and (not fence or line.strip().startswith(fence)):
            fence = "" if fence else opening.group(1)
            continue
        if not fence:
            lines.append((number, line))
    return lines


def anchors(text: str) -> set[str]:
    """Every heading anchor of a Markdown text (repeats numbered as ``toc`` does)."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose_lines(text):
        match = _HEADING.match(line)
        if match is None:
            continue
        title = match["title"]
        explicit = _EXPLICIT_ID.search(title)
        if explicit:
            found.add(explicit["id"])
            continue
        slug = slugify(title)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}_{count}")
    return found


def links(text: str) -> list[Link]:
    """Every inline link and image of a Markdown text, outside code."""
    found = []
    for number, line in prose_lines(text):
        prose = _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)
        for match in _LINK.finditer(prose):
            found.append(Link(number, match["text"], match["target"]))
    return found


def resolve(source: Path, target: str) -> Path:
    """The file a relative link path in ``source`` names (``""`` is the page itself)."""
    return (source.parent / target).resolve() if target else source.resolve()
