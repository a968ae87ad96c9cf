"""Episode control as lerobot-record does it, as a ROS-free state machine.

The recorder node owns one :class:`EpisodeController`; requests (start, stop-and-save, discard and
re-record, finalize) and the passing of time (``tick``) go in, *effects* come out, and the node's
worker thread carries them out on the dataset writer. Nothing here touches files or rclpy, so
every transition is unit-tested with plain numbers for time.

States (the values of ``lerobot_msgs/RecorderStatus.STATE_*``)::

    IDLE --start--> RECORDING --time up / stop--> SAVING --saved--> RESETTING --time up / next--> RECORDING
                          \\--discard--> RESETTING (same episode index again)       \\--> IDLE (no session)
    any --finalize--> FINALIZED (a recording episode is saved first, as LeRobot's Esc does)

A *session* (``start(..., session=True)``) is lerobot-record's loop: record ``num_episodes``
episodes of ``episode_time_s``, each followed by ``reset_time_s`` of reset (not after the last one,
and always after a re-record), then finalize. A single start (``session=False``) records one
episode, its reset period, then returns to IDLE. Keys, as in LeRobot: right arrow = ``stop()``
(end the episode early, or end the reset early), left arrow = ``discard()`` (re-record),
Esc = ``finalize()``.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass


class State(enum.IntEnum):
    UNCONFIGURED = 0
    IDLE = 1
    RECORDING = 2
    RESETTING = 3
    SAVING = 4
    FINALIZED = 5
    ERROR = 6


class Effect(enum.Enum):
    BEGIN_EPISODE = "begin_episode"  # start collecting frames for a new episode
    SAVE_EPISODE = "save_episode"  # stop collecting, save; then call saved()
    DISCARD_EPISODE = "discard_episode"  # stop collecting, drop the frames
    FINALIZE = "finalize"  # close the dataset (after a pending save, if any)
    SESSION_DONE = "session_done"  # the session's num_episodes are recorded


class EpisodeError(ValueError):
    """A request that is not allowed now, or a bad parameter; the message says which and why."""


@dataclass(frozen=True)
class EpisodeConfig:
    episode_time_s: float = 60.0
    reset_time_s: float = 60.0
    num_episodes: int = 50
    task: str = ""

    def __post_init__(self):
        check_duration("episode_time_s", self.episode_time_s, allow_zero=False)
        check_duration("reset_time_s", self.reset_time_s, allow_zero=True)
        if int(self.num_episodes) < 1:
            raise EpisodeError(f"num_episodes must be >= 1, got {self.num_episodes}")


def check_duration(name: str, value: float, allow_zero: bool) -> float:
    v = float(value)
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        need = ">= 0" if allow_zero else "> 0"
        raise EpisodeError(f"{name} must be a finite number of seconds {need}, got {value!r}")
    return v


@dataclass(frozen=True)
class EpisodePlan:
    """What the current (or next) episode is: its task and timing."""

    task: str
    episode_time_s: float
    reset_time_s: float


class EpisodeController:
    """Lerobot-record's episode loop as a state machine (see the module docstring)."""

    def __init__(self, config: EpisodeConfig, saved_before: int = 0):
        self.config = config
        self.state = State.IDLE
        self.saved_before = int(saved_before)  # episodes already in the dataset (resume)
        self.episodes_recorded = 0  # saved in this run
        self.session = False
        self.session_target = 0  # episodes this session must save
        self.session_saved = 0
        self.plan: EpisodePlan | None = None
        self.phase_start: float | None = None  # when the current recording / reset began
        self.finalize_pending = False
        self.rerecord = False  # the reset in progress follows a discard
        self.message = ""

    # ------------------------------------------------------------------ queries
    @property
    def episode_index(self) -> int:
        """Index the current (or next) episode gets in the dataset."""
        return self.saved_before + self.episodes_recorded

    def elapsed(self, now: float) -> float:
        return 0.0 if self.phase_start is None else max(0.0, now - self.phase_start)

    def restart_phase(self, now: float) -> None:
        """The current phase counts from ``now`` (the recorder: from when the episode's data window opened)."""
        self.phase_start = now

    def _require_open(self, what: str) -> None:
        if self.state == State.FINALIZED:
            raise EpisodeError(
                f"cannot {what}: the dataset was finalized (activate again or resume to append)"
            )
        if self.state == State.ERROR:
            raise EpisodeError(f"cannot {what}: the recorder is in an error state ({self.message})")
        if self.state == State.UNCONFIGURED:
            raise EpisodeError(f"cannot {what}: the recorder is not configured/active")

    def make_plan(
        self, task: str = "", episode_time_s: float = 0.0, reset_time_s: float = -1.0
    ) -> EpisodePlan:
        """Fill request values from the node's parameters: empty task / <= 0 time / < 0 reset = default."""
        task = task or self.config.task
        if not task:
            raise EpisodeError("no task: give one in the request or set the node's `task` parameter")
        ep = float(episode_time_s)
        if math.isnan(ep):
            raise EpisodeError("episode_time_s is NaN")
        ep = self.config.episode_time_s if ep <= 0 else check_duration("episode_time_s", ep, False)
        rs = float(reset_time_s)
        if math.isnan(rs):
            raise EpisodeError("reset_time_s is NaN")
        rs = self.config.reset_time_s if rs < 0 else check_duration("reset_time_s", rs, True)
        return EpisodePlan(task=task, episode_time_s=ep, reset_time_s=rs)

    # ------------------------------------------------------------------ requests
    def start(self, now: float, plan: EpisodePlan, session: bool = False) -> list[Effect]:
        """Start an episode now (from IDLE, or from RESETTING: skips the rest of the reset)."""
        self._require_open("start an episode")
        if self.state in (State.RECORDING, State.SAVING):
            raise EpisodeError(
                f"episode {self.episode_index} is already being recorded; stop or discard it first"
            )
        if session:
            self.session = True
            self.session_target = int(self.config.num_episodes)
            self.session_saved = 0
        elif self.state == State.IDLE:
            self.session = False
        self.plan = plan
        self.rerecord = False
        return self._begin(now)

    def _begin(self, now: float) -> list[Effect]:
        self.state = State.RECORDING
        self.phase_start = now
        self.message = f"recording episode {self.episode_index}"
        return [Effect.BEGIN_EPISODE]

    def stop(self, now: float) -> list[Effect]:
        """Right arrow: end the episode early (it is saved), or end the reset period early."""
        self._require_open("stop")
        if self.state == State.RECORDING:
            self.state = State.SAVING
            self.message = f"saving episode {self.episode_index}"
            return [Effect.SAVE_EPISODE]
        if self.state == State.RESETTING:
            return self._end_reset(now)
        raise EpisodeError(f"nothing to stop: the recorder is {self.state.name.lower()}")

    def discard(self, now: float) -> list[Effect]:
        """Left arrow: drop the episode being recorded and record it again after a reset."""
        self._require_open("discard")
        if self.state != State.RECORDING:
            raise EpisodeError(f"no episode to discard: the recorder is {self.state.name.lower()}")
        self.rerecord = True
        self.message = f"episode {self.episode_index} discarded; re-recording it"
        self._enter_reset(now)
        return [Effect.DISCARD_EPISODE] + self._maybe_skip_reset(now)

    def finalize(self, now: float) -> list[Effect]:
        """Esc: save the episode being recorded (if any), then close the dataset."""
        if self.state == State.FINALIZED:
            return []
        if self.state == State.RECORDING:
            self.finalize_pending = True
            self.state = State.SAVING
            self.message = f"saving episode {self.episode_index}, then finalizing"
            return [Effect.SAVE_EPISODE]
        if self.state == State.SAVING:
            self.finalize_pending = True
            return []
        return self._do_finalize()

    def _do_finalize(self) -> list[Effect]:
        self.state = State.FINALIZED
        self.session = False
        self.phase_start = None
        self.message = f"finalized: {self.episodes_recorded} episode(s) recorded this run"
        return [Effect.FINALIZE]

    def fail(self, message: str) -> None:
        self.state = State.ERROR
        self.message = message
        self.session = False

    # ------------------------------------------------------------------ outcomes and time
    def saved(self, now: float, ok: bool, empty: bool = False) -> list[Effect]:
        """The SAVE_EPISODE effect finished: ``ok`` = committed; ``empty`` = nothing to save."""
        if self.state != State.SAVING:
            return []
        if ok:
            self.episodes_recorded += 1
            if self.session:
                self.session_saved += 1
        effects: list[Effect] = []
        if self.finalize_pending:
            return self._do_finalize()
        if self.session and self.session_saved >= self.session_target:
            self.session = False
            self.state = State.IDLE
            self.phase_start = None
            self.message = f"session done: {self.session_saved} episode(s) recorded"
            return [Effect.SESSION_DONE]
        self.rerecord = not ok and not empty
        self._enter_reset(now)
        effects += self._maybe_skip_reset(now)
        return effects

    def _enter_reset(self, now: float) -> None:
        self.state = State.RESETTING
        self.phase_start = now
        if not self.rerecord:
            self.message = f"reset before episode {self.episode_index}"

    def _maybe_skip_reset(self, now: float) -> list[Effect]:
        if self.plan is not None and self.plan.reset_time_s <= 0:
            return self._end_reset(now)
        return []

    def _end_reset(self, now: float) -> list[Effect]:
        if self.session:
            return self._begin(now)
        self.state = State.IDLE
        self.phase_start = None
        self.message = "idle"
        return []

    def tick(self, now: float) -> list[Effect]:
        """Advance timers: the episode time running out saves it; the reset running out moves on."""
        if self.plan is None or self.phase_start is None:
            return []
        if self.state == State.RECORDING and now - self.phase_start >= self.plan.episode_time_s:
            return self.stop(now)
        if self.state == State.RESETTING and now - self.phase_start >= self.plan.reset_time_s:
            return self._end_reset(now)
        return []


