"""The three joint command messages -> joint targets (ROS-free; duck-typed: rclpy and rosbags alike).

A robot takes position commands as ``joint_commands`` (JointState, by name, some or all joints),
``forward_position_controller/commands`` (Float64MultiArray, one value per joint in the robot's
order) or ``joint_trajectory_controller/joint_trajectory`` (JointTrajectory: its first point, as
ros2_control's forward controllers take it). ``parse_command`` turns any of them into the targets
it sets, or raises ``CommandError`` saying which topic and why. The motor bus driver and the sim
nodes use it; what they do with the targets (the safety rule, the bus) is theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lerobot_core.contract.extraction import msgtype_of
from lerobot_core.contract.schema import FLOAT64_MULTI_ARRAY, JOINT_STATE, JOINT_TRAJECTORY
from lerobot_core.joint_map import index_plan
from lerobot_core.safety import CommandError


@dataclass(frozen=True)
class JointCommand:
    """Targets for some or all of a robot's joints: ``values[k]`` for joint ``index[k]``."""

    source: str  # the command's topic, in the words errors use
    index: np.ndarray  # positions in the robot's joint order
    values: np.ndarray  # rad (finite)
    unused_points: int = 0  # a JointTrajectory's points after the first (not executed)

    def onto(self, previous: Sequence[float]) -> np.ndarray:
        """A full target vector: ``previous`` with this command's joints set (a copy)."""
        out = np.array(previous, dtype=np.float64, copy=True)
        out[self.index] = self.values
        return out


def _joint_state(msg, joint_names) -> tuple[str, Sequence[str], Sequence[float], int]:
    if len(msg.name) != len(msg.position):
        raise CommandError(f"joint_commands: {len(msg.name)} names but {len(msg.position)} positions")
    return "joint_commands", msg.name, msg.position, 0


def _array(msg, joint_names) -> tuple[str, Sequence[str], Sequence[float], int]:
    source = "forward_position_controller/commands"
    if len(msg.data) != len(joint_names):
        raise CommandError(
            f"{source}: expected {len(joint_names)} values ({', '.join(joint_names)}), got {len(msg.data)}"
        )
    return source, joint_names, msg.data, 0


def _trajectory(msg, joint_names) -> tuple[str, Sequence[str], Sequence[float], int]:
    if not len(msg.points):
        raise CommandError("joint_trajectory: no points")
    positions = msg.points[0].positions
    if len(positions) != len(msg.joint_names):
        raise CommandError(
            f"joint_trajectory: {len(msg.joint_names)} joint names but {len(positions)} positions "
            "in the first point"
        )
    return "joint_trajectory", msg.joint_names, positions, len(msg.points) - 1


# the command interfaces (the nodes' command_interface, lerobot-ros-replay's --command-interface):
# name -> (message type, topic)
COMMAND_INTERFACES = {
    "joint_state": (JOINT_STATE, "joint_commands"),
    "forward_position": (FLOAT64_MULTI_ARRAY, "forward_position_controller/commands"),
    "joint_trajectory": (JOINT_TRAJECTORY, "joint_trajectory_controller/joint_trajectory"),
}

# message type -> (msg, the robot's joint names) -> (source, names, positions, unused points)
COMMAND_PARSERS: dict[str, Callable[[Any, Sequence[str]], tuple]] = {
    JOINT_STATE: _joint_state,
    FLOAT64_MULTI_ARRAY: _array,
    JOINT_TRAJECTORY: _trajectory,
}


def parse_command(msg, joint_names: Sequence[str]) -> JointCommand:
    """The targets one command message sets; CommandError (naming the topic) if it cannot be applied."""
    mtype = msgtype_of(msg)
    parse = COMMAND_PARSERS.get(mtype)
    if parse is None:
        raise CommandError(f"{mtype} is not a joint command type (use {', '.join(COMMAND_PARSERS)})")
    source, names, positions, unused = parse(msg, joint_names)
    if not len(names):
        raise CommandError(f"{source}: no joint names given")
    plan = index_plan(names, joint_names)
    if plan.unknown:
        raise CommandError(f"{source}: unknown joint {plan.unknown[0]!r}; joints: {', '.join(joint_names)}")
    values = plan.take(positions)
    for k in np.flatnonzero(~np.isfinite(values))[:1]:
        raise CommandError(f"{source}: non-finite target {values[k]} for joint {joint_names[plan.dst[k]]!r}")
    return JointCommand(source, plan.dst, values, unused)
