"""ROS-free rules of remote inference: which chunk from an inference host the robot host executes.

The robot host keeps the control loop (history-free: its queue, interpolation, safety filter and rate
are the local ones); an inference host publishes chunks stamped with the observation they were computed
from. The stamp is the robot's own clock (its joint states' and cameras' header stamps, copied through):
the age of a chunk is measured on one clock only, the two hosts' clocks are never compared. A chunk is
refused when it was computed for another contract (joint names or shape), comes from a second source
while the first one still publishes, carries a stamp in the future (the inference host stamped it with
its own clock) or is older than ``max_chunk_age_s``. Of an accepted chunk, the actions that fell due
since the observation are skipped by the scheduler (``ActionScheduler.ticket_for_age``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

INFERENCE_MODES = ("local", "remote", "serve")
FUTURE_TOLERANCE_S = 0.005  # a stamp this far ahead is rounding, not another clock


class ChunkRefusedError(ValueError):
    """A remote chunk that must not be executed; the message says why, naming both sides."""


@dataclass(frozen=True)
class RemoteConfig:
    max_chunk_age_s: float = 0.5  # older chunks are never executed [s]
    source_timeout_s: float = 1.0  # a source silent this long is released; the hold says 'silent' [s]


class ConfigOnlyPolicy:
    """The checkpoint's config without its weights: what the robot host needs (chunk size, features, names)
    when the model runs on another host."""

    def __init__(self, config):
        self.config = config

    def reset(self) -> None:
        pass

    def predict_action_chunk(self, batch):
        raise RuntimeError("inference runs on the inference host (inference: remote)")


class ChunkGate:
    """Accepts or refuses remote chunks and says why the queue ran dry. Thread-safe."""

    def __init__(self, action_names: Sequence[str], cfg: RemoteConfig, topic: str = "policy/remote_chunk"):
        self.action_names = list(action_names)
        self.cfg = cfg
        self.topic = topic
        self._lock = threading.Lock()
        self.source = ""  # the locked command source
        self.last_accept_ns: int | None = None
        self.last_seen_ns: int | None = None  # the locked source's last chunk, accepted or not
        self.last_refusal = ""
        self.last_refusal_ns: int | None = None
        self.last_age_s = 0.0
        self.last_latency_s = 0.0
        self.accepted = 0
        self.refused = 0

    def check(
        self,
        source: str,
        names: Sequence[str],
        chunk: np.ndarray,
        stamp_ns: int,
        now_ns: int,
        latency_s: float = 0.0,
    ) -> float:
        """The chunk's age [s] when it may be executed; else ChunkRefusedError naming the cause."""
        with self._lock:
            try:
                age = self._check(source, list(names), np.asarray(chunk), stamp_ns, now_ns)
            except ChunkRefusedError as exc:
                self.refused += 1
                self.last_refusal, self.last_refusal_ns = str(exc), now_ns
                raise
            self.accepted += 1
            self.last_accept_ns, self.last_age_s, self.last_latency_s = now_ns, age, latency_s
            return age

    def _check(self, source: str, names: list[str], chunk: np.ndarray, stamp_ns: int, now_ns: int) -> float:
        n = len(self.action_names)
        if names != self.action_names or chunk.ndim != 2 or chunk.shape[1] != n or len(chunk) == 0:
            raise ChunkRefusedError(
                f"chunk from {source or '?'} is for another contract: joints {names}, shape "
                f"{tuple(chunk.shape)}; this robot's policy acts on joints {self.action_names}, shape (steps, {n})"
            )
        timeout_ns = self.cfg.source_timeout_s * 1e9
        locked = self.source and self.last_seen_ns is not None and now_ns - self.last_seen_ns < timeout_ns
        if locked and source != self.source:
            raise ChunkRefusedError(
                f"second command source refused: {source or '?'} publishes while {self.source} drives "
                f"(one inference host at a time; {self.source} is released after "
                f"{self.cfg.source_timeout_s:g} s of silence)"
            )
        self.source, self.last_seen_ns = source, now_ns
        age = (now_ns - stamp_ns) / 1e9
        if age < -FUTURE_TOLERANCE_S:
            raise ChunkRefusedError(
                f"chunk from {source or '?'} is stamped {-age:.3f} s in the future of this robot's clock: it "
                "must carry the stamp of the robot's observation it was computed from (robot clock only)"
            )
        if age > self.cfg.max_chunk_age_s:
            raise ChunkRefusedError(
                f"chunk too old: its observation is {age:.3f} s old > max_chunk_age_s "
                f"{self.cfg.max_chunk_age_s:g} (inference {self.last_latency_s:.3f} s last time; "
                "the rest is transport)"
            )
        return max(age, 0.0)

    def hold_reason(self, now_ns: int) -> str:
        """Why no remote action is queued, for the hold status."""
        with self._lock:
            timeout_ns = self.cfg.source_timeout_s * 1e9
            refused = self.last_refusal_ns is not None and now_ns - self.last_refusal_ns < timeout_ns
            if refused and (self.last_accept_ns is None or self.last_refusal_ns > self.last_accept_ns):
                return f"remote chunk refused: {self.last_refusal}"  # chunks come, none fit
            if self.last_accept_ns is None:
                return f"waiting for the first chunk on {self.topic} (is the inference host up?)"
            silent = (now_ns - self.last_accept_ns) / 1e9
            if silent > self.cfg.source_timeout_s:
                return f"policy host silent: no chunk from {self.source} for {silent:.1f} s"
            return (
                f"action queue empty: chunks arrive late (last one {self.last_age_s:.3f} s old, of which "
                f"inference {self.last_latency_s:.3f} s, the rest transport)"
            )
