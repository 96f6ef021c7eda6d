"""The pages the docs site generates at build time, and the repository files it publishes.

Nothing here is copied into ``docs/`` by hand: the reference (CLI, config keys, API) is
read from the code, the results pages from ``benchmarks/results/*.md``, and the package
READMEs, ``ARCHITECTURE.md`` and the data specs are published as they are in the
repository. A page under ``docs/`` links to such a file by its repository path
(``../../packages/knowledge/README.md``), which also works on GitHub; the site's hook
(:mod:`tools.docs_site.hooks`) points the link at the published page.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RESULTS = ROOT / "benchmarks" / "results"


def published() -> dict[Path, str]:
    """Repository files shown on the site: their path -> their page on the site."""
    files = {ROOT / "ARCHITECTURE.md": "architecture.md"}
    for readme in sorted(ROOT.glob("packages/*/README.md")):
        files[readme] = f"packages/{readme.parent.name}.md"
    for readme in sorted(ROOT.glob("data_specs/*/README.md")):
        files[readme] = f"data/{readme.parent.name}.md"
    for result in sorted(RESULTS.glob("*.md")):
        files[result] = f"results/{result.stem}.md"
    return files


def _result_page(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    note = (
        f"*Generated from `benchmarks/results/{path.name}`, which the benchmark writes; "
        "the command that produced it is in the file.*\n\n"
    )
    if text.lstrip().startswith("# "):
        title, _, rest = text.lstrip().partition("\n")
        return f"{title}\n\n{note}{rest.lstrip()}"
    return f"# {path.stem.replace('_', ' ').capitalize()}\n\n{note}{text}"


def _first_line(path: Path) -> str:
    """A result file's title, or its first sentence when it has none."""
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line.startswith("# "):
            return line[2:]
        if line and not line.startswith("|"):
            return re.split(r"(?<=\.)\s", line)[0][:120]
    return path.stem


def results_index() -> str:
    """``results/index.md``: every results file, with its title."""
    rows = [
        f"| [{path.stem}]({path.stem}.md) | {_first_line(path).replace('|', '/')} |"
        for path in sorted(RESULTS.glob("*.md"))
    ]
    return "\n".join(
        [
            "# Results",
            "",
            "Every table the benchmarks in `benchmarks/` write to `benchmarks/results/`, one",
            "page each, generated from those files when the site is built. What the numbers",
            "mean, and which claims they support, is in [Findings](findings.md) and in the",
            "guides ([Speed](../guides/speed.md), [Compression](../guides/compression.md)).",
            "",
            "| results | what |",
            "| --- | --- |",
            *rows,
            "",
        ]
    )


def generated() -> dict[str, Callable[[], str]]:
    """Every generated page: its path on the site -> a function that writes its Markdown.

    Functions, not texts, so that a caller that only needs the names (the link test)
    imports no torch.
    """
    from tools.docs_site import api_reference, cli_reference, config_reference

    pages: dict[str, Callable[[], str]] = {
        "reference/cli.md": cli_reference.page,
        "reference/config.md": config_reference.page,
        "reference/api/index.md": api_reference.index_page,
        "results/index.md": results_index,
    }
    for name, module in api_reference.pages().items():
        pages[name] = functools.partial(api_reference.module_page, module)
    for path, name in published().items():
        if path.parent == RESULTS:
            pages[name] = functools.partial(_result_page, path)
        else:
            pages[name] = functools.partial(Path.read_text, path, encoding="utf-8")
    return pages
