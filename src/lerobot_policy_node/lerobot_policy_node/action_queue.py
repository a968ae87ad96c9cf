"""ROS-free action scheduling with LeRobot's semantics.

- `ActionQueue`: LeRobot's RTC action queue. `merge(..., real_delay)` *replaces* the queue with the new
  chunk minus the `real_delay` actions that fell due while the model ran (RTC mode), or *appends*
  after dropping consumed actions (RTC off).
- `TemporalEnsembler`: ACT's online exponential average (w_i = exp(-coeff * i), w_0 the oldest
  prediction), the same update as LeRobot's `ACTTemporalEnsembler`, extended to chunks that start
  `delay` steps late (asynchronous inference) and to stepping without a new chunk.
- `ActionInterpolator`: linear interpolation between consecutive actions, `multiplier` commands per
  policy action (1 + (N-1)*m commands for N actions).
- `ActionScheduler`: ties them together for a control loop running at `fps * multiplier`. With `rtc`
  (real-time chunking, as LeRobot's `--rtc.enabled`) a refill threshold asks for the next chunk
  before the queue runs dry, inference runs while the queue plays out, and the new chunk is merged
  with the remainder (replace minus the actions due during inference, or append), so a policy slower
  than the control period does not stall the robot. Without `rtc` it is LeRobot's synchronous loop:
  the next chunk is asked for once the queue is empty, the robot waits (holds) until it comes, and it
  is executed from its first action.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

QUEUE_MODES = ("replace", "append", "ensemble")


class ActionQueue:
    """Queue of (original, processed) action rows; `get()` returns copies of processed rows."""

    def __init__(self, rtc_enabled: bool = True):
        self.rtc_enabled = rtc_enabled
        self.queue: np.ndarray | None = None
        self.original_queue: np.ndarray | None = None
        self.last_index = 0
        self.lock = threading.Lock()
        self.delay_mismatches = 0  # merges whose consumed-count differed from the measured delay

    def get(self) -> np.ndarray | None:
        with self.lock:
            if self.queue is None or self.last_index >= len(self.queue):
                return None
            action = self.queue[self.last_index].copy()
            self.last_index += 1
            return action

    def qsize(self) -> int:
        return 0 if self.queue is None else len(self.queue) - self.last_index

    def empty(self) -> bool:
        return self.qsize() <= 0

    def get_action_index(self) -> int:
        return self.last_index

    def get_left_over(self) -> np.ndarray | None:
        with self.lock:
            return None if self.original_queue is None else self.original_queue[self.last_index :].copy()

    def get_processed_left_over(self) -> np.ndarray | None:
        with self.lock:
            return None if self.queue is None else self.queue[self.last_index :].copy()

    def clear(self) -> None:
        with self.lock:
            self.queue = self.original_queue = None
            self.last_index = 0

    def merge(
        self,
        original_actions: np.ndarray,
        processed_actions: np.ndarray,
        real_delay: int,
        action_index_before_inference: int | None = 0,
    ) -> int:
        """Merge a new chunk; returns how many leading actions were skipped."""
        original_actions = np.asarray(original_actions)
        processed_actions = np.asarray(processed_actions)
        with self.lock:
            if (
                action_index_before_inference is not None
                and max(0, self.last_index - action_index_before_inference) != real_delay
            ):
                self.delay_mismatches += 1
            if self.rtc_enabled:
                delay = min(max(int(real_delay), 0), len(processed_actions))
                self.original_queue = original_actions[delay:].copy()
                self.queue = processed_actions[delay:].copy()
                self.last_index = 0
                return delay
            if self.queue is None:
                self.original_queue = original_actions.copy()
                self.queue = processed_actions.copy()
                return 0
            self.original_queue = np.concatenate([self.original_queue, original_actions])[self.last_index :]
            self.queue = np.concatenate([self.queue, processed_actions])[self.last_index :]
            self.last_index = 0
            return 0


class TemporalEnsembler:
    """ACT temporal ensembling over (chunk_size, action_dim) chunks, one action out per step."""

    def __init__(self, coeff: float, chunk_size: int):
        self.coeff = float(coeff)
        self.chunk_size = int(chunk_size)
        self.weights = np.exp(-self.coeff * np.arange(self.chunk_size, dtype=np.float32)).astype(np.float32)
        self.weights_cumsum = np.cumsum(self.weights, dtype=np.float32)
        self.reset()

    def reset(self) -> None:
        self.actions: np.ndarray | None = None  # (n, action_dim) running averages, index 0 = now
        self.counts: np.ndarray | None = None  # (n,) number of predictions in each average

    def __len__(self) -> int:
        return 0 if self.actions is None else len(self.actions)

    def add(self, chunk: np.ndarray, delay: int = 0) -> None:
        """Fold a chunk whose first action was due `delay` steps ago into the running averages."""
        chunk = np.asarray(chunk, dtype=np.float32)[delay:]
        if len(chunk) == 0:
            return
        if self.actions is None or len(self.actions) == 0:
            self.actions = chunk.copy()
            self.counts = np.ones(len(chunk), dtype=np.int64)
            return
        n = min(len(self.actions), len(chunk))
        c = self.counts[:n]
        avg = self.actions[:n] * self.weights_cumsum[c - 1][:, None]
        avg += chunk[:n] * self.weights[np.minimum(c, self.chunk_size - 1)][:, None]
        avg /= self.weights_cumsum[np.minimum(c, self.chunk_size - 1)][:, None]
        self.actions[:n] = avg
        self.counts[:n] = np.minimum(c + 1, self.chunk_size)
        if len(chunk) > n:
            self.actions = np.concatenate([self.actions, chunk[n:]])
            self.counts = np.concatenate([self.counts, np.ones(len(chunk) - n, dtype=np.int64)])

    def pop(self) -> np.ndarray | None:
        if not len(self):
            return None
        action = self.actions[0].copy()
        self.actions, self.counts = self.actions[1:], self.counts[1:]
        return action

    def update(self, chunk: np.ndarray) -> np.ndarray:
        """LeRobot's `update`: add a chunk computed at the current step and pop the next action."""
        self.add(chunk)
        return self.pop()


