"""The benchmarks' way to stop what they started: each process leads its own group (start_new_session)."""

from __future__ import annotations

import os
import signal
import subprocess


def interrupt_and_reap(procs: list[subprocess.Popen], timeout_s: float) -> None:
    """SIGINT to every group at once (each shuts down cleanly, in parallel), then SIGKILL to a group that
    is still there after `timeout_s`."""
    for p in procs:
        os.killpg(p.pid, signal.SIGINT)
    for p in procs:
        try:
            p.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
