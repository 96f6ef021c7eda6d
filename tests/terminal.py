"""Start a child process as a terminal would, for the tests that press Ctrl-C on it.

A shell without job control starts a background command (``make test &``, some CI
launchers) with SIGINT ignored, and every process below it inherits that: a child CLI
then never sees the Ctrl-C a test sends and runs to the end. The tests that send SIGINT
start their child with the default action, as an interactive shell's foreground job has.
"""

from __future__ import annotations

import signal


def sigint_as_in_a_terminal() -> None:
    """``preexec_fn`` for ``subprocess.Popen``: SIGINT's default action and unblocked."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
