"""Message rate bookkeeping (ROS-free): count, windowed rate, largest gap, latest time.

One meter for every rate the stack measures: the topic monitor, the recorder's rate audit, the
motor bus loop. Times are seconds on any monotonic clock the caller chooses.
"""

from __future__ import annotations

from collections import deque


class RateMeter:
    """Counts events and measures their rate over a sliding window of `window_s` seconds."""

    def __init__(self, window_s: float = 2.0):
        self.window_s = window_s
        self.count = 0
        self.max_gap = 0.0
        self.last: float | None = None  # the latest event time (events may arrive out of order)
        self._times: deque[float] = deque()

    def tick(self, t: float) -> None:
        if self._times:
            self.max_gap = max(self.max_gap, t - self._times[-1])
        self._times.append(t)
        self.count += 1
        self.last = t if self.last is None else max(self.last, t)
        self._forget_before(t)

    def _forget_before(self, now: float) -> None:
        while self._times and self._times[0] < now - self.window_s:
            self._times.popleft()

    def in_window(self, now: float) -> int:
        """How many events fall in the window ending at `now`."""
        self._forget_before(now)
        return len(self._times)

    def rate(self, now: float) -> float:
        """Events per second in the window ending at `now` (0 with fewer than two events in it)."""
        self._forget_before(now)
        if len(self._times) < 2:
            return 0.0
        span = max(now - self._times[0], self._times[-1] - self._times[0])
        return (len(self._times) - 1) / span if span > 0 else 0.0

    def restart(self, now: float) -> None:
        """Count afresh from `now` (a new episode); the window keeps the events still in it."""
        self.count = 0
        self.max_gap = 0.0
        self._forget_before(now)
