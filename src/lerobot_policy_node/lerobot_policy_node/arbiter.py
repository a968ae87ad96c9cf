"""ROS-free control arbitration for human-in-the-loop collection: who drives the robot, one at a time.

Modes: POLICY (the policy's commands pass), HUMAN (the leader-arm teleop's commands pass, an
intervention) and HOLD (paused: the follower holds the pose it had when the pause came). Inputs:

    pause     POLICY/HUMAN -> HOLD
    takeover  HOLD -> HUMAN; refused without a live leader, refused from POLICY (pause first, so the
              leader can mirror the follower); waits while the leader is not yet aligned
    resume    HOLD/HUMAN -> POLICY; refused while the policy is silent
    cycle     one-button form: POLICY -> pause, HOLD -> takeover, HUMAN -> resume
    episode   save / rerecord / stop: the arbiter holds (the episode ended; the reset starts held)

A source that falls silent (nothing newer than ``source_timeout_s``) while it drives puts the
arbiter in HOLD; its last command is not replayed. Silence is measured in the caller's awake time:
a step tells how long the caller itself was stalled before it (``step(now, stalled_s=...)``), and
that time counts toward no source's silence, since the commands sent meanwhile may still wait to be
taken. A source that really stopped is judged at most the excused time later. Every switch is
bumpless: the safety filter restarts from the measured pose, so the new source's first command is
reached within the per-step bound (``SafetyFilter``: joint limits, max change per control step).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

import numpy as np

from lerobot_core.control_mode import ControlMode
from lerobot_core.safety import SafetyFilter, SafetyLimits


class Source(enum.Enum):
    POLICY = "policy"
    HUMAN = "human"


CONTROL_COMMANDS = ("pause", "takeover", "resume", "cycle")
EPISODE_COMMANDS = ("save", "rerecord", "stop")
COMMANDS = CONTROL_COMMANDS + EPISODE_COMMANDS


@dataclass(frozen=True)
class ArbiterConfig:
    joint_names: tuple[str, ...]
    limits: SafetyLimits
    source_timeout_s: float = 0.25  # a driving source older than this -> HOLD
    # the arbiter starts in HOLD and hands control to this source when it first publishes
    # (event "start"); HOLD = wait for an operator input
    initial_mode: ControlMode = ControlMode.POLICY
    require_leader_alignment: bool = False  # takeover waits until the leader mirrors the follower
    alignment_timeout_s: float = 5.0  # a waiting takeover gives up after this


@dataclass
class Transition:
    stamp_s: float
    previous: ControlMode
    mode: ControlMode
    event: str  # the input or condition: pause, takeover, resume, policy_silent, human_silent, save...
    message: str


@dataclass
class Reply:
    success: bool
    message: str
    mode: ControlMode
    transition: Transition | None = None


@dataclass
class _Latest:
    command: np.ndarray | None = None
    stamp_s: float = -math.inf
    stalled_s: float = 0.0  # the caller's stalled time (Arbiter._stalled_s) when it was received


@dataclass
class Arbiter:
    """Feed it measured poses and source commands; ask it for the command of each control step."""

    cfg: ArbiterConfig
    mode: ControlMode = field(init=False)
    transitions: list[Transition] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.cfg.joint_names)
        if self.cfg.limits.lower.shape != (n,):
            raise ValueError(f"limits for {self.cfg.limits.lower.shape[0]} joints, {n} joint names")
        self.mode = ControlMode.HOLD
        self._awaiting_start = self.cfg.initial_mode != ControlMode.HOLD
        self._filter = SafetyFilter(self.cfg.limits)
        self._latest = {Source.POLICY: _Latest(), Source.HUMAN: _Latest()}
        self._present: np.ndarray | None = None
        self._hold: np.ndarray | None = None
        self._switched = True  # the next step restarts the filter from the present pose
        self._leader_aligned = False
        self._leader_error = math.nan
        self._pending_takeover_since: float | None = None
        self._stalled_s = 0.0  # the caller's stalls so far (step's stalled_s), not counted as silence

    # ------------------------------------------------------------------ inputs
    def update_present(self, positions) -> None:
        """The follower's measured joint positions (rad, in joint_names order)."""
        p = np.asarray(positions, dtype=np.float64)
        if p.shape == (len(self.cfg.joint_names),) and np.all(np.isfinite(p)):
            self._present = p

    def update_source(self, source: Source, command, now_s: float) -> None:
        """A command from the policy or the human (rad, joint_names order); non-finite ones are ignored."""
        c = np.asarray(command, dtype=np.float64)
        if c.shape == (len(self.cfg.joint_names),) and np.all(np.isfinite(c)):
            self._latest[source] = _Latest(c, now_s, self._stalled_s)

    def update_leader_alignment(self, error_rad: float, tolerance_rad: float) -> None:
        """Largest |leader - follower| over the joints while the leader mirrors the follower."""
        self._leader_error = float(error_rad)
        self._leader_aligned = bool(math.isfinite(error_rad) and error_rad <= tolerance_rad)

    def silence_s(self, source: Source, now_s: float) -> float:
        """How long `source` has published nothing, in the caller's awake time: its stalls since the
        source's newest command do not count (inf: never published since the start)."""
        latest = self._latest[source]
        return now_s - latest.stamp_s - (self._stalled_s - latest.stalled_s)

    def heard_s(self, source: Source) -> float:
        """When `source`'s newest command was received (-inf: never since the start)."""
        return self._latest[source].stamp_s

    def is_live(self, source: Source, now_s: float) -> bool:
        return self.silence_s(source, now_s) <= self.cfg.source_timeout_s

    @property
    def leader_aligned(self) -> bool:
        return self._leader_aligned

    @property
    def leader_error(self) -> float:
        return self._leader_error

    @property
    def takeover_pending(self) -> bool:
        return self._pending_takeover_since is not None

    @property
    def is_intervention(self) -> bool:
        return self.mode == ControlMode.HUMAN

    def request(self, command: str, now_s: float) -> Reply:
        """An operator input (keys, pedal, service). Refusals change nothing and say why."""
        reply = self._request(command, now_s)
        if reply.success:
            self._awaiting_start = False  # the operator decides from now on
        return reply

    def _request(self, command: str, now_s: float) -> Reply:
        if command not in COMMANDS:
            return self._refuse(f"unknown command {command!r}; use one of {', '.join(COMMANDS)}")
        if command == "cycle":
            command = {
                ControlMode.POLICY: "pause",
                ControlMode.HOLD: "takeover",
                ControlMode.HUMAN: "resume",
            }[self.mode]
        if command in EPISODE_COMMANDS:
            self._pending_takeover_since = None
            if self.mode == ControlMode.HOLD:
                return Reply(True, f"{command}: holding", self.mode)
            return self._switch(ControlMode.HOLD, command, f"{command}: episode ended, holding", now_s)
        if command == "pause":
            self._pending_takeover_since = None
            if self.mode == ControlMode.HOLD:
                return Reply(True, "already paused", self.mode)
            return self._switch(
                ControlMode.HOLD, "pause", f"paused ({self.mode.name.lower()} stopped)", now_s
            )
        if command == "takeover":
            if self.mode == ControlMode.HUMAN:
                return Reply(True, "the human already drives", self.mode)
            if self.mode == ControlMode.POLICY:
                return self._refuse(
                    "takeover refused: pause first, so the leader arm can mirror the follower"
                )
            if not self.is_live(Source.HUMAN, now_s):
                return self._refuse(
                    "takeover refused: no live leader arm (nothing on the teleop command topic within "
                    f"{self.cfg.source_timeout_s:g} s); the follower keeps holding"
                )
            if self.cfg.require_leader_alignment and not self._leader_aligned:
                if self._pending_takeover_since is None:
                    self._pending_takeover_since = now_s
                return Reply(
                    True,
                    f"takeover waits for the leader to mirror the follower (off by {self._leader_error:.3f} rad)",
                    self.mode,
                )
            return self._switch(ControlMode.HUMAN, "takeover", "the human drives (intervention)", now_s)
        # resume
        self._pending_takeover_since = None
        if self.mode == ControlMode.POLICY:
            return Reply(True, "the policy already drives", self.mode)
        if not self.is_live(Source.POLICY, now_s):
            return self._refuse(
                f"resume refused: the policy is silent (no command within {self.cfg.source_timeout_s:g} s)"
            )
        return self._switch(ControlMode.POLICY, "resume", "the policy drives", now_s)

    def stand_by(self, now_s: float, event: str = "deactivate") -> Reply:
        """The node stops arbitrating (lifecycle deactivate): HOLD at the measured pose, no source
        drives, a waiting takeover is dropped. `restart()` arms the start again."""
        self._pending_takeover_since = None
        self._awaiting_start = False
        if self.mode == ControlMode.HOLD:
            return Reply(True, f"{event}: holding", self.mode)
        return self._switch(
            ControlMode.HOLD, event, f"{event}: holding the present pose, no source drives", now_s
        )

    def restart(self) -> None:
        """Start again as at construction (lifecycle activate): HOLD until the initial source
        publishes; commands received before now do not count as live."""
        self._awaiting_start = self.cfg.initial_mode != ControlMode.HOLD
        self._latest = {Source.POLICY: _Latest(), Source.HUMAN: _Latest()}
        self._pending_takeover_since = None

    # ------------------------------------------------------------------ the control step
    def step(self, now_s: float, stalled_s: float = 0.0) -> np.ndarray | None:
        """The command for this control step (rad), or None while no pose is known yet.

        ``stalled_s``: how long the caller was not running before this step, beyond its normal
        period (it ran late). The commands sent meanwhile may still wait to be taken, so that time
        counts toward no source's silence (see ``silence_s``).
        """
        if stalled_s > 0.0:
            self._stalled_s += stalled_s
        if self._awaiting_start and self.mode == ControlMode.HOLD:
            src = Source.POLICY if self.cfg.initial_mode == ControlMode.POLICY else Source.HUMAN
            if self.is_live(src, now_s):
                self._awaiting_start = False
                self._switch(self.cfg.initial_mode, "start", f"the {src.value} drives from the start", now_s)
        if self._pending_takeover_since is not None and self.mode == ControlMode.HOLD:
            if self._leader_aligned and self.is_live(Source.HUMAN, now_s):
                self._pending_takeover_since = None
                self._switch(ControlMode.HUMAN, "takeover", "the human drives (intervention)", now_s)
            elif now_s - self._pending_takeover_since > self.cfg.alignment_timeout_s:
                self._pending_takeover_since = None
                self._record(
                    Transition(
                        now_s,
                        self.mode,
                        self.mode,
                        "takeover_timeout",
                        f"takeover dropped: the leader did not mirror the follower within "
                        f"{self.cfg.alignment_timeout_s:g} s (off by {self._leader_error:.3f} rad)",
                    )
                )
        if self.mode != ControlMode.HOLD:
            src = Source.POLICY if self.mode == ControlMode.POLICY else Source.HUMAN
            if not self.is_live(src, now_s):
                age = self.silence_s(src, now_s)
                why = "never published" if math.isinf(age) else f"silent for {age:.3f} s"
                self._switch(
                    ControlMode.HOLD, f"{src.value}_silent", f"the {src.value} is {why}: holding", now_s
                )
        if self._switched:
            start = self._present if self._present is not None else self._filter.hold()
            if start is None:
                return None
            self._filter.reset(start)
            self._hold = self._filter.hold()
            self._switched = False
        if self.mode == ControlMode.HOLD:
            return None if self._hold is None else self._hold.copy()
        src = Source.POLICY if self.mode == ControlMode.POLICY else Source.HUMAN
        return self._filter.apply(self._latest[src].command).command

    # ------------------------------------------------------------------ internals
    def _switch(self, mode: ControlMode, event: str, message: str, now_s: float) -> Reply:
        t = Transition(now_s, self.mode, mode, event, message)
        self.mode = mode
        self._switched = True
        self._record(t)
        return Reply(True, message, mode, t)

    def _record(self, t: Transition) -> None:
        self.transitions.append(t)
        del self.transitions[:-1000]  # a long session keeps the recent history only

    def _refuse(self, message: str) -> Reply:
        return Reply(False, message, self.mode)


# a control step counts at most this many periods toward a source's silence; the rest of a longer
# gap since the previous step was a stall of the caller
STALL_PERIODS = 2.0


class StallMeter:
    """How long the caller was stalled before each control step (``Arbiter.step``'s ``stalled_s``):
    the time beyond STALL_PERIODS periods since the previous step, else 0.

    rclpy's executor runs a ready timer before the ready subscriptions of the same wake-up, and
    after a long stall the timer's next period may come a moment later. Without this, the first
    steps after a stall of the process (not scheduled on a busy machine, a long pause) would
    see only the commands from before it, although newer ones wait to be taken, and end the
    drive. The arbiter does not count this time toward any source's silence, so a source that
    really stopped is judged at most that much later; a step counts at most STALL_PERIODS
    periods, so silence is judged even when every step runs late.
    """

    def __init__(self, rate_hz: float):
        self.allowed_s = STALL_PERIODS / rate_hz
        self._last_s: float | None = None  # the previous control step (None: none since restart)

    def restart(self) -> None:
        self._last_s = None

    def step(self, now_s: float) -> float:
        previous, self._last_s = self._last_s, now_s
        if previous is None:
            return 0.0
        return max(0.0, now_s - previous - self.allowed_s)
