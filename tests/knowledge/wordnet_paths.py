"""Where the WordNet tests find their databases (a helper module, not tests)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "wordnet"
SYSTEM = Path("/usr/share/wordnet")


def system_wordnet() -> Path:
    """The installed WordNet 3.0 (Debian's wordnet-base); skips without it, except on CI
    (``CI=true``), where ``.ci/run`` installs it and its absence is a failure."""
    if not (SYSTEM / "data.noun").is_file():
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI: {SYSTEM} is missing; .ci/run installs wordnet-base")
        pytest.skip(f"{SYSTEM} not installed (apt-get install wordnet-base)")
    return SYSTEM
