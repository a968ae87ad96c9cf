"""The motor bus's device guard: lerobot_core.safety's rule with the servo range and the step from present."""

import math

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
