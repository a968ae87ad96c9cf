"""Real-time scheduling (ROS-free): SCHED_FIFO for chosen threads where the system permits it
(root, CAP_SYS_NICE or an rtprio limit); the caller decides what a refusal means."""

from __future__ import annotations

import os
from collections.abc import Iterable


def process_threads() -> list[int]:
    """The kernel ids of this process's threads (the caller's, the middleware's, every helper's)."""
    return sorted(int(t) for t in os.listdir("/proc/self/task"))


def set_fifo(priority: int, tids: Iterable[int]) -> None:
    """SCHED_FIFO at `priority` (1-99) for the threads `tids`; threads they start later inherit it.
    All or nothing: on a refusal the threads changed so far go back to SCHED_OTHER and the OSError
    propagates."""
    done: list[int] = []
    try:
        for tid in tids:
            os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))
            done.append(tid)
    except OSError:
        for tid in done:
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        raise
