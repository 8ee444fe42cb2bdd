"""A child process that gets Ctrl-C as it would at a terminal (integration tests)."""

import signal


def as_at_a_terminal() -> None:
    """Let Ctrl-C reach the child, as at a terminal.

    A job started in the background of a shell (a CI step, `make test &`) inherits
    SIGINT ignored, and Python then installs no KeyboardInterrupt handler.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
