"""TeleopMapper.inverse: where the leader must stand to mirror the follower (active-leader HIL)."""

import math

import pytest

from lerobot_core.robots import get_robot_spec
from lerobot_drivers.teleop import TeleopMapper


@pytest.mark.parametrize("follower", ["so101_follower", "koch_follower"])
def test_inverse_undoes_map_within_limits(follower):
    leader = get_robot_spec("so101_leader")
    m = TeleopMapper(leader, get_robot_spec(follower))
    names = list(leader.joint_names)
    lo = [leader.limits[n].lower for n in names]
    hi = [leader.limits[n].upper for n in names]
    for frac in (0.1, 0.5, 0.9):
        pose = [a + frac * (b - a) for a, b in zip(lo, hi, strict=True)]
        fol = m.map(names, pose)
        back = m.inverse(list(fol), list(fol.values()))
        for n, v in zip(names, pose, strict=True):
            if get_robot_spec(follower).limits[n].clamp(v) == v or n == "gripper":
                assert back[n] == pytest.approx(v, abs=1e-9), n


def test_inverse_gripper_range_clamp_and_unknown_names():
    leader, follower = get_robot_spec("so101_leader"), get_robot_spec("koch_follower")
    m = TeleopMapper(leader, follower)
    assert m.inverse(["gripper"], [follower.limits["gripper"].upper])["gripper"] == pytest.approx(
        leader.limits["gripper"].upper
    )
    assert m.inverse(["shoulder_pan"], [100.0])["shoulder_pan"] == leader.limits["shoulder_pan"].upper
    assert m.inverse(["shoulder_pan", "foo"], [math.nan, 1.0]) == {}
