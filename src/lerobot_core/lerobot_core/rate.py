"""Message rate bookkeeping (ROS-free): count, windowed rate, largest gap."""

from __future__ import annotations

from collections import deque


class RateMeter:
    """Counts events and measures their rate over a sliding window of `window_s` seconds."""

    def __init__(self, window_s: float = 2.0):
        self.window_s = window_s
        self.count = 0
        self.max_gap = 0.0
        self._times: deque[float] = deque()

    def tick(self, t: float) -> None:
        if self._times:
            self.max_gap = max(self.max_gap, t - self._times[-1])
        self._times.append(t)
        self.count += 1
        while self._times and self._times[0] < t - self.window_s:
            self._times.popleft()

    def rate(self, now: float) -> float:
        """Events per second in the window ending at `now` (0 with fewer than two events in it)."""
        while self._times and self._times[0] < now - self.window_s:
            self._times.popleft()
        if len(self._times) < 2:
            return 0.0
        span = max(now - self._times[0], self._times[-1] - self._times[0])
        return (len(self._times) - 1) / span if span > 0 else 0.0
