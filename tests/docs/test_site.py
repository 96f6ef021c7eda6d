"""The docs site builds with ``mkdocs build --strict`` (``make docs``; CI runs it here).

Strict mode turns every warning into a failure: a link to a missing page or anchor, a
``:::`` directive naming a module that does not exist, a docstring mkdocstrings cannot
render. The generated pages (reference, results, published files) must be on the site.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.docs_site.pages import ROOT

BUILD_TIMEOUT_S = 600


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    warnings = [line for line in result.stderr.splitlines() if "WARNING" in line]
    assert result.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(
        warnings or result.stderr.splitlines()[-30:]
    )
    for page in (
        "index.html",
        "guides/pretrain/index.html",
        "reference/cli/index.html",
        "reference/config/index.html",
        "reference/api/ptm_core/encoders/index.html",
        "results/index.html",
        "results/compression/index.html",
        "packages/knowledge/index.html",
        "architecture/index.html",
    ):
        assert (site / page).is_file(), f"the site has no {page}"
    cli = (site / "reference/cli/index.html").read_text(encoding="utf-8")
    assert "ptm prepare" in cli and "--vocab-size" in cli
    api = (site / "reference/api/ptm_core/encoders/index.html").read_text(encoding="utf-8")
    assert "TransformerEncoder" in api