class ActionInterpolator:
    """`multiplier` commands per action: prev + (i/m)(a - prev) for i = 1..m; the first action as is."""

    def __init__(self, multiplier: int = 1):
        if int(multiplier) != multiplier or multiplier < 1:
            raise ValueError(f"multiplier must be an integer >= 1, got {multiplier}")
        self.multiplier = int(multiplier)
        self.reset()

    @property
    def enabled(self) -> bool:
        return self.multiplier > 1

    def reset(self) -> None:
        self._prev: np.ndarray | None = None
        self._buffer: list[np.ndarray] = []
        self._idx = 0

    def needs_new_action(self) -> bool:
        return self._idx >= len(self._buffer)

    def add(self, action: np.ndarray) -> None:
        action = np.array(action, copy=True)
        if self.multiplier > 1 and self._prev is not None:
            m = self.multiplier
            self._buffer = [self._prev + (i / m) * (action - self._prev) for i in range(1, m + 1)]
        else:
            self._buffer = [action.copy()]
        self._prev = action
        self._idx = 0

    def get(self) -> np.ndarray | None:
        if self._idx >= len(self._buffer):
            return None
        action = self._buffer[self._idx]
        self._idx += 1
        return action

    def get_control_interval(self, fps: float) -> float:
        return 1.0 / (fps * self.multiplier)


@dataclass(frozen=True)
class SchedulerConfig:
    fps: float  # policy action rate (the dataset's fps)
    n_action_steps: int  # actions used from each chunk
    chunk_size: int
    mode: str = "replace"  # replace (RTC-style) | append | ensemble
    refill_threshold: float = 0.5  # ask for a chunk when queue <= threshold * n_action_steps
    interpolation_multiplier: int = 1
    ensemble_coeff: float = 0.01
    rtc: bool = True  # infer ahead of the queue's end and merge; False = wait for each chunk at its end

    def __post_init__(self) -> None:
        if self.mode not in QUEUE_MODES:
            raise ValueError(f"queue mode must be one of {QUEUE_MODES}, got {self.mode!r}")
        if self.mode == "ensemble" and not self.rtc:
            raise ValueError("queue mode ensemble infers while the robot moves: it needs rtc on (rtc: true)")
        if not 0.0 <= self.refill_threshold <= 1.0:
            raise ValueError(f"refill_threshold must be in [0, 1], got {self.refill_threshold}")
        if self.fps <= 0:
            raise ValueError(f"fps must be > 0, got {self.fps}")
        if not 1 <= self.n_action_steps <= self.chunk_size:
            raise ValueError(f"n_action_steps must be in [1, chunk_size={self.chunk_size}]")

    @property
    def control_rate_hz(self) -> float:
        return self.fps * self.interpolation_multiplier


@dataclass(frozen=True)
class InferenceTicket:
    """Handed out when an observation is taken for inference; brought back with the chunk."""

    tick: int  # the control tick the observation was taken at
    action_index: int
    epoch: int  # the scheduler's resets when it was handed out


