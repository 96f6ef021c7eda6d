"""Orchestration for ptm: Prefect flows and the `ptm` command line.

Importing this package sets offline defaults before Prefect is imported (a user's own
settings win): no telemetry, a generous start-up time for the temporary local server.
"""

import contextlib
import os
from pathlib import Path

for _key, _value in {
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "90",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(_key, _value)

# Prefect creates only the last folder of PREFECT_HOME: a nested one whose parent does not
# exist yet (a fresh clone's .cache/prefect) fails with "unable to open database file".
if _home := os.environ.get("PREFECT_HOME"):
    with contextlib.suppress(OSError):
        Path(_home).expanduser().mkdir(parents=True, exist_ok=True)
