"""The one time-alignment core: streams of timestamped samples resampled onto a tick grid.

Live recording, rosbag2 import and the policy node's observation assembly all go through this
module, so training data and served observations are built by the same rules. It never imports
rclpy: times are plain integer nanoseconds, values are whatever the caller stores (numpy arrays,
images, strings).

Model
    * The grid: ticks at ``anchor + k * 1/fps`` (k = 0, 1, ...), computed exactly in integer
      nanoseconds (``anchor + floor(k * 1e9 / fps)``), so there is no drift over long episodes.
      ``anchor`` is ``start_ns`` when given, else the moment every *required* stream has data
      (the largest first-sample time among them). The first tick is the first grid point at or
      after that moment: ticks before it are counted in ``stats.ticks_before_start``, not as drops.
    * Each stream has a :class:`StreamSpec`:
        - ``policy="hold"``: the latest sample at or before the tick.
        - ``policy="nearest"``: the sample closest to the tick (ties go to the earlier one),
          at most ``tolerance_s`` away.
        - ``policy="interpolate"``: linear interpolation between the samples just before and
          just after the tick (values are float arrays, e.g. joint positions). A sample exactly
          on the tick is used as is. ``tolerance_s`` bounds the gap between the two samples.
          With no later sample yet (only possible when a tick is forced by the clock, see
          ``pop_ready(now_ns)``, or for optional streams) the latest value is held and counted
          in ``StreamStats.held``.
        - ``max_staleness_s``: when the latest sample at or before the tick is older than this,
          the tick is dropped (all policies).
        - ``timeline="header"`` uses the ``stamp_ns`` given to :meth:`Aligner.push` (the
          message's header stamp), ``"receive"`` uses ``receive_ns`` (arrival / bag log time).
        - ``required=False``: the stream does not gate the start or the tick emission and a tick
          without its data is not dropped; its value is then ``None``.
        - ``latched=True``: the stream publishes on change only (a task text, a mode): its latest
          value stays valid, so it never settles ticks nor bounds the episode end (when required,
          it still gates the start).
    * A tick that fails any required stream's rule is dropped, counted once in
      ``stats.ticks_dropped`` and, per failing stream, in ``StreamStats.dropped_ticks`` and
      ``StreamStats.drop_reasons`` (``"no_data"``, ``"stale"``, ``"out_of_tolerance"``,
      ``"gap"``). Frame indices stay consecutive: a dropped tick produces no frame.

Emission (the same rules offline and online)
    A tick at time T is *settled* when every required, non-latched stream has a sample at or after T
    (arrival is then assumed in order per stream, so no later sample can change the result), or
    when the caller's clock says T is old enough: ``T <= now_ns - latency_margin_s``.
    * Offline (bag import): ``push`` messages in log order and call ``pop_ready(now_ns=log_time)``
      now and then, then ``finish()``; or push everything and call ``finish()`` once (give
      ``history_s=None`` then, so nothing is pruned).
    * Online (recorder node): ``push`` from callbacks, ``pop_ready(now_ns=clock_now)`` from a
      timer; at stop, wait one latency margin and call ``finish(end_ns=stop_time)``.
    * The default end of ``finish()`` is the newest time every required, non-latched stream has
      data for, plus ``end_slack_ns`` (``GRID_SLACK_NS``, 0.1 ms, at most half a period). A source
      that counts whole-ns periods (a simulator in lockstep: 33333333 ns at 30 fps) stamps its
      k-th sample up to k/3 ns before the exact grid tick k (under 1 ns per tick at any fps);
      without the slack the last tick of such a recording lay just past every sample and was
      lost. 0.1 ms covers over a hundred thousand ticks, and a tick it admits takes samples at
      most 0.1 ms older than itself. A caller with a hard end (a stop) bounds ``end_ns`` itself.
    * Policy node: ``push`` from callbacks, ``sample_at(now_ns - margin)`` whenever an
      observation is needed (does not consume anything, so give a short ``history_s``, e.g. 1.0:
      it is then what bounds the memory of image streams).

An Aligner is not thread-safe: call it from one thread (e.g. a single-threaded executor) or
guard it with a lock.

Memory stays bounded: samples older than the one a future tick can still use are discarded once
ticks are emitted, and, whatever happens, samples more than ``history_s`` older than the newest
sample seen are discarded (except each stream's latest one), counted in ``StreamStats.pruned``.

API
    StreamSpec(name, policy="hold", tolerance_s=None, max_staleness_s=None, timeline="header",
               required=True, latched=False)
    Aligner(fps, streams, start_ns=None, latency_margin_s=0.1, history_s=10.0, on_drop=None)
        .push(name, value, stamp_ns=None, receive_ns=None) -> None
        .pop_ready(now_ns=None) -> list[Frame]      settled ticks, in order
        .finish(end_ns=None) -> list[Frame]         every remaining tick up to end_ns (default: the
                                                    oldest newest-sample time of the required,
                                                    non-latched streams, + end_slack_ns)
        .sample_at(time_ns) -> Frame | DroppedTick  evaluate one instant, consume nothing
        .restart(start_ns=None) -> AlignmentStats   new episode on the same streams; keeps the
                                                    samples the new episode can use, returns the
                                                    finished episode's stats
        .covered_ns                                 the newest time every required, non-latched
                                                    stream has data for (None while one has none)
        .end_slack_ns                               min(GRID_SLACK_NS, half a period)
        .started, .finished, .next_tick_ns, .stats (AlignmentStats), .drops (recent DroppedTick)
    Frame(index, tick_index, time_ns, timestamp, values, sample_ns)
    DroppedTick(tick_index, time_ns, reasons)
    stamp_to_ns(stamp) -> int                       builtin_interfaces/Time (sec, nanosec) -> ns
"""

