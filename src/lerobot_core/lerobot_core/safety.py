"""ROS-free command safety: NaN guard, joint limits, bounded change per control step.

Shared by the policy node and the LeRobot robot plugin (lerobot_plugins/lerobot_robot_ros).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
        cmd = np.clip(target, self.limits.lower, self.limits.upper)
        clamped = bool(np.any(cmd != target))
        rate_limited = False
        if self.last is not None:
            lo, hi = self.last - self.limits.max_step, self.last + self.limits.max_step
            bounded = np.clip(cmd, lo, hi)
            rate_limited = bool(np.any(bounded != cmd))
            cmd = bounded
        self.last = cmd.copy()
        return SafetyResult(cmd, held=False, clamped=clamped, rate_limited=rate_limited)
