"""What the policy node tells its user while it drives (ROS-free): the moment the policy starts
commanding the robot, then every ``period_s`` the control and inference rates it reached.

Fed with the controller's counters (``ControllerStats``), polled from a timer; returns the lines to log.
"""

from __future__ import annotations

from dataclasses import dataclass

from .controller import RUNNING, ControllerStats


@dataclass
class _Mark:
    t: float
    steps: int
    held: int
    chunks: int
    latency_sum_s: float
    clamped: int
    rate_limited: int


def _mark(t: float, s: ControllerStats) -> _Mark:
    return _Mark(
        t, s.steps, s.held_steps, s.chunks, s.inference_latency_sum_s, s.clamped_steps, s.rate_limited_steps
    )


class ProgressReport:
    """Lines about driving: ``driving: ...`` once the first command went out, then a rate line per period."""

    def __init__(self, control_rate_hz: float, fps: float, n_action_steps: int, period_s: float = 10.0):
        self.control_rate_hz = control_rate_hz
        self.fps = fps
        self.n_action_steps = n_action_steps
        self.period_s = period_s
        self._start: _Mark | None = None  # when the controller (re)started
        self._last: _Mark | None = None  # the last report
        self._driving = False

    def restart(self, now_s: float, stats: ControllerStats) -> None:
        """The controller (re)started with fresh counters."""
        self._start = self._last = _mark(now_s, stats)
        self._driving = False

    def update(self, now_s: float, stats: ControllerStats) -> list[str]:
        if self._start is None or stats.steps + stats.held_steps < self._last.steps + self._last.held:
            self.restart(now_s, stats)  # counters went back: a new run
        lines = []
        if not self._driving and stats.steps > 0:
            self._driving = True
            waited = now_s - self._start.t
            lines.append(
                f"driving: the policy commands the robot ({waited:.1f} s after start); control "
                f"{self.control_rate_hz:g} Hz, policy {self.fps:g} fps, {self.n_action_steps} action(s) "
                f"used per chunk; rates every {self.period_s:g} s"
            )
        if now_s - self._last.t >= self.period_s:
            lines.append(self._rates(_mark(now_s, stats), stats))
        return lines

    def _rates(self, now: _Mark, stats: ControllerStats) -> str:
        last, self._last = self._last, now
        dt = max(now.t - last.t, 1e-9)
        steps, held, chunks = now.steps - last.steps, now.held - last.held, now.chunks - last.chunks
        latency = (now.latency_sum_s - last.latency_sum_s) / chunks if chunks else 0.0
        head = "driving" if steps else "holding"
        line = (
            f"{head}: last {dt:.0f} s: control {(steps + held) / dt:.1f} Hz of {self.control_rate_hz:g} "
            f"({steps} commands, {held} held), inference {chunks / dt:.2f} Hz"
            + (f" ({latency * 1e3:.0f} ms each)" if chunks else "")
        )
        clamped, limited = now.clamped - last.clamped, now.rate_limited - last.rate_limited
        if clamped or limited:
            line += f", safety filter: {clamped} clamped, {limited} step-limited"
        if held and stats.state != RUNNING and stats.message:
            line += f"; holding because: {stats.message}"
        return line


__all__ = ["ProgressReport"]
