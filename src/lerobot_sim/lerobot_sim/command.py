"""Joint commands for a simulated robot: parsing the three command types and the safety filter (ROS-free).

The functions take plain sequences (what the message fields hold), so the nodes stay thin and the
rules are tested without ROS. Every rejection raises ``CommandError`` saying what was wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lerobot_core.joint_map import index_plan


class CommandError(ValueError):
    """A command that cannot be applied; the message says why."""


def positions_by_name(
    names: Sequence[str], positions: Sequence[float], joint_names: Sequence[str], previous: np.ndarray
) -> np.ndarray:
    """Targets from a JointState-style command: positions for some or all joints, by name.

    Joints not named keep their ``previous`` target.
    """
    if len(names) != len(positions):
        raise CommandError(f"joint_commands: {len(names)} names but {len(positions)} positions")
    if not names:
        raise CommandError("joint_commands: no joint names given")
    plan = index_plan(names, joint_names)
    if plan.unknown:
        raise CommandError(
            f"joint_commands: unknown joint(s) {list(plan.unknown)}; this robot has {list(joint_names)}"
        )
    return plan.gather(positions, np.array(previous, dtype=np.float64, copy=True))


def positions_from_array(data: Sequence[float], joint_names: Sequence[str]) -> np.ndarray:
    """Targets from a Float64MultiArray command: one value per joint, in the profile's joint order."""
    if len(data) != len(joint_names):
        raise CommandError(
            f"forward_position_controller/commands: expected {len(joint_names)} values "
            f"({', '.join(joint_names)}), got {len(data)}"
        )
    return np.asarray(data, dtype=np.float64).copy()


def positions_from_trajectory(
    names: Sequence[str], points: Sequence[Sequence[float]], joint_names: Sequence[str], previous: np.ndarray
) -> np.ndarray:
    """Targets from a JointTrajectory: its first point's positions (as the real driver does)."""
    if not points:
        raise CommandError("joint_trajectory: no points")
    return positions_by_name(names, points[0], joint_names, previous).copy()


@dataclass(frozen=True)
class SafetyLimits:
    """Joint limits (rad) and the largest change of the target per control step (rad, 0 = unbounded)."""

    lower: tuple[float, ...]
    upper: tuple[float, ...]
    max_step: float = 0.0

    def apply(self, target: np.ndarray, previous: np.ndarray) -> np.ndarray:
        """Clamp ``target`` to the limits and bound its change from ``previous``; rejects NaN/inf."""
        target = np.asarray(target, dtype=np.float64)
        if target.shape != (len(self.lower),):
            raise CommandError(f"command has {target.size} values, robot has {len(self.lower)} joints")
        if not np.all(np.isfinite(target)):
            raise CommandError(f"command contains non-finite values: {target.tolist()}")
        out = np.clip(target, self.lower, self.upper)
        if self.max_step > 0:
            out = np.clip(out, previous - self.max_step, previous + self.max_step)
            out = np.clip(out, self.lower, self.upper)
        return out


def so101_safety(fps: float, max_joint_velocity: float | None = None) -> SafetyLimits:
    """The SO-101 sim's command safety: URDF joint limits, target change bounded by the servos' velocity
    (rad/s) times the control period. The sim node and the in-process evaluation both use it."""
    from lerobot_sim.so101_model import JOINT_NAMES, JointLimits

    if max_joint_velocity is None:
        max_joint_velocity = default_max_joint_velocity(JOINT_NAMES)
    limits = JointLimits.so101()
    return SafetyLimits(limits.lower, limits.upper, float(max_joint_velocity) / (fps or 30.0))


def default_max_joint_velocity(joint_names: Sequence[str]) -> float:
    """The slowest servo's velocity limit (rad/s) from the robot registry; 4.7 without it."""
    try:
        from lerobot_core.robots import get_robot_spec

        return min(get_robot_spec("so101_follower").limits[n].velocity for n in joint_names)
    except Exception:
        return 4.7
