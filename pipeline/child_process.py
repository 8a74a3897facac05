"""``die_with_parent``: a child process (a llama.cpp server, a pool's worker) is killed when the process
that started it dies, so a worker killed with ``kill -9`` leaves nothing running behind it."""

from __future__ import annotations

import contextlib
import signal
import sys


def die_with_parent() -> None:
    """In the child (Linux): the kernel sends it SIGKILL when its parent dies (``PR_SET_PDEATHSIG``); a
    no-op elsewhere. Strictly, when the parent's thread that started it ends: a pool's children start in
    the thread that starts the pool, their replacements in the pool's own thread. SIGKILL, not SIGTERM:
    a server's graceful shutdown waits for the request in flight (a CPU generation whose client is gone
    kept an orphaned server busy for half an hour)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
