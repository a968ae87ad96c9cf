"""Leader -> follower teleop: unit mapping, and the whole chain across processes."""

import math
import time

import pytest

from lerobot_core.robots import get_robot_spec
from lerobot_drivers.teleop import TeleopMapper, parse_joint_map


def test_mapper_identity_and_gripper_rescale():
    leader = get_robot_spec("so101_leader")
    follower = get_robot_spec("koch_follower")
    m = TeleopMapper(leader, follower)
    out = m.map(list(leader.joint_names), [0.1, -0.2, 0.3, 0.0, 0.5, leader.limits["gripper"].upper])
    assert out["elbow_flex"] == pytest.approx(0.3)
    assert out["gripper"] == pytest.approx(follower.limits["gripper"].upper)
    mid = (leader.limits["gripper"].lower + leader.limits["gripper"].upper) / 2
    fmid = (follower.limits["gripper"].lower + follower.limits["gripper"].upper) / 2
    assert m.map(["gripper"], [mid])["gripper"] == pytest.approx(fmid)
    # clamped to the follower's limits, NaN skipped, unknown names ignored
    assert m.map(["shoulder_pan"], [10.0])["shoulder_pan"] == follower.limits["shoulder_pan"].upper
    assert m.map(["shoulder_pan", "foo"], [math.nan, 1.0]) == {}


def test_mapper_prefixes_and_explicit_map():
    leader = get_robot_spec("so101_leader")
    follower = get_robot_spec("bi_so_follower")
    m = TeleopMapper(leader, follower, parse_joint_map(["elbow_flex:left_elbow_flex"]), leader_prefix="l_")
    assert m.map(["l_elbow_flex", "elbow_flex"], [0.2, 0.4]) == {"left_elbow_flex": pytest.approx(0.2)}
    with pytest.raises(ValueError, match="leader_joint:follower_joint"):
        parse_joint_map(["elbow_flex"])
    with pytest.raises(ValueError, match="not a joint of follower"):
        TeleopMapper(leader, follower, {"elbow_flex": "elbow"})


@pytest.mark.ros
def test_emulated_leader_drives_emulated_follower(ros_node, tmp_path):
    from sensor_msgs.msg import JointState

    from lerobot_core.ros.testing import MessageCollector, RosProcess, wait_until
    from lerobot_drivers.servo_emulator import EmulatorProcess

    leader_link, follower_link = str(tmp_path / "leader"), str(tmp_path / "follower")
    lead_js = MessageCollector(ros_node, JointState, "/leader/joint_states")
    fol_js = MessageCollector(ros_node, JointState, "/joint_states")
    cmds = MessageCollector(ros_node, JointState, "/joint_commands")
    with (
        EmulatorProcess("so101_leader", leader_link, hand_motion_ticks=300.0),
        EmulatorProcess("so101_follower", follower_link, tau_s=0.02),
    ):
        common = {"autostart": True, "rate_hz": 100.0, "timeout_ms": 200.0}
        with (
            RosProcess(
                "lerobot_drivers",
                "motor_bus",
                name="leader_bus",
                namespace="leader",
                parameters={**common, "robot": "so101_leader", "port": leader_link, "read_only": True},
            ),
            RosProcess(
                "lerobot_drivers",
                "motor_bus",
                name="follower_bus",
                parameters={**common, "robot": "so101_follower", "port": follower_link},
            ),
            RosProcess(
                "lerobot_drivers",
                "teleop",
                parameters={"autostart": True, "rate_hz": 100.0},
                remappings={"leader_joint_states": "/leader/joint_states"},
            ) as teleop,
        ):
            lead_js.wait(50, timeout=90)
            cmds.wait(50, timeout=60)
            assert wait_until(lambda: len(fol_js.messages) > 200, 60)
            time.sleep(1.0)
            moved = max(abs(m.position[2]) for m in lead_js.messages[-150:])
            assert moved > 0.2  # the "hand" really moves the leader (300 ticks ~ 0.46 rad)

            # the follower reproduces the leader's pose of a short while ago (bus cycles, teleop tick,
            # first-order servo response; longer on a loaded machine): best match within 0.6 s back.
            # The pose it is sent is the leader's clamped to the follower's limits: the hand swings the
            # leader's gripper to -0.46 rad, below the follower gripper's lower limit (-0.17 rad).
            follower = get_robot_spec("so101_follower")
            lower = [follower.limits[j].lower for j in follower.joint_names]
            upper = [follower.limits[j].upper for j in follower.joint_names]

            def stamp(m):
                return m.header.stamp.sec + m.header.stamp.nanosec * 1e-9

            def sent(m):
                return [min(max(x, lo), hi) for x, lo, hi in zip(m.position, lower, upper, strict=True)]

            # the clamp is exercised (the hand's period is 4 s)
            assert wait_until(lambda: min(m.position[5] for m in lead_js.messages) < lower[5] - 0.1, 10)
            fol = fol_js.messages[-1]
            assert min(m.position[5] for m in fol_js.messages) >= lower[5] - 0.01  # never past its limit
            recent = [m for m in lead_js.messages if stamp(fol) - 0.6 <= stamp(m) <= stamp(fol) + 0.05]
            assert recent, "no leader sample in the 0.6 s before the follower's last sample"
            err = min(max(abs(a - b) for a, b in zip(fol.position, sent(m), strict=True)) for m in recent)
            assert err < 0.05, (err, teleop.output())
            assert cmds.messages[-1].name == list(get_robot_spec("so101_follower").joint_names)