class ActionScheduler:
    """Control-loop side of chunked inference; thread-safe between the loop and the inference thread.

    The loop calls `tick()` once per control period (`fps * multiplier`) and gets the next command
    (or None: nothing to send, hold). The inference side calls `needs_inference()`, takes a ticket
    with `begin_inference()` when it snapshots the observation, and `submit(chunk, ticket)` when the
    chunk is ready; the actions that fell due meanwhile are skipped (replace/ensemble modes).
    """

    def __init__(self, cfg: SchedulerConfig):
        self.cfg = cfg
        self.queue = ActionQueue(rtc_enabled=cfg.mode != "append")
        self.ensembler = (
            TemporalEnsembler(cfg.ensemble_coeff, cfg.chunk_size) if cfg.mode == "ensemble" else None
        )
        self.interpolator = ActionInterpolator(cfg.interpolation_multiplier)
        self._lock = threading.Lock()
        self._ticks = 0
        self._epoch = 0  # resets so far: a ticket handed out before the last one brings a dropped chunk
        self._pending = False
        self.starved_ticks = 0

    def reset(self) -> None:
        """An empty queue; a chunk whose ticket was handed out before now is dropped when it comes (a
        remote chunk's ticket is made when it comes: its gate's max_chunk_age_s refuses old ones)."""
        with self._lock:
            self._epoch += 1
            self.queue.clear()
            if self.ensembler is not None:
                self.ensembler.reset()
            self.interpolator.reset()
            self._pending = False
            self.starved_ticks = 0

    def queue_length(self) -> int:
        return len(self.ensembler) if self.ensembler is not None else self.queue.qsize()

    def needs_inference(self) -> bool:
        with self._lock:
            if self._pending:
                return False
            if self.ensembler is not None:
                return True
            if not self.cfg.rtc:  # synchronous: the next chunk once this one is used up
                return self.queue.qsize() == 0
            return self.queue.qsize() <= math.floor(self.cfg.refill_threshold * self.cfg.n_action_steps)

    def begin_inference(self, age_s: float = 0.0) -> InferenceTicket:
        """The ticket for an inference starting now from an observation `age_s` old (this clock)."""
        with self._lock:
            self._pending = True
            return self._ticket(age_s)

    def ticket_for_age(self, age_s: float) -> InferenceTicket:
        """The ticket an observation taken `age_s` ago would have had (a chunk inferred elsewhere: its
        observation's age on this clock counts as the inference delay, so the actions due are skipped)."""
        with self._lock:
            return self._ticket(age_s)

    def _ticket(self, age_s: float) -> InferenceTicket:
        # the observation's age counts as delay too: its first action fell due when it was taken
        back = max(0, math.ceil(age_s * self.cfg.control_rate_hz - 1e-9))
        return InferenceTicket(self._ticks - back, self.queue.get_action_index(), self._epoch)

    def cancel_inference(self) -> None:
        with self._lock:
            self._pending = False

    def delay_steps(self, ticket: InferenceTicket) -> int:
        """Policy steps elapsed since the ticket (control ticks / multiplier, rounded up)."""
        return math.ceil((self._ticks - ticket.tick) / self.cfg.interpolation_multiplier)

    def submit(self, chunk: np.ndarray, ticket: InferenceTicket) -> int:
        """Merge a (chunk_size, action_dim) chunk; returns how many leading actions were skipped (all of
        them for a chunk planned from an observation taken before the last reset: it is dropped)."""
        chunk = np.asarray(chunk, dtype=np.float64)
        if chunk.ndim != 2:
            raise ValueError(f"chunk must be (steps, action_dim), got shape {chunk.shape}")
        with self._lock:
            self._pending = False
            if ticket.epoch != self._epoch:
                return len(chunk)
            delay = self.delay_steps(ticket)
            if self.ensembler is not None:
                skipped = min(delay, len(chunk))
                self.ensembler.add(chunk, delay=skipped)
                return skipped
            used = chunk[: self.cfg.n_action_steps]
            if not self.cfg.rtc:  # the robot waited for this chunk: it starts from its first action
                delay = 0
            # index diff is only meaningful if no other merge reset the index meanwhile
            return self.queue.merge(used, used, delay, None)

    def tick(self) -> np.ndarray | None:
        with self._lock:
            self._ticks += 1
            if self.interpolator.needs_new_action():
                src = self.ensembler.pop() if self.ensembler is not None else self.queue.get()
                if src is None:
                    self.starved_ticks += 1
                    return None
                self.interpolator.add(src)
            return self.interpolator.get()
