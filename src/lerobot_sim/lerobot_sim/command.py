"""Joint commands for a simulated robot: parsing the three command types and its servos' limits (ROS-free).

The functions take plain sequences (what the message fields hold), so the nodes stay thin and the
rules are tested without ROS. Every rejection raises ``CommandError`` saying what was wrong.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lerobot_core.joint_map import index_plan
from lerobot_core.safety import CommandError, SafetyLimits


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


def so101_safety(fps: float, max_joint_velocity: float | None = None) -> SafetyLimits:
    """The SO-101 sim's command safety: URDF joint limits, target change bounded by the servos' velocity
    (rad/s) times the control period. The sim node and the in-process evaluation both use it."""
    from lerobot_sim.so101_model import JOINT_NAMES, JointLimits

    if max_joint_velocity is None:
        max_joint_velocity = default_max_joint_velocity(JOINT_NAMES)
    limits = JointLimits.so101()
    step = float(max_joint_velocity) / (fps or 30.0)
    return SafetyLimits.build(
        len(JOINT_NAMES), limits.lower, limits.upper, step if step > 0 else float("inf")
    )


def default_max_joint_velocity(joint_names: Sequence[str]) -> float:
    """The slowest servo's velocity limit (rad/s) from the robot registry; 4.7 without it."""
    try:
        from lerobot_core.robots import get_robot_spec

        return min(get_robot_spec("so101_follower").limits[n].velocity for n in joint_names)
    except Exception:
        return 4.7
