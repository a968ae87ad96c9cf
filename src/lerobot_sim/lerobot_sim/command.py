"""The simulated SO-101's servo limits on commands (ROS-free).

Parsing the three command types is ``lerobot_core.command``; the rule is ``lerobot_core.safety``.
"""

from __future__ import annotations

from collections.abc import Sequence

from lerobot_core.safety import SafetyLimits


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
