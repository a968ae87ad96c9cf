"""Live rate audit of the recorder's input streams (ROS-free).

Each stream has an expected rate (the contract's fps for cameras, its declared rate for others;
0 = not checked) and a staleness limit. ``note(name, t)`` records an arrival (monotonic seconds);
``audit(now)`` measures every stream over the last ``window_s`` and returns the streams whose
condition (ok / low rate / stale) *changed* since the last audit, so the caller warns once when a
stream drops below its rate, once when it goes stale, and once more when it recovers, while it is happening, not only afterwards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lerobot_core.rate import RateMeter


@dataclass(frozen=True)
class AuditSpec:
    name: str
    topic: str
    expected_rate_hz: float = 0.0  # 0 = rate not checked
    stale_after_s: float = 0.5  # no message for this long = stale


@dataclass
class StreamHealth:
    name: str
    topic: str
    expected_rate_hz: float
    measured_rate_hz: float = 0.0
    received: int = 0
    dropped_ticks: int = 0
    age_s: float = -1.0  # -1 = never received
    stale: bool = True
    rate_ok: bool = False
    judged: bool = False  # a full window has passed since the audit started

    @property
    def healthy(self) -> bool:
        return not self.stale and (self.rate_ok or not self.judged)

    @property
    def condition(self) -> str:
        """ "ok", "stale" or "low_rate": a warning is due whenever this changes."""
        if self.stale:
            return "stale"
        return "ok" if self.healthy else "low_rate"

    def describe(self) -> str:
        if self.age_s < 0:
            return f"stream {self.name!r} ({self.topic}): no message received yet"
        parts = []
        if self.stale:
            parts.append(f"stale: last message {self.age_s:.2f} s ago")
        if self.judged and not self.rate_ok and self.expected_rate_hz > 0:
            parts.append(
                f"rate {self.measured_rate_hz:.1f} Hz below the expected {self.expected_rate_hz:g} Hz"
            )
        state = "; ".join(parts) if parts else f"ok ({self.measured_rate_hz:.1f} Hz)"
        return f"stream {self.name!r} ({self.topic}): {state}"


@dataclass
class _Track:
    spec: AuditSpec
    meter: RateMeter
    condition: str | None = None


class RateAudit:
    """Sliding-window rate and staleness per stream (see the module docstring)."""

    def __init__(self, specs, window_s: float = 1.0, tolerance: float = 0.9):
        if not (window_s > 0 and math.isfinite(window_s)):
            raise ValueError(f"window_s must be > 0, got {window_s!r}")
        if not (0 < tolerance <= 1):
            raise ValueError(f"tolerance must be in (0, 1], got {tolerance!r}")
        self.window_s = float(window_s)
        self.tolerance = float(tolerance)
        self._tracks = {s.name: _Track(s, RateMeter(self.window_s)) for s in specs}
        self._start: float | None = None

    @property
    def names(self) -> list[str]:
        return list(self._tracks)

    def reset(self, now: float) -> None:
        """Start counting afresh (a new episode): counts go to 0, the rate is judged after one window."""
        self._start = now
        for tr in self._tracks.values():
            tr.meter.restart(now)
            tr.condition = None

    def note(self, name: str, t: float) -> None:
        self._tracks[name].meter.tick(t)

    def health(self, name: str, now: float, dropped_ticks: int = 0) -> StreamHealth:
        tr = self._tracks[name]
        start = self._start if self._start is not None else now
        judged = now - start >= self.window_s
        span = min(self.window_s, max(now - start, 1e-9))
        measured = tr.meter.in_window(now) / span
        age = -1.0 if tr.meter.last is None else max(0.0, now - tr.meter.last)
        stale = age < 0 or age > tr.spec.stale_after_s
        exp = tr.spec.expected_rate_hz
        rate_ok = exp <= 0 or measured >= exp * self.tolerance
        return StreamHealth(
            name=name,
            topic=tr.spec.topic,
            expected_rate_hz=exp,
            measured_rate_hz=measured,
            received=tr.meter.count,
            dropped_ticks=dropped_ticks,
            age_s=age,
            stale=stale,
            rate_ok=rate_ok if judged else True,
            judged=judged,
        )

    def audit(
        self, now: float, dropped: dict[str, int] | None = None
    ) -> tuple[list[StreamHealth], list[StreamHealth]]:
        """(health of every stream, the streams whose health changed since the last audit)."""
        dropped = dropped or {}
        all_health, changed = [], []
        for name, tr in self._tracks.items():
            h = self.health(name, now, dropped.get(name, 0))
            all_health.append(h)
            if tr.condition is None:
                # first audit of the episode: only report problems, not "ok"
                if not h.healthy and (h.judged or h.stale):
                    changed.append(h)
                tr.condition = h.condition if (h.judged or h.stale) else None
            elif tr.condition != h.condition:
                changed.append(h)
                tr.condition = h.condition
        return all_health, changed
