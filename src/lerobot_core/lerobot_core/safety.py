"""ROS-free command safety: NaN guard, joint limits, bounded change per control step.

The one implementation of the rule (clamp to the joint limits, then bound the change from the
previous command): the policy node and the arbiter (``SafetyFilter``), the LeRobot robot plugin
(lerobot_plugins/lerobot_robot_ros), the sim's simulated servos (``SafetyLimits.apply``) and the
motor bus driver's device guard (``SafetyLimits.limit``) all call it. docs/policy.md (Command safety) says
which node applies it on each command path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class CommandError(ValueError):
    """A command that cannot be applied (unknown joint, NaN/inf, wrong length); the message says why."""


@dataclass(frozen=True)
class SafetyLimits:
    lower: np.ndarray  # rad, per joint (-inf for none)
    upper: np.ndarray  # rad, per joint (+inf for none)
    max_step: np.ndarray  # rad per control step, per joint (inf for none)

    @classmethod
    def build(
        cls, n: int, lower=None, upper=None, max_step: float | list[float] = float("inf")
    ) -> SafetyLimits:
        def arr(v, fill):
            if v is None or len(v) == 0:
                return np.full(n, fill)
            a = np.asarray(v, dtype=np.float64)
            if a.shape != (n,):
                raise ValueError(f"expected {n} values (one per joint), got {a.shape[0] if a.ndim else 1}")
            return a

        ms = np.full(n, float(max_step)) if np.isscalar(max_step) else arr(max_step, np.inf)
        lo, hi = arr(lower, -np.inf), arr(upper, np.inf)
        if np.any(lo > hi):
            raise ValueError(f"lower joint limits exceed upper ones: {lo} > {hi}")
        if np.any(ms <= 0):
            raise ValueError("max change per step must be > 0")
        return cls(lo, hi, ms)

    def limit(self, target: np.ndarray, previous: np.ndarray | None, inside: bool = True):
        """(command, clamped per joint, step-bounded per joint) for a finite ``target``.

        Clamp to the limits, then bound the change from ``previous`` (None or a NaN joint: no
        bound). ``inside``: clamp again, so the command never leaves the limits even when
        ``previous`` is outside them; False lets it move from there towards them by at most a step.
        """
        cmd = np.clip(target, self.lower, self.upper)
        clamped = cmd != target
        if previous is None:
            return cmd, clamped, np.zeros_like(clamped)
        bounded = np.fmin(np.fmax(cmd, previous - self.max_step), previous + self.max_step)
        stepped = bounded != cmd
        return (np.clip(bounded, self.lower, self.upper) if inside else bounded), clamped, stepped

    def apply(self, target, previous: np.ndarray | None) -> np.ndarray:
        """The safe command for ``target`` after ``previous``; CommandError for NaN/inf or a wrong size."""
        target = np.asarray(target, dtype=np.float64)
        if target.shape != self.lower.shape:
            raise CommandError(f"command has {target.size} values, robot has {self.lower.size} joints")
        if not np.all(np.isfinite(target)):
            raise CommandError(f"command contains non-finite values: {target.tolist()}")
        return self.limit(target, previous)[0]


@dataclass
class SafetyResult:
    command: np.ndarray
    held: bool  # True: the input was rejected and the previous command is repeated
    clamped: bool  # a joint limit was applied
    rate_limited: bool  # the per-step change bound was applied
    reason: str = ""


class SafetyFilter:
    def __init__(self, limits: SafetyLimits):
        self.limits = limits
        self.last: np.ndarray | None = None  # last command sent (rad)

    def reset(self, current: np.ndarray | None) -> None:
        """Start from the measured position, so the first step is bounded relative to it."""
        self.last = (
            None
            if current is None
            else np.clip(np.asarray(current, float), self.limits.lower, self.limits.upper)
        )

    def hold(self) -> np.ndarray | None:
        return None if self.last is None else self.last.copy()

    def apply(self, target: np.ndarray) -> SafetyResult:
        target = np.asarray(target, dtype=np.float64)
        if target.shape != self.limits.lower.shape or not np.all(np.isfinite(target)):
            reason = (
                "non-finite action"
                if target.shape == self.limits.lower.shape
                else f"action shape {target.shape}"
            )
            return SafetyResult(self.hold(), held=True, clamped=False, rate_limited=False, reason=reason)
        cmd, clamped, stepped = self.limits.limit(target, self.last)
        self.last = cmd.copy()
        return SafetyResult(cmd, held=False, clamped=bool(clamped.any()), rate_limited=bool(stepped.any()))
