"""Start a child as a terminal starts a foreground job, whatever signal dispositions this test run inherited.

A shell without job control starts its background commands (`cmd &`, and so `nohup bash scripts/test &`
from a script) with SIGINT and SIGQUIT ignored, and an ignored signal stays ignored across exec: a
Ctrl-C test run that way would test `nohup`, not Ctrl-C. A terminal's foreground job starts with both at
their defaults, so the Ctrl-C tests start their children that way (in a session of their own).
"""

from __future__ import annotations

import signal


def as_a_foreground_job() -> None:
    """``preexec_fn`` for subprocess.Popen: SIGINT and SIGQUIT back to their defaults."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
