"""Prefect test harness: one temporary API for the session, no heartbeat waits."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")


@pytest.fixture(scope="session", autouse=True)
def _prefect_logging_on_the_real_stderr() -> None:
    """Prefect ties its console handler to ``sys.stderr`` as it is when its logging is first
    set up. Set up here, before any test captures stderr (``capsys``), so a later flow
    never writes to a capture that is already closed."""
    import prefect.main  # noqa: F401


@pytest.fixture(scope="session")
def prefect_harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    home = tmp_path_factory.mktemp("prefect-home")
    os.environ["PREFECT_HOME"] = str(home)
    os.environ["PREFECT_LOCAL_STORAGE_PATH"] = str(home / "storage")
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    with (
        prefect_test_harness(server_startup_timeout=90),
        temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}),
    ):
        yield
