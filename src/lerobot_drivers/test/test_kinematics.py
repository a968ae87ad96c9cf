"""Forward kinematics of our SO-101 URDF against hand-computed poses, and URDF/robots.py agreement."""

import math

import numpy as np
import pytest

from lerobot_core.ament import share_path
from lerobot_core.robots import get_robot_spec
from lerobot_drivers.kinematics import UrdfError, parse_urdf, quaternion_xyzw, rpy_matrix

URDF = share_path("lerobot_bringup") / "urdf" / "so101.urdf"


@pytest.fixture(scope="module")
def model():
    return parse_urdf(URDF)


def tool(model, **q):
    return model.forward_kinematics(q)["gripper_frame_link"][:3, 3]


def test_zero_pose_is_sum_of_offsets(model):
    # x: 0.0388 - 0.0304 + 0.028 + 0.1349 + 0.0611 + 0.0981; z: 0.0624 + 0.0542 + 0.11257 + 0.0052
    np.testing.assert_allclose(tool(model), [0.3305, 0.0, 0.23437], atol=1e-9)


def test_shoulder_pan_quarter_turn(model):
    # pan axis at x=0.0388; the rest of the arm (0.2917 forward) swings to +y
    np.testing.assert_allclose(tool(model, shoulder_pan=math.pi / 2), [0.0388, 0.2917, 0.23437], atol=1e-9)


def test_shoulder_lift_quarter_turn_points_arm_forward_down(model):
    # lift axis at (0.0084, 0, 0.1166); distal vector (0.3221, 0, 0.11777) rotated +90 deg about y
    # -> (0.11777, 0, -0.3221)
    np.testing.assert_allclose(tool(model, shoulder_lift=math.pi / 2), [0.12617, 0.0, -0.2055], atol=1e-9)


def test_wrist_roll_does_not_move_tool_point_but_rotates_it(model):
    p0 = model.forward_kinematics({})["gripper_frame_link"]
    p1 = model.forward_kinematics({"wrist_roll": 1.0})["gripper_frame_link"]
    np.testing.assert_allclose(p1[:3, 3], p0[:3, 3], atol=1e-12)
    assert not np.allclose(p1[:3, :3], p0[:3, :3])
    jaw = model.forward_kinematics({"wrist_roll": math.pi})["moving_jaw_link"][:3, 3]
    # rolling half a turn mirrors the jaw hinge's y/z offset (0.0188, -0.0234)
    np.testing.assert_allclose(jaw[1:], [-0.0188, 0.23437 + 0.0234], atol=1e-9)


def test_urdf_limits_match_robot_spec(model):
    spec = get_robot_spec("so101_follower")
    assert [j.name for j in model.movable_joints] == list(spec.joint_names)
    for j in model.movable_joints:
        assert j.lower == pytest.approx(spec.limits[j.name].lower, abs=1e-5)
        assert j.upper == pytest.approx(spec.limits[j.name].upper, abs=1e-5)


def test_quaternion_and_rpy():
    q = quaternion_xyzw(rpy_matrix(0, 0, math.pi / 2))
    np.testing.assert_allclose(q, [0, 0, math.sin(math.pi / 4), math.cos(math.pi / 4)], atol=1e-12)
    q = quaternion_xyzw(rpy_matrix(math.pi, 0, 0))
    np.testing.assert_allclose(q, [1, 0, 0, 0], atol=1e-12)


def test_bad_urdf_names_the_problem(tmp_path):
    with pytest.raises(UrdfError, match="cannot parse"):
        parse_urdf("<robot>", is_text=True)
    bad = tmp_path / "b.urdf"
    bad.write_text(
        '<robot name="r"><link name="a"/><link name="b"/><joint name="j" type="revolute">'
        '<parent link="a"/><child link="b"/><origin xyz="1 2"/></joint></robot>'
    )
    with pytest.raises(UrdfError, match="joint 'j' origin xyz"):
        parse_urdf(bad)
