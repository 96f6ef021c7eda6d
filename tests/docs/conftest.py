"""README and docs blocks marked ``<!-- runnable slow -->`` run only when asked for.

``make test`` runs ``pytest -q`` with every marker, and the project's ``slow`` marker is
part of that run. The slow blocks of the README and the docs pages (pre-training presets, Inductor compilation)
would add minutes to it, so they carry their own marker, ``readme_slow``, and are
deselected (not skipped) unless the run asks for them: ``make test-readme-slow``,
``PTM_README_SLOW=1`` or a ``-m`` expression that names ``readme_slow``.
"""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Registered here too, so that --strict-markers accepts it before pyproject lists it.
    config.addinivalue_line(
        "markers", "readme_slow: a README block marked `<!-- runnable slow -->` (minutes)"
    )


def _slow_blocks_requested(config: pytest.Config) -> bool:
    return os.environ.get("PTM_README_SLOW") == "1" or "readme_slow" in (
        config.getoption("markexpr", default="") or ""
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _slow_blocks_requested(config):
        return
    kept, deselected = [], []
    for item in items:
        (deselected if item.get_closest_marker("readme_slow") else kept).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept
