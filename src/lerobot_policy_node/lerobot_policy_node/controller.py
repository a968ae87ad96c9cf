"""ROS-free control loop + inference worker: the part of the policy node that moves the robot.

Two threads:
- the control thread ticks at `control_rate_hz` (policy fps x interpolation multiplier) on an
  absolute schedule, takes the next action from the scheduler, runs it through the safety filter
  and hands the command to `publish_command`. It never waits for the model: with no fresh action
  or a stale observation it holds the last command and says why. When the observation is fresh again it
  starts over as at start: an empty queue, a new chunk from the new observation, holds and per-step
  bounds from the measured position (what the queue held was planned from observations before the gap,
  and the arm may have been moved meanwhile: a sim's episode reset, a person's hand).
- the inference thread takes an observation when the scheduler asks for a chunk, runs the policy
  and submits the chunk; the actions that fell due during inference are skipped.

History, chunk scheduling and safety are the shared `action_path.ActionPath` (lerobot-sim-eval runs
the same one in lockstep). Policies that look at several past observations (`config.n_obs_steps`
> 1, e.g. diffusion) get the raw sample the control thread already takes every tick to check
freshness, kept once per policy action; after a stale tick the history restarts. Policies with one
observation step take a fresh sample at inference time instead.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from lerobot_core import units
from lerobot_core.realtime import set_fifo
from lerobot_core.safety import SafetyFilter

from .action_path import ActionPath, ChunkInfo, Frame
from .action_queue import SchedulerConfig
from .observation import ObservationBuilder, StaleObservationError

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
    restarts: int = 0  # fresh observations after a stale hold: the queue emptied, bounds from the arm
    state: str = HOLDING
    message: str = "starting"
    last_tick_ns: int = 0
    periods_s: list[float] = field(default_factory=list)  # measured tick periods (kept if record_periods)


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
        starved_reason: Callable[[int], str] | None = None,
        max_chunk_age_s: float = float("inf"),
    ):
        self.policy = policy
        self.obs = observations
        self.path = ActionPath(policy, scheduler_cfg, observations.to_policy_batch, safety, action_to_joint)
        self.scheduler, self.safety = self.path.scheduler, safety
        self.publish_command = publish_command
        self.now_ns = now_ns
        self.task = task
        self.on_chunk = on_chunk
        self.on_state_change = on_state_change
        self.record_periods = record_periods
        self.inference_nice = inference_nice
        self.control_priority = control_priority
        self.run_inference = run_inference  # False: chunks come from elsewhere (`submit_remote`)
        self.starved_reason = starved_reason  # why the queue is empty, given now (remote: the link's view)
        self.max_chunk_age_s = max_chunk_age_s  # remote: a chunk this old when taken is dropped
        self._waiting: tuple[np.ndarray, float, int] | None = None  # remote: (chunk, age, arrival ns)
        self._waiting_lock = threading.Lock()
        self.priority_note = ""
        self._control_realtime = False  # the control thread got SCHED_FIFO
        self._priority_settled = threading.Event()  # ... or could not: the inference thread may start
        self.switch_interval_s = switch_interval_s
        self.stats = ControllerStats()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self.n_obs_steps = self.path.history.n_obs_steps
        self._stale: bool | None = None  # the last tick held on a stale observation (None: no fresh one yet)
        self._restarted = False  # started over since: no command from the new queue yet
        self._inferred_from: int | None = None  # newest sample time of the last observation inferred from

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
        self._priority_settled.clear()
        self.path.reset(self.obs.latest_joints())
        self.stats = ControllerStats()
        self._stale, self._restarted, self._inferred_from = None, False, None
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

    def control_step(self) -> None:
        """One control tick (public so tests and benchmarks can drive it without the thread)."""
        now = self.now_ns()
        if self.safety.last is None:  # anchor holds and step bounds at the measured position
            self.safety.reset(self.obs.latest_joints())
        reason, sample = self._sample(now)
        if reason:
            if self._stale is not None:  # before the first fresh tick it is only the start
                self._stale = True
        else:
            if self._stale:  # fresh after a stale hold: start over from where the arm is
                self.path.restart(self.obs.latest_joints())
                with self._waiting_lock:
                    self._waiting = None  # planned from before the gap
                self.stats.restarts += 1
                self._restarted = self.stats.chunks > 0  # before any chunk there was nothing to drop
            self._stale = False
        if self.n_obs_steps > 1:  # one-step policies take a fresh sample at inference time instead
            values, stamps = sample or (None, None)
            self.path.record(values, stamps)
        action = None
        if not self.run_inference:
            self._take_waiting()
        if not reason:
            action = self.scheduler.tick()
            if action is None and self._restarted:
                reason = "started over after a stale observation: waiting for a chunk from a fresh one"
                if self.starved_reason is not None:  # remote: the link's view too (a silent host, say)
                    reason += f" ({self.starved_reason(now)})"
            elif action is None and self.starved_reason is not None:
                reason = self.starved_reason(now)
            elif action is None:
                reason = (
                    "waiting for the first action chunk" if self.stats.chunks == 0 else "action queue empty"
                )
        else:
            self.scheduler.tick()  # time passes for the queue too: keeps delay accounting honest
        if action is not None:
            res = self.path.command(action)
            if res.held:
                reason = f"rejected action: {res.reason}"
            else:
                self.stats.clamped_steps += res.clamped
                self.stats.rate_limited_steps += res.rate_limited
                self.publish_command(res.command, False)
                self._restarted = False
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
        self._control_realtime = False
        if self.control_priority > 0:
            # real-time scheduling for the control thread only (needs CAP_SYS_NICE / rtprio limits)
            try:
                set_fifo(self.control_priority, [threading.get_native_id()])
                self.priority_note = f"control thread SCHED_FIFO {self.control_priority}"
                self._control_realtime = True
            except (OSError, AttributeError) as exc:
                self.priority_note = (
                    f"SCHED_FIFO not permitted ({exc}); control thread runs at normal priority"
                )
        self._priority_settled.set()
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

    def submit_remote(self, chunk: np.ndarray, age_s: float) -> int | None:
        """A chunk inferred elsewhere from an observation `age_s` old (this clock). The queue takes it when
        it asks for a chunk, as it would start a local inference then (at once in ensemble mode, and when
        it is empty or at `refill_threshold`); until then it waits, and a newer one replaces it. The
        actions due since its observation are skipped when it is taken. Returns the number skipped if it
        was taken now, else None."""
        with self._waiting_lock:
            self._waiting = (np.asarray(chunk), float(age_s), self.now_ns())
        return self._take_waiting()

    def _take_waiting(self) -> int | None:
        """Merge the waiting remote chunk if the queue asks for one; None if it does not (or it got too old)."""
        with self._waiting_lock:
            if self._waiting is None or not self.scheduler.needs_inference():
                return None
            chunk, age_s, arrived = self._waiting
            self._waiting = None
        age_s += max(0, self.now_ns() - arrived) / 1e9
        if age_s > self.max_chunk_age_s:  # waited too long: never executed
            return None
        skipped = self.scheduler.submit(chunk, self.scheduler.ticket_for_age(age_s))
        self.stats.chunks += 1
        return skipped

    # ------------------------------------------------------------------ inference thread
    def _inference_loop(self) -> None:
        self._priority_settled.wait(1.0)
        if self.inference_nice > 0 and not self._control_realtime and hasattr(os, "setpriority"):
            # a control thread without real-time scheduling: Linux nice is per thread, the model
            # (and the OpenMP workers it spawns from this thread) yields the CPU to the control loop.
            # A SCHED_FIFO control thread preempts the model anyway; niced then, the model would only
            # yield to every other process of the machine (on a loaded machine: starve).
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.inference_nice)
            except OSError:
                pass
        while not self._stop.is_set():
            if not self.scheduler.needs_inference():
                self._wake.wait(0.05)
                self._wake.clear()
                continue
            if self.n_obs_steps == 1:
                try:
                    self.path.history.push(*self.obs.sample(self.now_ns()))
                except StaleObservationError:
                    self._wake.wait(0.02)
                    self._wake.clear()
                    continue
            frames: list[Frame] = self.path.history.frames()
            if not frames:
                self._wake.wait(0.02)
                self._wake.clear()
                continue
            newest = max(frames[-1].stamps.values()) if frames[-1].stamps else None
            if newest is not None and newest == self._inferred_from:
                # one chunk per observation: the same one again only plans the same moves later (its
                # actions all skipped while the robot is silent, so at once again: a busy loop)
                self._wake.wait(0.02)
                self._wake.clear()
                continue
            self._inferred_from = newest
            age_s = 0.0 if newest is None else max(0.0, (self.now_ns() - newest) / 1e9)
            try:
                info = self.path.infer(frames, self.task, age_s)
            except Exception as exc:
                self.stats.inference_errors += 1
                self._set_state(HOLDING, f"inference failed: {exc}")
                self._stop.wait(0.1)
                continue
            self.stats.chunks = info.index
            self.stats.last_inference_latency_s = info.latency_s
            self.stats.inference_latency_sum_s += info.latency_s
            if self.on_chunk is not None:
                self.on_chunk(info)


def joint_mapper(
    action_names: Sequence[str],
    joint_names: Sequence[str],
    deg: bool = False,
    to_radians: Callable[[np.ndarray], np.ndarray] | None = None,
):
    """Policy action vector -> joint command vector in `joint_names` order (by name, `.pos` stripped).

    `to_radians`: the action's units -> radians, applied in the policy's order before reordering (a
    contract's inverse conversion); else `deg` converts degrees."""
    stripped = [n[: -len(".pos")] if n.endswith(".pos") else n for n in action_names]
    missing = [j for j in joint_names if j not in stripped]
    if missing:
        raise ValueError(f"policy actions {list(action_names)} do not cover joints {missing}")
    index = np.array([stripped.index(j) for j in joint_names])

    def to_joint(action: np.ndarray) -> np.ndarray:
        if to_radians is not None:
            return np.asarray(to_radians(action), dtype=np.float64)[index]
        a = np.asarray(action, dtype=np.float64)[index]
        return a * units.RADIANS_PER_DEGREE if deg else a

    return to_joint
