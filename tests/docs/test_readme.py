"""The README stays a front page: short, and its system table lists every family.

The manual lives in ``docs/`` (a MkDocs site); the README says what ptm is, the two
commands, install, a tour and one line per family, each linking to its guide.
"""

from __future__ import annotations

import re

from ptm_core.families import registry
from tools.docs_site.links import links, resolve
from tools.docs_site.pages import DOCS, ROOT

README = ROOT / "README.md"
MAX_LINES = 300
# A system table row: | `family` | system | package | preset | [guide](docs/guides/...) |
ROW = re.compile(r"^\|\s*`(?P<family>\w+)`\s*\|(?P<rest>.*)\|\s*$")


def _system_rows() -> dict[str, str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("\n## The systems\n", 1)[1].split("\n## ", 1)[0]
    return {m["family"]: m["rest"] for line in section.splitlines() if (m := ROW.match(line))}


def test_readme_is_at_most_300_lines() -> None:
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, (
        f"README.md has {lines} lines (at most {MAX_LINES}): move the detail into a page "
        "under docs/ and link to it"
    )


def test_the_system_table_has_every_family_once_with_its_guide() -> None:
    rows = _system_rows()
    families = set(registry.families())
    assert set(rows) == families, (
        f"README.md 'The systems': missing {sorted(families - set(rows))}, "
        f"not a family {sorted(set(rows) - families)}"
    )
    for family, rest in rows.items():
        guides = [link for link in links(rest) if link.target.startswith("docs/guides/")]
        assert len(guides) == 1, f"README.md: the row of {family} links to no guide"
        assert resolve(README, guides[0].split()[0]).is_relative_to(DOCS / "guides")
