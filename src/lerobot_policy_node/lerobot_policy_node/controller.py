"""ROS-free control loop + inference worker: the part of the policy node that moves the robot.

Two threads:
- the control thread ticks at `control_rate_hz` (policy fps x interpolation multiplier) on an
  absolute schedule, takes the next action from the scheduler, runs it through the safety filter
  and hands the command to `publish_command`. It never waits for the model: with no fresh action
  or a stale observation it holds the last command and says why.
- the inference thread takes an observation when the scheduler asks for a chunk, runs the policy
  and submits the chunk; the actions that fell due during inference are skipped.

Policies that look at several past observations (`config.n_obs_steps` > 1, e.g. diffusion) get
them from a history the control thread keeps: the raw sample it already takes every tick to check
freshness is kept once per policy action (every `interpolation_multiplier` ticks, i.e. at the
dataset's fps, the spacing the policy was trained with), the last `n_obs_steps` of them. The
inference thread converts and stacks that history into (1, n_obs_steps, ...) inputs; after a reset
or a stale tick the history restarts and its first observation fills it, as LeRobot's queues do.
Policies with one observation step keep taking a fresh sample at inference time.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .action_queue import ActionScheduler, SchedulerConfig
from .observation import ObservationBuilder, StaleObservationError
from .safety import SafetyFilter

RUNNING, HOLDING = "running", "holding"


@dataclass
class ControllerStats:
    steps: int = 0  # commands published
    held_steps: int = 0  # ticks where the last command was held
    chunks: int = 0
    last_inference_latency_s: float = 0.0
    inference_latency_sum_s: float = 0.0
    inference_errors: int = 0
    clamped_steps: int = 0
    rate_limited_steps: int = 0
    state: str = HOLDING
    message: str = "starting"
    last_tick_ns: int = 0
    periods_s: list[float] = field(default_factory=list)  # measured tick periods (kept if record_periods)


@dataclass(frozen=True)
class _Frame:
    """One raw observation kept for the history (joint vector, RGB images) and its sample times."""

    seq: int
    values: dict
    stamps: dict[str, int]


@dataclass(frozen=True)
class ChunkInfo:
    chunk: np.ndarray  # (steps, action_dim), policy units
    obs_stamp_ns: int  # newest sample time the observation was built from (ROS clock)
    latency_s: float
    skipped: int
    index: int


class PolicyController:
    def __init__(
        self,
        policy,
        observations: ObservationBuilder,
        scheduler_cfg: SchedulerConfig,
        safety: SafetyFilter,
        publish_command: Callable[[np.ndarray, bool], None],
        now_ns: Callable[[], int] = time.time_ns,
        task: str | None = None,
        action_to_joint: Callable[[np.ndarray], np.ndarray] | None = None,
        on_chunk: Callable[[ChunkInfo], None] | None = None,
        on_state_change: Callable[[str, str], None] | None = None,
        record_periods: bool = False,
        inference_nice: int = 10,
        control_priority: int = 0,
        run_inference: bool = True,
        switch_interval_s: float = 0.0005,
    ):
        self.policy = policy
        self.obs = observations
        self.scheduler = ActionScheduler(scheduler_cfg)
        self.safety = safety
        self.publish_command = publish_command
        self.now_ns = now_ns
        self.task = task
        self.action_to_joint = action_to_joint or (lambda a: np.asarray(a, dtype=np.float64))
        self.on_chunk = on_chunk
        self.on_state_change = on_state_change
        self.record_periods = record_periods
        self.inference_nice = inference_nice
        self.control_priority = control_priority
        self.run_inference = run_inference
        self.priority_note = ""
        self.switch_interval_s = switch_interval_s
        self.stats = ControllerStats()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._stale_reason = ""
        config = getattr(policy, "config", None)
        self.n_obs_steps = max(1, int(getattr(config, "n_obs_steps", 1) or 1))
        self._history: deque[_Frame] = deque(maxlen=self.n_obs_steps)
        self._history_lock = threading.Lock()
        self._frame_seq = 0
        self._history_ticks = 0
        self._converted: dict[int, dict] = {}  # frame seq -> policy batch, reused while in the history

    @property
    def period_s(self) -> float:
        return 1.0 / self.scheduler.cfg.control_rate_hz

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def start(self) -> None:
        if self.running:
            return
        self._stop.clear()
        self.scheduler.reset()
        self.safety.reset(self.obs.latest_joints())
        self.policy.reset()
        self._reset_history()
        self.stats = ControllerStats()
        # the model thread holds the GIL between torch ops: a short switch interval lets the
        # control thread in within ~0.5 ms instead of the default 5 ms
        if self.switch_interval_s > 0:
            sys.setswitchinterval(min(sys.getswitchinterval(), self.switch_interval_s))
        self._threads = [threading.Thread(target=self._control_loop, name="policy-control", daemon=True)]
        if self.run_inference:
            self._threads.append(
                threading.Thread(target=self._inference_loop, name="policy-inference", daemon=True)
            )
        for t in self._threads:
            t.start()

    def stop(self, timeout: float = 5.0) -> np.ndarray | None:
        """Stop both threads; returns the command to hold (the last one sent)."""
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout)
        self._threads = []
        self.stats.state, self.stats.message = HOLDING, "stopped"
        return self.safety.hold()

    # ------------------------------------------------------------------ control thread
    def _set_state(self, state: str, message: str) -> None:
        changed = (state, message) != (self.stats.state, self.stats.message)
        self.stats.state, self.stats.message = state, message
        if changed and self.on_state_change is not None:
            self.on_state_change(state, message)

    def _sample(self, now: int) -> tuple[str, tuple[dict, dict[str, int]] | None]:
        """The observation at `now` and '', or None and the reason to hold (a stream too old)."""
        try:
            return "", self.obs.sample(now)
        except StaleObservationError as exc:
            return f"stale observation ({exc})", None

    # ------------------------------------------------------------------ observation history
    def _reset_history(self) -> None:
        with self._history_lock:
            self._history.clear()
            self._history_ticks = 0
        self._converted = {}

    def _record(self, sample: tuple[dict, dict[str, int]] | None) -> None:
        """Control thread: keep one observation per policy action for policies with n_obs_steps > 1."""
        if self.n_obs_steps == 1:
            return
        with self._history_lock:
            if sample is None:  # a gap: the history restarts from the next fresh observation
                self._history.clear()
                self._history_ticks = 0
                return
            tick = self._history_ticks
            self._history_ticks += 1
            if tick % self.scheduler.cfg.interpolation_multiplier:
                return
            self._frame_seq += 1
            self._history.append(_Frame(self._frame_seq, sample[0], sample[1]))

    def history_frames(self) -> list[_Frame]:
        """The last n_obs_steps observations, oldest first, the first repeated to fill; [] when none yet."""
        with self._history_lock:
            frames = list(self._history)
        if not frames:
            return []
        return [frames[0]] * (self.n_obs_steps - len(frames)) + frames

    def history_batch(self, frames: list[_Frame]) -> dict:
        """(1, n_obs_steps, ...) policy inputs from history frames (conversions cached per frame)."""
        converted = {}
        for f in frames:
            if f.seq not in converted:
                converted[f.seq] = self._converted.get(f.seq) or self.obs.to_policy_batch(f.values)
        self._converted = converted
        per_step = [converted[f.seq] for f in frames]
        batch = {k: np.stack([step[k][0] for step in per_step])[None] for k in per_step[0]}
        if self.task is not None:
            batch["task"] = [self.task]
        return batch

    def control_step(self) -> None:
        """One control tick (public so tests and benchmarks can drive it without the thread)."""
        now = self.now_ns()
        if self.safety.last is None:  # anchor holds and step bounds at the measured position
            self.safety.reset(self.obs.latest_joints())
        reason, sample = self._sample(now)
        self._record(sample)
        action = None
        if not reason:
            action = self.scheduler.tick()
            if action is None:
                reason = (
                    "waiting for the first action chunk" if self.stats.chunks == 0 else "action queue empty"
                )
        else:
            self.scheduler.tick()  # time passes for the queue too: keeps delay accounting honest
        if action is not None:
            res = self.safety.apply(self.action_to_joint(action))
            if res.held:
                reason = f"rejected action: {res.reason}"
            else:
                self.stats.clamped_steps += res.clamped
                self.stats.rate_limited_steps += res.rate_limited
                self.publish_command(res.command, False)
                self.stats.steps += 1
                self._set_state(RUNNING, "")
        if reason:
            hold = self.safety.hold()
            if hold is not None:
                self.publish_command(hold, True)
            self.stats.held_steps += 1
            self._set_state(HOLDING, reason)
        if self.scheduler.needs_inference():
            self._wake.set()

    def _control_loop(self) -> None:
        if self.control_priority > 0:
            # real-time scheduling for the control thread only (needs CAP_SYS_NICE / rtprio limits)
            try:
                os.sched_setscheduler(
                    threading.get_native_id(), os.SCHED_FIFO, os.sched_param(self.control_priority)
                )
                self.priority_note = f"control thread SCHED_FIFO {self.control_priority}"
            except (OSError, AttributeError) as exc:
                self.priority_note = (
                    f"SCHED_FIFO not permitted ({exc}); control thread runs at normal priority"
                )
        period = self.period_s
        next_t = time.monotonic()
        last = None
        while not self._stop.is_set():
            now = time.monotonic()
            if last is not None and self.record_periods:
                self.stats.periods_s.append(now - last)
            last = now
            self.control_step()
            next_t += period
            delay = next_t - time.monotonic()
            if delay < -period:  # fell behind by more than a period: re-anchor, do not burst
                next_t = time.monotonic()
            elif delay > 0:
                self._stop.wait(delay)

    # ------------------------------------------------------------------ inference thread
    def _inference_loop(self) -> None:
        if self.inference_nice > 0 and hasattr(os, "setpriority"):
            # Linux nice is per thread: the model (and the OpenMP workers it spawns from this thread)
            # yields the CPU to the control loop
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.inference_nice)
            except OSError:
                pass
        while not self._stop.is_set():
            if not self.scheduler.needs_inference():
                self._wake.wait(0.05)
                self._wake.clear()
                continue
            frames: list[_Frame] = []
            if self.n_obs_steps > 1:
                frames = self.history_frames()
                if not frames:
                    self._wake.wait(0.02)
                    self._wake.clear()
                    continue
                stamps = frames[-1].stamps
            else:
                try:
                    values, stamps = self.obs.sample(self.now_ns())
                except StaleObservationError:
                    self._wake.wait(0.02)
                    self._wake.clear()
                    continue
            ticket = self.scheduler.begin_inference()
            t0 = time.perf_counter()
            try:
                if frames:
                    batch = self.history_batch(frames)
                else:
                    batch = self.obs.to_policy_batch(values, task=self.task)
                chunk = self.policy.predict_action_chunk(batch)[0]
            except Exception as exc:
                self.scheduler.cancel_inference()
                self.stats.inference_errors += 1
                self._set_state(HOLDING, f"inference failed: {exc}")
                self._stop.wait(0.1)
                continue
            latency = time.perf_counter() - t0
            skipped = self.scheduler.submit(chunk, ticket)
            self.stats.chunks += 1
            self.stats.last_inference_latency_s = latency
            self.stats.inference_latency_sum_s += latency
            if self.on_chunk is not None:
                self.on_chunk(
                    ChunkInfo(
                        chunk, max(stamps.values()) if stamps else 0, latency, skipped, self.stats.chunks
                    )
                )


def joint_mapper(action_names: Sequence[str], joint_names: Sequence[str], deg: bool = False):
    """Policy action vector -> joint command vector in `joint_names` order (by name, `.pos` stripped)."""
    stripped = [n[: -len(".pos")] if n.endswith(".pos") else n for n in action_names]
    missing = [j for j in joint_names if j not in stripped]
    if missing:
        raise ValueError(f"policy actions {list(action_names)} do not cover joints {missing}")
    index = np.array([stripped.index(j) for j in joint_names])

    def to_joint(action: np.ndarray) -> np.ndarray:
        a = np.asarray(action, dtype=np.float64)[index]
        return np.radians(a) if deg else a

    return to_joint
