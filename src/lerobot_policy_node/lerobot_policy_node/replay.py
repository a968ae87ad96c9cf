"""Replaying a recorded episode on a robot, ROS-free: the ramp from the present pose and the command
sequence through the safety filter. ``replay_cli`` publishes what this plans.

The ramp moves every joint linearly from where the robot is to the episode's first action, in as
many control steps as the joint with the longest way needs at ``max_step`` rad per step, so the
first recorded action is never a jump. Every command, ramp and episode, goes through the same
``SafetyFilter`` as a policy's: clamped to the joint limits, change per step bounded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lerobot_core.safety import SafetyFilter, SafetyLimits


def ramp(start: np.ndarray, target: np.ndarray, max_step: np.ndarray | float) -> np.ndarray:
    """Points from ``start`` (excluded) to ``target`` (included), no joint moving more than
    ``max_step`` per point; (0, n) when already there."""
    start, target = np.asarray(start, dtype=np.float64), np.asarray(target, dtype=np.float64)
    delta = target - start
    step = np.broadcast_to(np.asarray(max_step, dtype=np.float64), delta.shape)
    ratio = np.abs(delta) / step
    n = math.ceil(float(np.max(ratio))) if ratio.size else 0
    if n == 0:
        return np.empty((0, start.size))
    # a hair above 1 only from float rounding: one step more would never be needed
    if float(np.max(ratio)) <= n - 1 + 1e-9:
        n -= 1
    return start + delta * (np.arange(1, n + 1)[:, None] / n)


@dataclass
class ReplayPlan:
    commands: np.ndarray  # (ramp_steps + frames, joints) rad, after the safety filter
    ramp_steps: int
    clamped_steps: int  # commands where a joint limit applied
    rate_limited_steps: int  # episode commands the per-step bound slowed down
    clamped_per_joint: np.ndarray | None = None  # (joints,) episode commands a joint limit changed
    beyond_limit: np.ndarray | None = None  # (joints,) rad: the farthest a recorded action lay past a limit
    limited_per_joint: np.ndarray | None = None  # (joints,) episode commands the per-step bound slowed
    last_action: np.ndarray | None = None  # the episode's last recorded action (before the filter)

    @property
    def final(self) -> np.ndarray:
        return self.commands[-1]

    def explain(self, joints: list[str], limits: SafetyLimits) -> list[str]:
        """Per joint: how often, and why, its commands differ from the recorded actions (a joint
        limit, or the per-step bound), so a large final error has its reason beside it."""
        out = []
        n = len(self.commands) - self.ramp_steps
        for j, name in enumerate(joints):
            clamped = int(self.clamped_per_joint[j]) if self.clamped_per_joint is not None else 0
            limited = int(self.limited_per_joint[j]) if self.limited_per_joint is not None else 0
            if clamped:
                out.append(
                    f"{name}: {clamped} of {n} actions clamped to its joint limits "
                    f"[{limits.lower[j]:.3f}, {limits.upper[j]:.3f}] rad (recorded up to "
                    f"{self.beyond_limit[j]:.4f} rad past a limit)"
                )
            if limited:
                out.append(
                    f"{name}: {limited} of {n} actions slowed by the per-step bound "
                    f"({float(np.broadcast_to(limits.max_step, (len(joints),))[j]):g} rad per step, --max-step-rad)"
                )
        if self.last_action is not None:
            short = np.abs(self.last_action - self.final)
            for j in np.flatnonzero(short > 1e-9):
                out.append(
                    f"{joints[j]}: the last action ({self.last_action[j]:.3f} rad) was sent as "
                    f"{self.final[j]:.3f} rad ({short[j]:.3f} rad short: "
                    + ("outside its joint limits)" if self.clamped_per_joint[j] else "the per-step bound)")
                )
        return out


def plan_replay(present: np.ndarray, actions: np.ndarray, limits: SafetyLimits) -> ReplayPlan:
    """The commands that take the robot from ``present`` through the episode's ``actions`` (rad)."""
    actions = np.asarray(actions, dtype=np.float64)
    if actions.ndim != 2 or actions.shape[0] == 0:
        raise ValueError(f"no actions to replay (shape {actions.shape})")
    if not np.all(np.isfinite(actions)):
        bad = int(np.flatnonzero(~np.all(np.isfinite(actions), axis=1))[0])
        raise ValueError(f"frame {bad} has a non-finite action: {actions[bad].tolist()}")
    safety = SafetyFilter(limits)
    safety.reset(present)
    first = np.clip(actions[0], limits.lower, limits.upper)
    ramp_points = ramp(safety.last, first, limits.max_step)
    out, clamped, limited = [], 0, 0
    n = actions.shape[1]
    per_clamp, per_limit, beyond = np.zeros(n, int), np.zeros(n, int), np.zeros(n)
    for i, target in enumerate([*ramp_points, *actions]):
        result = safety.apply(target)
        out.append(result.command)
        clamped += result.clamped
        limited += result.rate_limited and i >= len(ramp_points)
        if i >= len(ramp_points):
            inside = np.clip(target, limits.lower, limits.upper)
            per_clamp += inside != target
            beyond = np.maximum(beyond, np.abs(target - inside))
            per_limit += result.command != inside
    return ReplayPlan(
        np.asarray(out), len(ramp_points), clamped, limited, per_clamp, beyond, per_limit, actions[-1].copy()
    )
