"""Logging of the ``ptm`` command line: one line per record on the current stderr."""

from __future__ import annotations

import logging
import sys
from typing import Any

# Loggers of ptm's own code. Importing Prefect (every flow module does) resets the root
# logger to WARNING, which would silence the trainer's step lines and the progress lines
# of `ptm finetune` and the flows; at INFO on these loggers they print whatever the root.
PACKAGE_LOGGERS = (
    "flows",
    "ptm_core",
    "ptm_classic",
    "ptm_knowledge",
    "ptm_multilingual",
    "ptm_multimodal",
)


class _CurrentStderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at each record (a stream captured by a test or
    replaced by a tool), never to the one that was current when logging was set up."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


class _UserErrorWithoutTraceback(logging.Filter):
    """Prefect logs a failed run's exception with its traceback; for an error in the
    user's data or settings the one ``ptm:`` line says it all, so the traceback goes."""

    def __init__(self, user_errors: tuple[type[BaseException], ...]) -> None:
        super().__init__()
        self.user_errors = user_errors

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, self.user_errors):
            record.exc_info, record.exc_text = None, None
        return True


def setup_logging(user_errors: tuple[type[BaseException], ...]) -> None:
    """Log lines to the current stderr; no traceback for ``user_errors`` in Prefect's logs."""
    root = logging.getLogger()
    if not any(isinstance(h, _CurrentStderr) for h in root.handlers):
        handler = _CurrentStderr()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.INFO)
    for name in PACKAGE_LOGGERS:
        if logging.getLogger(name).level == logging.NOTSET:
            logging.getLogger(name).setLevel(logging.INFO)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    for name in ("prefect.flow_runs", "prefect.task_runs"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _UserErrorWithoutTraceback) for f in logger.filters):
            logger.addFilter(_UserErrorWithoutTraceback(user_errors))
