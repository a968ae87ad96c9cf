"""The three joint command messages -> targets (lerobot_core.command), with real ROS message types."""

import math

import numpy as np
import pytest
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from lerobot_core.command import parse_command
from lerobot_core.safety import CommandError

JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
PREV = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]


def _trajectory(names, *points):
    return JointTrajectory(joint_names=names, points=[JointTrajectoryPoint(positions=p) for p in points])


def test_joint_state_sets_the_named_joints_in_any_order():
    cmd = parse_command(JointState(name=["gripper", "elbow_flex"], position=[-0.1, 1.0]), JOINTS)
    assert cmd.source == "joint_commands"
    out = cmd.onto(PREV)
    assert out.tolist() == [0.1, 0.2, 1.0, 0.4, 0.5, -0.1]
    assert PREV == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]  # a copy


def test_array_is_one_value_per_joint_in_the_robots_order():
    cmd = parse_command(Float64MultiArray(data=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), JOINTS)
    assert cmd.source == "forward_position_controller/commands"
    assert cmd.onto(PREV).tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def test_trajectory_takes_its_first_point_and_counts_the_rest():
    cmd = parse_command(_trajectory(["wrist_roll"], [0.7], [0.9]), JOINTS)
    assert cmd.source == "joint_trajectory" and cmd.unused_points == 1
    assert cmd.onto(PREV)[4] == 0.7 and np.array_equal(cmd.index, [4])


@pytest.mark.parametrize(
    ("msg", "needle"),
    [
        (
            JointState(name=["elbow"], position=[1.0]),
            "joint_commands: unknown joint 'elbow'; joints: shoulder_pan",
        ),
        (JointState(name=["elbow_flex"], position=[1.0, 2.0]), "joint_commands: 1 names but 2 positions"),
        (JointState(), "joint_commands: no joint names given"),
        (
            JointState(name=["gripper"], position=[math.nan]),
            "joint_commands: non-finite target nan for joint 'gripper'",
        ),
        (
            Float64MultiArray(data=[0.0] * 5),
            r"forward_position_controller/commands: expected 6 values \(shoulder_pan, .*\), got 5",
        ),
        (
            Float64MultiArray(data=[0.0, math.inf, 0, 0, 0, 0]),
            "non-finite target inf for joint 'shoulder_lift'",
        ),
        (_trajectory(["wrist_roll"]), "joint_trajectory: no points"),
        (
            _trajectory(["wrist_roll", "gripper"], [0.1]),
            "joint_trajectory: 2 joint names but 1 positions in the first point",
        ),
        (String(data="1 2 3"), "std_msgs/msg/String is not a joint command type"),
    ],
)
def test_refusals_say_which_topic_and_why(msg, needle):
    with pytest.raises(CommandError, match=needle):
        parse_command(msg, JOINTS)


@pytest.mark.parametrize("interface", ["joint_state", "forward_position", "joint_trajectory"])
def test_a_built_command_parses_back_to_its_targets(interface):
    """command_message (what the policy node, lerobot-ros-replay and the LeRobot robot plugin publish)
    and parse_command (what the bus driver and the sims take) agree on all three interfaces."""
    from builtin_interfaces.msg import Time

    from lerobot_core.command import COMMAND_INTERFACES
    from lerobot_core.ros.commands import command_message

    msgtype, _ = COMMAND_INTERFACES[interface]
    targets = [0.5, -0.25, 1.0, 0.0, 0.125, 0.75]
    msg = command_message(msgtype, JOINTS, np.array(targets), Time(sec=3, nanosec=7), 0.05)
    assert type(msg).__name__ == msgtype.rsplit("/", 1)[1]
    cmd = parse_command(msg, JOINTS)
    assert cmd.onto(PREV).tolist() == targets
    if interface != "forward_position":
        assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (3, 7)
    if interface == "joint_trajectory":
        point = msg.points[0].time_from_start
        assert (point.sec, point.nanosec) == (0, 50_000_000)
