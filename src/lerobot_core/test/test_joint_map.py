"""The one joint names -> vector mapping: a plan per message layout, cached; reordering; refusals."""

import array

import numpy as np
import pytest

from lerobot_core.contract.extraction import vector_values
from lerobot_core.joint_map import index_plan, plan_cache_info

JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "gripper")


def test_a_plan_is_built_once_per_layout():
    names = ["gripper", "elbow_flex", "shoulder_lift", "shoulder_pan", "camera_tilt"]
    before = plan_cache_info()
    first = index_plan(names, JOINTS)
    again = index_plan(tuple(names), list(JOINTS))  # the same layout, given as other sequences
    after = plan_cache_info()
    assert again is first
    assert after.misses - before.misses <= 1 and after.hits - before.hits >= 1
    other = index_plan(names[::-1], JOINTS)  # another layout: another plan
    assert other is not first


def test_reordering_and_the_joints_a_message_lacks_or_adds():
    plan = index_plan(["gripper", "wrist_roll", "shoulder_pan"], JOINTS)
    assert plan.missing == ("shoulder_lift", "elbow_flex") and plan.unknown == ("wrist_roll",)
    assert not plan.complete
    values = array.array("d", [0.9, 7.0, 0.1])  # rclpy's JointState.position type
    out = plan.gather(values)
    assert out[0] == 0.1 and out[3] == 0.9 and np.isnan(out[1:3]).all()
    previous = np.array([1.0, 2.0, 3.0, 4.0])
    assert plan.gather(values, previous) is previous and previous.tolist() == [0.1, 2.0, 3.0, 0.9]
    full = index_plan(list(reversed(JOINTS)), JOINTS)
    assert full.complete and full.take([4.0, 3.0, 2.0, 1.0]).tolist() == [1.0, 2.0, 3.0, 4.0]


def test_a_name_given_twice_keeps_its_last_value():
    plan = index_plan(["gripper", "gripper"], JOINTS)
    assert plan.gather([0.1, 0.2])[3] == 0.2


def test_a_missing_joint_is_named_with_the_topic_and_the_layout():
    plan = index_plan(["shoulder_pan", "gripper"], JOINTS)
    with pytest.raises(
        ValueError,
        match=r"topic /follower/joint_states: joint 'shoulder_lift' is not in the message \(it has \['shoulder_pan', 'gripper'\]\)",
    ):
        plan.require("topic /follower/joint_states")
    assert index_plan(JOINTS, JOINTS).require("topic /x").complete


class _JointState:  # the fields a rosbags/rclpy JointState has
    def __init__(self, name, position):
        self.name, self.position, self.velocity, self.effort = name, position, [], []


def test_the_contract_extraction_maps_through_the_same_plans():
    layout = [("position", j) for j in JOINTS]
    msg = _JointState(["gripper", "elbow_flex", "shoulder_lift", "shoulder_pan"], [4.0, 3.0, 2.0, 1.0])
    assert vector_values("/js", "sensor_msgs/msg/JointState", msg, layout).tolist() == [1.0, 2.0, 3.0, 4.0]
    assert index_plan(msg.name, JOINTS) is index_plan(tuple(msg.name), JOINTS)
    with pytest.raises(ValueError, match="topic /js: joint 'shoulder_pan' is not in the message"):
        vector_values("/js", "sensor_msgs/msg/JointState", _JointState(["gripper"], [1.0]), layout)


def test_the_recorders_extraction_builds_one_plan_per_layout():
    """Recording (bag import and the live recorder extract the same way): many JointStates of one
    layout build one plan; a message with the names in another order builds one more."""
    from lerobot_core import joint_map
    from lerobot_core.contract import extraction

    layout = [("position", j) for j in JOINTS] + [("velocity", j) for j in JOINTS]
    names = ["elbow_flex", "gripper", "shoulder_pan", "shoulder_lift"]
    joint_map._build.cache_clear()
    extraction._PLANS.clear()  # its per-field plans, made from joint_map's
    for k in range(200):
        msg = _JointState(list(names), [3.0, 4.0, 1.0, float(k)])  # fresh lists, as each message has
        msg.velocity = [0.3, 0.4, 0.1, 0.2]
        out = vector_values("/js", "sensor_msgs/msg/JointState", msg, layout)
    assert out.tolist() == [1.0, 199.0, 3.0, 4.0, 0.1, 0.2, 0.3, 0.4]
    assert plan_cache_info().misses == 1
    msg = _JointState(names[::-1], [9.0, 1.0, 4.0, 3.0])
    msg.velocity = [0.0] * 4
    assert vector_values("/js", "sensor_msgs/msg/JointState", msg, layout)[:4].tolist() == [
        1.0,
        9.0,
        3.0,
        4.0,
    ]
    assert plan_cache_info().misses == 2
