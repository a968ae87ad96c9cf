"""The motor bus's device guard: lerobot_core.safety's rule with the servo range and the step from present."""

import math

import numpy as np
import pytest

from lerobot_core.robots import get_robot_spec
from lerobot_core.safety import CommandError
from lerobot_drivers.arm import ArmBus

SPEC = get_robot_spec("so101_follower")
GRIPPER = SPEC.limits["gripper"]


def _arm(max_step_rad: float) -> ArmBus:
    return ArmBus(SPEC, "/dev/no-such-port", max_step_rad=max_step_rad)  # the port opens on connect only


def test_range_clamped_and_step_from_present_bounded():
    goals, report = _arm(0.1).safe_goals(
        {"gripper": 5.0, "shoulder_pan": 0.5}, {"shoulder_pan": 0.0, "gripper": 0.0}
    )
    assert goals == {"shoulder_pan": pytest.approx(0.1), "gripper": pytest.approx(0.1)}
    assert report.clamped == ["gripper"] and report.step_limited == ["shoulder_pan", "gripper"]
    goals, report = _arm(0.0).safe_goals({"gripper": 5.0}, {"gripper": 0.0})  # 0 = no step bound
    assert goals == {"gripper": GRIPPER.upper} and report.step_limited == []


def test_a_joint_without_a_present_position_is_only_clamped():
    goals, report = _arm(0.1).safe_goals({"shoulder_pan": 0.5}, {})
    assert goals == {"shoulder_pan": 0.5} and not report.clamped and not report.step_limited


def test_from_outside_the_range_the_goal_moves_back_a_step_not_a_jump():
    present = GRIPPER.upper + 0.5  # e.g. a servo pushed past its limit while torque was off
    goals, _ = _arm(0.1).safe_goals({"gripper": 0.0}, {"gripper": present})
    assert goals["gripper"] == pytest.approx(present - 0.1)


@pytest.mark.parametrize(
    ("targets", "needle"),
    [
        ({"elbow": 1.0}, "unknown joint 'elbow'; joints of so101_follower"),
        ({"gripper": math.nan}, "non-finite target nan for joint 'gripper'"),
    ],
)
def test_refusals_name_the_joint(targets, needle):
    with pytest.raises(CommandError, match=needle):
        _arm(0.1).safe_goals(targets, {})


def test_the_command_path_maps_names_once_per_layout_and_guards_vectors():
    """joint_commands -> goals as the motor bus node does it: parse_command maps the names through
    one cached plan per message layout (a new layout builds one more), the guard works on vectors in
    the robot's order and gives what the by-name guard gives."""
    from sensor_msgs.msg import JointState

    from lerobot_core import joint_map
    from lerobot_core.command import parse_command

    arm = _arm(0.1)
    names = list(SPEC.joint_names)
    present = [0.0] * len(names)
    joint_map._build.cache_clear()
    target = np.full(len(names), np.nan)
    for k in range(200):  # a new message each time, as rclpy delivers them
        msg = JointState(name=names[::-1], position=[0.01 * k] * len(names))
        target = parse_command(msg, SPEC.joint_names).onto(target)
        last, report = arm.limit_goals(target, present)
    assert joint_map.plan_cache_info().misses == 1
    partial = parse_command(JointState(name=["gripper"], position=[0.05]), SPEC.joint_names)
    goals, _ = arm.limit_goals(partial.onto(np.full(len(names), np.nan)), present)
    assert joint_map.plan_cache_info().misses == 2  # a new layout: one more plan
    assert np.isnan(goals[:-1]).all() and goals[-1] == pytest.approx(0.05)  # only the commanded joint
    by_name, by_name_report = arm.safe_goals(
        dict(zip(names, target.tolist(), strict=True)), dict(zip(names, present, strict=True))
    )
    assert last.tolist() == [by_name[n] for n in names] and report == by_name_report