from __future__ import annotations

import bisect
import collections
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from lerobot_core.time import NS_PER_S as _NS
from lerobot_core.time import stamp_to_ns

__all__ = [
    "HOLD",
    "NEAREST",
    "INTERPOLATE",
    "POLICIES",
    "HEADER",
    "RECEIVE",
    "TIMELINES",
    "StreamSpec",
    "Frame",
    "DroppedTick",
    "StreamStats",
    "AlignmentStats",
    "Aligner",
    "GRID_SLACK_NS",
    "stamp_to_ns",
]

HOLD, NEAREST, INTERPOLATE = "hold", "nearest", "interpolate"
POLICIES = (HOLD, NEAREST, INTERPOLATE)
HEADER, RECEIVE = "header", "receive"
TIMELINES = (HEADER, RECEIVE)

# a single pop_ready call emitting more ticks than this means the clock and the stamps disagree
_MAX_TICKS_PER_CALL = 1_000_000
# how far past the newest common sample finish()'s default end reaches (see "Emission")
GRID_SLACK_NS = 100_000


def _seconds_to_ns(value: float | None, what: str) -> int | None:
    if value is None:
        return None
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite number >= 0 seconds, got {value!r}")
    return int(round(value * _NS))


@dataclass(frozen=True)
class StreamSpec:
    """How one stream is sampled at each tick (see the module docstring)."""

    name: str
    policy: str = HOLD
    tolerance_s: float | None = None
    max_staleness_s: float | None = None
    timeline: str = HEADER
    required: bool = True
    latched: bool = False

    def __post_init__(self):
        if not self.name:
            raise ValueError("stream name must not be empty")
        if self.policy not in POLICIES:
            raise ValueError(
                f"stream {self.name!r}: policy {self.policy!r} is not one of {', '.join(POLICIES)}"
            )
        if self.timeline not in TIMELINES:
            raise ValueError(
                f"stream {self.name!r}: timeline {self.timeline!r} is not one of {', '.join(TIMELINES)}"
            )
        _seconds_to_ns(self.tolerance_s, f"stream {self.name!r}: tolerance_s")
        _seconds_to_ns(self.max_staleness_s, f"stream {self.name!r}: max_staleness_s")


@dataclass(frozen=True)
class Frame:
    """One aligned tick: a value per stream (``None`` for an optional stream without data)."""

    index: int  # frame index within the episode: 0, 1, 2, ... (dropped ticks do not count)
    tick_index: int  # grid index k (dropped ticks count)
    time_ns: int  # tick time on the streams' timeline
    timestamp: float  # index / fps, the episode-relative time LeRobot stores
    values: dict[str, Any]
    sample_ns: dict[str, int | None]  # time of the sample used (interpolation: the earlier one)


