"""The README and every docs page link only to files and anchors that exist.

Read without MkDocs (``tools/docs_site/links.py`` parses the Markdown): a relative link
must name a file or folder of the repository, or a page the site generates
(``docs/reference/cli.md``); a ``#anchor`` must be a heading of the page it points at. The
published repository files (package READMEs, ``ARCHITECTURE.md``, data specs, results) are
checked too, since the site shows them. ``mkdocs build --strict`` checks the same on the
built site (``tests/docs/test_site.py``); this test names the file and line, and runs in
a second.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import pytest

from tools.docs_site import links
from tools.docs_site.pages import DOCS, ROOT, generated, published

DOCUMENTS = sorted(
    {ROOT / "README.md", *DOCS.rglob("*.md"), *published()},
    key=lambda path: path.as_posix(),
)


@cache
def _generated_names() -> frozenset[str]:
    return frozenset(generated())


@cache
def _anchors_of(path: Path) -> frozenset[str]:
    if path.is_file():
        return frozenset(links.anchors(path.read_text(encoding="utf-8")))
    name = path.relative_to(DOCS).as_posix()
    return frozenset(links.anchors(generated()[name]()))


def problems_in(document: Path) -> list[str]:
    """Every broken link of ``document``, as ``file:line: ...`` lines."""
    found = []
    where = (
        document.relative_to(ROOT).as_posix() if document.is_relative_to(ROOT) else document.name
    )
    for link in links.links(document.read_text(encoding="utf-8")):
        if link.external:
            continue
        path, anchor = link.split()
        target = links.resolve(document, path)
        in_docs = target.is_relative_to(DOCS)
        is_generated = in_docs and target.relative_to(DOCS).as_posix() in _generated_names()
        if not target.exists() and not is_generated:
            found.append(f"{where}:{link.line}: [{link.text}]({link.target}): no such file")
            continue
        if not anchor:
            continue
        if target.suffix != ".md" or target.is_dir():
            found.append(f"{where}:{link.line}: {link.target}: an anchor into a non-page")
        elif anchor not in _anchors_of(target):
            found.append(
                f"{where}:{link.line}: [{link.text}]({link.target}): "
                f"{target.name} has no heading #{anchor}"
            )
    return found


@pytest.mark.parametrize(
    "document", DOCUMENTS, ids=[path.relative_to(ROOT).as_posix() for path in DOCUMENTS]
)
def test_links_resolve(document: Path) -> None:
    problems = problems_in(document)
    assert not problems, "\n".join(problems)


def test_a_broken_link_and_a_missing_anchor_are_found(tmp_path: Path) -> None:
    """The checker itself: a missing file and a missing heading are both named by line."""
    pretrain = os.path.relpath(DOCS / "guides" / "pretrain.md", tmp_path)
    page = tmp_path / "probe.md"
    page.write_text(
        "# Probe\n\n## A heading\n\n"
        "[ok](#a-heading) [gone](no-such-page.md)\n"
        f"[no anchor]({pretrain}#no-such-heading) [ok too]({pretrain}#data-at-any-size)\n"
        "`[code](not-a-link.md)`\n\n```bash\n[fenced](not-a-link.md)\n```\n",
        encoding="utf-8",
    )
    problems = problems_in(page)
    assert len(problems) == 2, problems
    assert problems[0] == "probe.md:5: [gone](no-such-page.md): no such file"
    assert problems[1].startswith("probe.md:6: [no anchor]")
    assert problems[1].endswith("pretrain.md has no heading #no-such-heading")


@pytest.mark.parametrize(
    ("title", "anchor"),
    [
        ("Preparing a corpus (`ptm prepare`)", "preparing-a-corpus-ptm-prepare"),
        ("How to add ...", "how-to-add"),
        (
            "ERNIE (Tsinghua): knowledgeable encoder and dEA",
            "ernie-tsinghua-knowledgeable-encoder-and-dea",
        ),
        ("`ptm embed-kg`", "ptm-embed-kg"),
    ],
)
def test_anchors_are_the_sites(title: str, anchor: str) -> None:
    """Anchors are Python-Markdown's (what MkDocs renders), repeats numbered ``_1``."""
    assert links.slugify(title) == anchor
    assert links.anchors(f"# {title}\n\n## {title}\n") == {anchor, f"{anchor}_1"}