# what delimits a recorded episode: the episode clock (episode_time_s) or the simulation's own episodes
EPISODE_BOUNDARIES = ("time", "sim")
BEGIN, END = "begin", "end"


def check_episode_boundaries(value: str) -> str:
    if value not in EPISODE_BOUNDARIES:
        raise EpisodeError(
            f"parameter 'episode_boundaries' must be one of {EPISODE_BOUNDARIES}, got {value!r}"
        )
    return value


class SimEpisodes:
    """The simulation's episodes, followed on its per-step ``EpisodeInfo`` (``sim/episode_info``).

    The sim stamps a step's episode info like the step's observations (and publishes it last), so a
    sample stamped at or before :attr:`newest_ns` can be placed: it belongs to the sim episode that
    began at :attr:`start_ns` when it is not older than that. :meth:`update` says where a sim episode
    begins (its step 0, the reset's observation) and where it ends (the step reported terminated or
    truncated, itself part of the episode). Repeats (a lockstep keep-alive re-publishes the same
    step) and stale messages are ignored.
    """

    def __init__(self):
        self.newest_ns = -1  # stamp of the newest episode info taken in
        self.episode_index = -1  # the sim episode under way
        self.start_ns: int | None = None  # stamp of its step 0 (None: it began before we saw it)
        self.step = -1
        self.done = False
        self.seed = -1  # the seed the sim episode under way was reset with (-1 = unseeded)

    def update(
        self, stamp_ns: int, episode_index: int, step: int, done: bool, seed: int = -1
    ) -> list[tuple[str, int]]:
        """[(BEGIN, stamp)] on a new episode's step 0, [(END, stamp)] on its done step, else []."""
        stamp_ns = int(stamp_ns)
        if stamp_ns <= self.newest_ns:
            return []
        self.newest_ns = stamp_ns
        events = []
        if int(step) == 0:
            self.start_ns = stamp_ns
            events.append((BEGIN, stamp_ns))
        elif int(episode_index) != self.episode_index:
            self.start_ns = None  # joined mid-episode: its start was not seen
        self.episode_index, self.step, self.done = int(episode_index), int(step), bool(done)
        self.seed = int(seed)
        if self.done:
            events.append((END, stamp_ns))
        return events

    @property
    def at_start(self) -> bool:
        """The sim episode under way is at its first tick (its reset observation), seen here."""
        return self.start_ns is not None and self.step == 0 and not self.done