@dataclass(frozen=True)
class DroppedTick:
    tick_index: int
    time_ns: int
    reasons: dict[str, str]  # stream -> "no_data" | "stale" | "out_of_tolerance" | "gap"


@dataclass
class StreamStats:
    received: int = 0
    late: int = 0  # arrived with a time at or before a tick already emitted
    pruned: int = 0  # discarded by the history bound before any tick used them
    held: int = 0  # interpolate stream without a later sample: last value held
    dropped_ticks: int = 0
    drop_reasons: dict[str, int] = field(default_factory=dict)
    first_ns: int | None = None
    last_ns: int | None = None

    @property
    def rate_hz(self) -> float | None:
        """Measured rate over the samples received (None with fewer than two)."""
        if (
            self.received < 2
            or self.first_ns is None
            or self.last_ns is None
            or self.last_ns <= self.first_ns
        ):
            return None
        return (self.received - 1) * _NS / (self.last_ns - self.first_ns)


@dataclass
class AlignmentStats:
    fps: float
    ticks_emitted: int = 0
    ticks_dropped: int = 0
    ticks_before_start: int = 0
    first_tick_ns: int | None = None  # the first and last settled tick (emitted or dropped)
    last_tick_ns: int | None = None
    streams: dict[str, StreamStats] = field(default_factory=dict)

    def summary(self) -> str:
        parts = [f"{self.ticks_emitted} frames, {self.ticks_dropped} dropped ticks"]
        for name, s in self.streams.items():
            rate = f"{s.rate_hz:.1f} Hz" if s.rate_hz is not None else "n/a"
            extra = f", drops {s.dropped_ticks} {dict(s.drop_reasons)}" if s.dropped_ticks else ""
            parts.append(f"{name}: {s.received} msgs, {rate}{extra}")
        return "; ".join(parts)


class _Buffer:
    """Samples of one stream sorted by time (stable for equal times)."""

    __slots__ = ("times", "values")

    def __init__(self):
        self.times: list[int] = []
        self.values: list[Any] = []

    def insert(self, t: int, value: Any) -> None:
        if not self.times or t >= self.times[-1]:
            self.times.append(t)
            self.values.append(value)
        else:
            i = bisect.bisect_right(self.times, t)
            self.times.insert(i, t)
            self.values.insert(i, value)

    def drop_before_index(self, i: int) -> None:
        if i > 0:
            del self.times[:i]
            del self.values[:i]


