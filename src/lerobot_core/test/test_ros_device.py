"""lerobot_core.ros.device: the background node the LeRobot plugins use (in-process, loopback DDS)."""

from __future__ import annotations

import pytest

from lerobot_core.ros.device import BackgroundNode, message_class


def test_message_class_by_name():
    assert message_class("sensor_msgs/msg/JointState").__name__ == "JointState"
    assert message_class("std_msgs/Float64MultiArray").__name__ == "Float64MultiArray"
    with pytest.raises(ImportError, match="no message Nope"):
        message_class("sensor_msgs/msg/Nope")
    with pytest.raises(ImportError, match="not_a_pkg"):
        message_class("not_a_pkg/msg/X")
    with pytest.raises(ValueError, match="pkg/msg/Type"):
        message_class("JointState")


def test_latest_message_and_timeout_naming_the_topic():
    node = BackgroundNode("test_device", namespace="dev")
    try:
        node.subscribe("state", "sensor_msgs/msg/JointState")
        node.subscribe("silent", "std_msgs/msg/Float64MultiArray")
        pub = node.publisher("state", "sensor_msgs/msg/JointState")
        msg = message_class("sensor_msgs/msg/JointState")(name=["a"], position=[1.5])
        for _ in range(50):  # until the subscription matched
            pub.publish(msg)
            try:
                node.wait_for(["state"], 0.1)
                break
            except TimeoutError:
                continue
        latest = node.latest("state")
        assert latest.count >= 1 and list(latest.msg.position) == [1.5]
        with pytest.raises(TimeoutError, match="/dev/silent"):
            node.wait_for(["state", "silent"], 0.3)
        with pytest.raises(TimeoutError, match="/dev/state"):  # nothing newer than what was seen
            node.wait_for(["state"], 0.2, after=node.counts())
    finally:
        node.close()
    node.close()  # idempotent
