import math

import pytest

from lerobot_core.robots import (
    DEGREES,
    DYNAMIXEL,
    FEETECH,
    RANGE_0_100,
    RANGE_M100_100,
    get_robot_spec,
    robot_names,
)

SO = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")


@pytest.mark.parametrize("name", ["so100_follower", "so101_follower", "so100_leader", "so101_leader"])
def test_so_arms_match_lerobot(name):
    spec = get_robot_spec(name)
    assert spec.bus == FEETECH
    assert spec.joint_names == SO
    assert spec.motor_ids == (1, 2, 3, 4, 5, 6)
    assert {m.model for m in spec.motors} == {"sts3215"}
    assert spec.motor("gripper").norm_mode == RANGE_0_100
    assert all(m.norm_mode == RANGE_M100_100 for m in spec.motors if m.name != "gripper")
    assert spec.feature_names[0] == "shoulder_pan.pos"
    assert spec.calibration_name == ("so_leader" if "leader" in name else "so_follower")


def test_koch_models():
    follower = get_robot_spec("koch_follower")
    leader = get_robot_spec("koch_leader")
    assert follower.bus == leader.bus == DYNAMIXEL
    assert [m.model for m in follower.motors] == ["xl430-w250"] * 2 + ["xl330-m288"] * 4
    assert [m.model for m in leader.motors] == ["xl330-m077"] * 6
    assert follower.motor("gripper").id == 6


def test_bimanual_prefix_order_right_first():
    spec = get_robot_spec("bi_so_follower")
    assert spec.joint_names[:6] == tuple("right_" + n for n in SO)
    assert spec.joint_names[6:] == tuple("left_" + n for n in SO)
    assert [p for p, _ in spec.arms] == ["right_", "left_"]
    assert spec.limits["left_gripper"] == spec.arms[1][1].limits["gripper"]


def test_limits_in_radians_and_ordered():
    for name in robot_names():
        spec = get_robot_spec(name)
        for joint in spec.joint_names:
            lim = spec.limits[joint]
            assert lim.lower < lim.upper <= math.pi
            assert lim.clamp(10.0) == lim.upper


def test_use_degrees_keeps_gripper_range():
    spec = get_robot_spec("so101_follower", use_degrees=True)
    assert spec.motor("elbow_flex").norm_mode == DEGREES
    assert spec.motor("gripper").norm_mode == RANGE_0_100


def test_unknown_name_lists_known():
    with pytest.raises(KeyError, match="so101_follower"):
        get_robot_spec("so102_follower")