class Aligner:
    """Resamples streams onto a tick grid at ``fps`` (see the module docstring)."""

    def __init__(
        self,
        fps: float,
        streams: Iterable[StreamSpec],
        *,
        start_ns: int | None = None,
        latency_margin_s: float = 0.1,
        history_s: float | None = 10.0,
        on_drop: Callable[[DroppedTick], None] | None = None,
    ):
        fps_value = float(fps)
        if not math.isfinite(fps_value) or fps_value <= 0:
            raise ValueError(f"fps must be a positive number, got {fps!r}")
        self.fps = fps_value
        self._fps = Fraction(fps).limit_denominator(1_000_000)
        # tick k is at anchor + k * _NS / fps = anchor + (k * _period_num) // _period_den (exact ints)
        self._period_num, self._period_den = _NS * self._fps.denominator, self._fps.numerator
        self.specs: dict[str, StreamSpec] = {}
        for spec in streams:
            if spec.name in self.specs:
                raise ValueError(f"stream {spec.name!r} is declared twice")
            self.specs[spec.name] = spec
        if not self.specs:
            raise ValueError("an Aligner needs at least one stream")
        self._required = [n for n, s in self.specs.items() if s.required]
        # streams whose progress settles ticks and bounds the end (latched ones publish on change only)
        self._gating = [n for n in self._required if not self.specs[n].latched]
        if not self._gating:
            raise ValueError(
                "at least one stream must be required and not latched (it defines when ticks can be settled)"
            )
        self._tol = {n: _seconds_to_ns(s.tolerance_s, "tolerance_s") for n, s in self.specs.items()}
        self._stale = {n: _seconds_to_ns(s.max_staleness_s, "max_staleness_s") for n, s in self.specs.items()}
        self.latency_margin_ns = _seconds_to_ns(latency_margin_s, "latency_margin_s")
        self.history_ns = _seconds_to_ns(history_s, "history_s")
        if self.history_ns is not None:
            widest = max([self.latency_margin_ns] + [t for t in self._tol.values() if t is not None])
            if self.history_ns <= widest:
                raise ValueError(
                    f"history_s ({history_s}) must exceed latency_margin_s and every tolerance_s "
                    f"({widest / _NS} s), or samples would be pruned before use"
                )
        self.on_drop = on_drop
        self.drops: collections.deque[DroppedTick] = collections.deque(maxlen=256)
        self._buffers = {n: _Buffer() for n in self.specs}
        self._newest_ns: int | None = None
        self._reset_episode(start_ns)

    # ------------------------------------------------------------------ episode state
    def _reset_episode(self, start_ns: int | None) -> None:
        self._start_ns = None if start_ns is None else int(start_ns)
        self._anchor_ns: int | None = None
        self._next_k = 0
        self._frame_index = 0
        self._last_emitted_ns: int | None = None
        self._late_since_prune = False  # a sample at or before the last tick arrived since the last prune
        self._first_ns: dict[str, int] = {}
        self.finished = False
        self.stats = AlignmentStats(fps=self.fps, streams={n: StreamStats() for n in self.specs})

    @property
    def started(self) -> bool:
        return self._anchor_ns is not None

    @property
    def next_tick_ns(self) -> int | None:
        """Time of the next tick to be settled (None before the start)."""
        return None if self._anchor_ns is None else self._tick_ns(self._next_k)

    @property
    def covered_ns(self) -> int | None:
        """The newest time every required, non-latched stream has data for (None until each has some)."""
        if any(not self._buffers[n].times for n in self._gating):
            return None
        return min(self._buffers[n].times[-1] for n in self._gating)

    @property
    def end_slack_ns(self) -> int:
        """How far past the newest common sample :meth:`finish`'s default end reaches."""
        return min(GRID_SLACK_NS, (self._period_num // self._period_den) // 2)

    def _tick_ns(self, k: int) -> int:
        return self._anchor_ns + (k * self._period_num) // self._period_den

    # ------------------------------------------------------------------ input
    def push(self, name: str, value: Any, stamp_ns: int | None = None, receive_ns: int | None = None) -> None:
        """Add one sample. The stream's timeline picks ``stamp_ns`` or ``receive_ns`` (int ns)."""
        spec = self.specs.get(name)
        if spec is None:
            raise ValueError(f"unknown stream {name!r}; declared: {', '.join(self.specs)}")
        if self.finished:
            raise RuntimeError("this episode is finished: call restart() before pushing more samples")
        t = stamp_ns if spec.timeline == HEADER else receive_ns
        if t is None:
            which = "header stamp (stamp_ns)" if spec.timeline == HEADER else "receive time (receive_ns)"
            raise ValueError(f"stream {name!r} uses timeline {spec.timeline!r} but the sample has no {which}")
        t = int(t)
        if spec.policy == INTERPOLATE:
            value = self._numeric(name, value)
        stats = self.stats.streams[name]
        stats.received += 1
        stats.first_ns = t if stats.first_ns is None else min(stats.first_ns, t)
        stats.last_ns = t if stats.last_ns is None else max(stats.last_ns, t)
        if self._last_emitted_ns is not None and t <= self._last_emitted_ns:
            stats.late += 1
            self._late_since_prune = True
        buf = self._buffers[name]
        buf.insert(t, value)
        if name not in self._first_ns or t < self._first_ns[name]:
            self._first_ns[name] = t
        self._newest_ns = t if self._newest_ns is None else max(self._newest_ns, t)
        self._prune_history(name)
        if self._anchor_ns is None:
            self._try_start()

    def _numeric(self, name: str, value: Any) -> np.ndarray:
        try:
            arr = np.array(value, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"stream {name!r} interpolates, so its values must be numeric: {exc}") from None
        buf = self._buffers[name]
        if buf.values and buf.values[-1].shape != arr.shape:
            raise ValueError(
                f"stream {name!r}: value shape {arr.shape} differs from earlier samples {buf.values[-1].shape}"
            )
        return arr

    def _prune_history(self, name: str) -> None:
        if self.history_ns is None:
            return
        buf = self._buffers[name]
        cutoff = self._newest_ns - self.history_ns
        if buf.times and buf.times[0] < cutoff:
            keep_from = bisect.bisect_right(buf.times, cutoff) - 1  # the latest sample <= cutoff stays
            if keep_from > 0:
                unused = keep_from
                if self._last_emitted_ns is not None:
                    unused -= bisect.bisect_right(buf.times, self._last_emitted_ns, 0, keep_from)
                self.stats.streams[name].pruned += max(unused, 0)
                buf.drop_before_index(keep_from)

    # ------------------------------------------------------------------ start
    def _try_start(self) -> bool:
        if self._anchor_ns is not None:
            return True
        if any(n not in self._first_ns for n in self._required):
            return False
        data_start = max(self._first_ns[n] for n in self._required)
        if self._start_ns is None:
            self._anchor_ns = data_start
            self._next_k = 0
        else:
            self._anchor_ns = self._start_ns
            k = 0
            if data_start > self._start_ns:
                # first k with tick >= data_start; the estimate is at most one short of it
                k = ((data_start - self._start_ns) * self._fps.numerator) // (_NS * self._fps.denominator)
                while self._tick_ns(k) < data_start:
                    k += 1
            self._next_k = k
            self.stats.ticks_before_start = k
        return True

    # ------------------------------------------------------------------ evaluation
    def _evaluate_stream(self, name: str, t_tick: int) -> tuple[Any, int | None, str | None, bool]:
        """(value, sample time, drop reason or None, held instead of interpolated) at one tick."""
        spec = self.specs[name]
        buf = self._buffers[name]
        times = buf.times
        i = bisect.bisect_right(times, t_tick) - 1  # latest at or before
        stale = self._stale[name]
        tol = self._tol[name]
        if spec.policy == NEAREST:
            candidates = []
            if i >= 0:
                candidates.append(i)
            if i + 1 < len(times):
                candidates.append(i + 1)
            if not candidates:
                return None, None, "no_data", False
            # ties go to the earlier sample: it is first in the list and min() keeps the first
            j = min(candidates, key=lambda c: abs(times[c] - t_tick))
            if tol is not None and abs(times[j] - t_tick) > tol:
                return None, None, "out_of_tolerance", False
            if stale is not None and t_tick - times[j] > stale:
                return None, None, "stale", False
            return buf.values[j], times[j], None, False
        if i < 0:
            return None, None, "no_data", False
        if stale is not None and t_tick - times[i] > stale:
            return None, None, "stale", False
        if spec.policy == HOLD or times[i] == t_tick:
            return buf.values[i], times[i], None, False
        # interpolate
        if i + 1 >= len(times):
            return buf.values[i], times[i], None, True
        t0, t1 = times[i], times[i + 1]
        if tol is not None and t1 - t0 > tol:
            return None, None, "gap", False
        v0, v1 = buf.values[i], buf.values[i + 1]
        w = (t_tick - t0) / (t1 - t0)  # t1 > t0: times[i] <= t_tick < times[i + 1]
        return v0 + (v1 - v0) * w, t0, None, False

    def _evaluate(self, k: int, t_tick: int, count_held: bool = False) -> Frame | DroppedTick:
        values: dict[str, Any] = {}
        sample_ns: dict[str, int | None] = {}
        reasons: dict[str, str] = {}
        held: list[str] = []
        for name, spec in self.specs.items():
            value, t_used, reason, was_held = self._evaluate_stream(name, t_tick)
            if reason is not None and spec.required:
                reasons[name] = reason
            if was_held:
                held.append(name)
            values[name] = value
            sample_ns[name] = t_used
        if reasons:
            return DroppedTick(tick_index=k, time_ns=t_tick, reasons=reasons)
        if count_held:
            for name in held:
                self.stats.streams[name].held += 1
        return Frame(
            index=self._frame_index,
            tick_index=k,
            time_ns=t_tick,
            timestamp=float(Fraction(self._frame_index) / self._fps),
            values=values,
            sample_ns=sample_ns,
        )

    def sample_at(self, time_ns: int) -> Frame | DroppedTick:
        """Evaluate every stream at ``time_ns`` without consuming anything (policy node)."""
        result = self._evaluate(-1, int(time_ns))
        if isinstance(result, Frame):
            return Frame(-1, -1, result.time_ns, 0.0, result.values, result.sample_ns)
        return result

    def _settle(self, k: int, t_tick: int, out: list[Frame]) -> None:
        result = self._evaluate(k, t_tick, count_held=True)
        if isinstance(result, Frame):
            out.append(result)
            self._frame_index += 1
            self.stats.ticks_emitted += 1
        else:
            self.stats.ticks_dropped += 1
            for name, reason in result.reasons.items():
                st = self.stats.streams[name]
                st.dropped_ticks += 1
                st.drop_reasons[reason] = st.drop_reasons.get(reason, 0) + 1
            self.drops.append(result)
            if self.on_drop is not None:
                self.on_drop(result)
        if self.stats.first_tick_ns is None:
            self.stats.first_tick_ns = t_tick
        self.stats.last_tick_ns = t_tick
        self._last_emitted_ns = t_tick
        self._next_k = k + 1

    def _prune_used(self) -> None:
        """Keep, per stream, only the latest sample at or before the last tick and what follows."""
        self._late_since_prune = False
        if self._last_emitted_ns is None:
            return
        for buf in self._buffers.values():
            i = bisect.bisect_right(buf.times, self._last_emitted_ns) - 1
            buf.drop_before_index(i)

    # ------------------------------------------------------------------ output
    def pop_ready(self, now_ns: int | None = None) -> list[Frame]:
        """Settle and return every tick that can no longer change (see "Emission")."""
        if self.finished or not self._try_start():
            return []
        deadline = None if now_ns is None else int(now_ns) - self.latency_margin_ns
        if deadline is not None:
            behind = (deadline - self._tick_ns(self._next_k)) * self._period_den
            if behind > _MAX_TICKS_PER_CALL * self._period_num:
                raise ValueError(
                    f"the clock (now {now_ns} ns) is {behind / self._fps.numerator / _NS:.0f} s ahead of the "
                    "next tick: stamps and clock are on different timelines (check use_sim_time / timeline)"
                )
        out: list[Frame] = []
        settled_from = self._next_k
        while True:
            k = self._next_k
            t_tick = self._tick_ns(k)
            horizon = all(
                self._buffers[n].times and self._buffers[n].times[-1] >= t_tick for n in self._gating
            )
            if not horizon and (deadline is None or t_tick > deadline):
                break
            self._settle(k, t_tick, out)
        if self._next_k != settled_from or self._late_since_prune:
            self._prune_used()  # else no tick was settled and every sample is after the last one
        return out

    def finish(self, end_ns: int | None = None) -> list[Frame]:
        """Settle every remaining tick up to ``end_ns`` (inclusive) and close the episode.

        The default end is the last time every required stream has data for (the smallest of their
        newest sample times) plus :attr:`end_slack_ns`, so the final ticks are not dropped for lack
        of data, nor the tick a whole-ns clock stamped a few ns early.
        """
        if self.finished:
            return []
        out: list[Frame] = []
        if self._try_start():
            if end_ns is None:
                newest = min(self._buffers[n].times[-1] for n in self._gating if self._buffers[n].times)
                end_ns = newest + self.end_slack_ns
            end_ns = int(end_ns)
            behind = (end_ns - self._tick_ns(self._next_k)) * self._fps.numerator
            if behind > _MAX_TICKS_PER_CALL * _NS * self._fps.denominator:
                raise ValueError(
                    f"finish(end_ns={end_ns}) is {behind / self._fps.numerator / _NS:.0f} s past the next tick: "
                    "end time and stream stamps are on different timelines"
                )
            while self._tick_ns(self._next_k) <= end_ns:
                self._settle(self._next_k, self._tick_ns(self._next_k), out)
            self._prune_used()
        self.finished = True
        return out

    def restart(self, start_ns: int | None = None) -> AlignmentStats:
        """Begin a new episode on the same streams; returns the previous episode's stats.

        Samples the new episode can use stay (per stream the latest at or before ``start_ns``, or
        before the next unsettled tick when ``start_ns`` is None, and everything after).
        """
        old = self.stats
        keep_after = start_ns if start_ns is not None else self.next_tick_ns
        if keep_after is not None:
            for buf in self._buffers.values():
                buf.drop_before_index(bisect.bisect_right(buf.times, int(keep_after)) - 1)
        self._reset_episode(start_ns)
        # the new episode's start condition sees the data it kept
        for name, buf in self._buffers.items():
            if buf.times:
                self._first_ns[name] = buf.times[0]
        return old
