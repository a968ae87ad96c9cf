"""lerobot_core.ros.device: the background node the LeRobot plugins use (in-process, loopback DDS)."""

from __future__ import annotations

import pytest

from lerobot_core.ros.device import BackgroundNode, message_class, stamp_ns


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


def test_stamp_ns():
    msg = message_class("sensor_msgs/msg/JointState")()
    msg.header.stamp.sec, msg.header.stamp.nanosec = 3, 5
    assert stamp_ns(msg) == 3_000_000_005
    assert stamp_ns(message_class("std_msgs/msg/Float64MultiArray")()) == 0  # no header


def test_wait_newer_wakes_on_a_new_message_only():
    node = BackgroundNode("test_device_newer")
    try:
        node.subscribe("ticks", "std_msgs/msg/Float64MultiArray")
        pub = node.publisher("ticks", "std_msgs/msg/Float64MultiArray")
        msg = message_class("std_msgs/msg/Float64MultiArray")(data=[1.0])
        for _ in range(50):  # until the subscription matched
            pub.publish(msg)
            if node.wait_newer({"ticks": 0}, 0.1):
                break
        seen = node.counts()
        assert seen["ticks"] >= 1
        assert not node.wait_newer(seen, 0.2)  # nothing newer
        pub.publish(msg)
        assert node.wait_newer(seen, 5.0)
    finally:
        node.close()


def test_service_call_and_a_missing_service_named():
    from std_srvs.srv import SetBool

    server = BackgroundNode("test_device_server", namespace="leader")
    client_node = BackgroundNode("test_device_client")
    try:
        requests = []

        def on_request(request, response):
            requests.append(request.data)
            response.success, response.message = True, f"torque {'on' if request.data else 'off'}"
            return response

        server.node.create_service(SetBool, "torque_enable", on_request)
        client = client_node.service_client("leader/torque_enable", "std_srvs/srv/SetBool")
        response = client_node.call(client, SetBool.Request(data=True), 10.0)
        assert response.success and response.message == "torque on" and requests == [True]
        missing = client_node.service_client("nobody/torque_enable", "std_srvs/srv/SetBool")
        with pytest.raises(TimeoutError, match="/nobody/torque_enable is not available"):
            client_node.call(missing, SetBool.Request(data=False), 0.3)
        with pytest.raises(ImportError, match="std_srvs/srv/Nope"):
            client_node.service_client("x", "std_srvs/srv/Nope")
    finally:
        client_node.close()
        server.close()
