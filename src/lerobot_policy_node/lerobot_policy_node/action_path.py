"""ROS-free action path: observation history -> stateless policy -> chunk scheduling -> safety.

The one way from observations to commands, run by the policy node's controller (two threads, real
time) and by lerobot-sim-eval (lockstep, `ActionPath.step`): the same observations give the same
actions. The history keeps one raw observation per policy action, converts each once when a batch
is taken and stacks them into `(1, n_obs_steps, ...)`, the input of every runtime policy.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from lerobot_core.safety import SafetyFilter, SafetyResult
from lerobot_runtime.errors import ObservationError

from .action_queue import ActionScheduler, SchedulerConfig


@dataclass(frozen=True)
class Frame:
    """One raw observation kept in the history and its sample times (ns, per stream)."""

    seq: int
    values: Any
    stamps: Mapping[str, int]


@dataclass(frozen=True)
class ChunkInfo:
    chunk: np.ndarray  # (steps, action_dim), policy units
    obs_stamp_ns: int  # newest sample time the observation was built from
    latency_s: float
    skipped: int
    index: int


class ObservationHistory:
    """The last `n_obs_steps` observations; after a reset or a gap the first one fills it, as LeRobot's
    policy queues do. `convert(values)` gives one step's (B, ...) policy inputs."""

    def __init__(self, n_obs_steps: int, convert: Callable[[Any], Mapping[str, np.ndarray]]):
        self.n_obs_steps = max(1, int(n_obs_steps))
        self.convert = convert
        self._frames: deque[Frame] = deque(maxlen=self.n_obs_steps)
        self._lock = threading.Lock()  # the control thread pushes while the inference thread reads
        self._seq = 0
        self._converted: dict[int, Mapping[str, np.ndarray]] = {}  # reused while a frame is kept

    def clear(self) -> None:
        with self._lock:
            self._frames.clear()

    def push(self, values: Any, stamps: Mapping[str, int] | None = None) -> None:
        with self._lock:
            self._seq += 1
            self._frames.append(Frame(self._seq, values, dict(stamps or {})))

    def frames(self) -> list[Frame]:
        """Oldest first, the first repeated to fill n_obs_steps; [] when there is none yet."""
        with self._lock:
            frames = list(self._frames)
        return [frames[0]] * (self.n_obs_steps - len(frames)) + frames if frames else []

    def batch(self, frames: list[Frame] | None = None, task: str | None = None) -> dict[str, Any]:
        """(1, n_obs_steps, ...) policy inputs of `frames` (default: the current history)."""
        frames = self.frames() if frames is None else frames
        if not frames:
            raise ObservationError("no observation yet: push one into the history first")
        converted = {f.seq: self._converted.get(f.seq) or self.convert(f.values) for f in frames}
        self._converted = converted
        steps = [converted[f.seq] for f in frames]
        batch: dict[str, Any] = {k: np.stack([s[k] for s in steps], axis=1) for k in steps[0]}
        if task is not None:
            batch["task"] = [task]
        return batch


class ActionPath:
    """A policy's history, chunk scheduling and safety for one control loop (one thread each side)."""

    def __init__(
        self,
        policy,
        scheduler_cfg: SchedulerConfig,
        convert: Callable[[Any], Mapping[str, np.ndarray]],
        safety: SafetyFilter | None = None,
        to_command: Callable[[np.ndarray], np.ndarray] | None = None,
    ):
        self.policy = policy
        self.scheduler = ActionScheduler(scheduler_cfg)
        self.history = ObservationHistory(getattr(policy.config, "n_obs_steps", 1) or 1, convert)
        self.safety = safety
        self.to_command = to_command or (lambda a: np.asarray(a, dtype=np.float64))
        self.chunks = 0
        self._ticks = 0

    def reset(self, current: np.ndarray | None = None) -> None:
        """A new episode: empty queue and history; safety anchored at the measured position."""
        self.restart(current)
        self.policy.reset()
        self.chunks = 0

    def restart(self, current: np.ndarray | None) -> None:
        """Start over mid-run (the control thread, while the inference thread runs): empty queue (a chunk
        in flight is dropped when it comes), empty history, safety anchored at the measured position."""
        self.scheduler.reset()
        self.history.clear()
        if self.safety is not None:
            self.safety.reset(current)
        self._ticks = 0

    def record(self, values: Any, stamps: Mapping[str, int] | None = None) -> None:
        """Called every control tick: keeps one observation per policy action (the dataset's spacing);
        `values=None` (a stale tick) restarts the history from the next fresh observation."""
        if values is None:
            self.history.clear()
            self._ticks = 0
            return
        tick, self._ticks = self._ticks, self._ticks + 1
        if tick % self.scheduler.cfg.interpolation_multiplier == 0:
            self.history.push(values, stamps)

    def infer(self, frames: list[Frame], task: str | None = None, age_s: float = 0.0) -> ChunkInfo:
        """Predict a chunk from `frames` (the newest `age_s` old) and merge it; the actions that fell due
        since the observation was taken are skipped."""
        ticket = self.scheduler.begin_inference(age_s)
        t0 = time.perf_counter()
        try:
            chunk = np.asarray(self.policy.predict_action_chunk(self.history.batch(frames, task)))[0]
        except BaseException:
            self.scheduler.cancel_inference()
            raise
        latency = time.perf_counter() - t0
        skipped = self.scheduler.submit(chunk, ticket)
        self.chunks += 1
        stamps = frames[-1].stamps
        return ChunkInfo(chunk, max(stamps.values()) if stamps else 0, latency, skipped, self.chunks)

    def command(self, action: np.ndarray) -> SafetyResult:
        """An action as a joint command through the safety filter (clamp, per-step bound, NaN hold)."""
        cmd = self.to_command(action)
        if self.safety is None:
            return SafetyResult(cmd, held=False, clamped=False, rate_limited=False)
        return self.safety.apply(cmd)

    def step(self, values: Any, task: str | None = None) -> np.ndarray:
        """Lockstep use (one call per policy action): record, infer if the queue asks, the next command."""
        self.record(values)
        if self.scheduler.needs_inference():
            self.infer(self.history.frames(), task)
        return self.command(self.scheduler.tick()).command


def scheduler_config(policy_config, fps: float, mode: str = "replace", **overrides) -> SchedulerConfig:
    """The scheduling a checkpoint asks for: its chunk size and n_action_steps, and ACT's temporal
    ensembling when the checkpoint was tuned with it (`temporal_ensemble_coeff`), mode is replace and
    rtc is on (ensembling infers while the robot moves)."""
    pc = policy_config
    n_steps = overrides.pop("n_action_steps", 0) or pc.n_action_steps
    coeff = overrides.pop("ensemble_coeff", 0.01)
    if pc.temporal_ensemble_coeff is not None and mode == "replace" and overrides.get("rtc", True):
        mode, coeff = "ensemble", pc.temporal_ensemble_coeff
    return SchedulerConfig(
        fps=fps,
        n_action_steps=min(n_steps, pc.chunk_size),
        chunk_size=pc.chunk_size,
        mode=mode,
        ensemble_coeff=coeff,
        **overrides,
    )
