"""Remote inference with real processes over loopback DDS: a policy node in `inference: remote` mode
driving the emulated arm from chunks on policy/remote_chunk, published by this test (bad input) or by a
second policy node in `inference: serve` mode (the split). Across a real link: test_remote_netns.py."""

import time

import numpy as np
import pytest

from .test_policy_node_ros import STATUS_QOS, EmulatedRobot, policy_params, positions

pytestmark = pytest.mark.ros

rclpy = pytest.importorskip("rclpy")

from builtin_interfaces.msg import Time  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from trajectory_msgs.msg import JointTrajectoryPoint  # noqa: E402

from lerobot_core.ros.testing import MessageCollector, RosProcess, wait_until  # noqa: E402
from lerobot_core.time import ns_to_stamp, stamp_to_ns  # noqa: E402
from lerobot_msgs.msg import ActionChunk, PolicyStatus  # noqa: E402

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def robot_params(**kw):
    return policy_params(inference="remote", max_chunk_age_s=0.3, source_timeout_s=1.0, **kw)


def chunk(node, value, age_s=0.0, names=JOINTS, source="gpu-a:1", steps=10):
    msg = ActionChunk(policy_type="act", source_id=source)
    msg.header.stamp = ns_to_stamp(node.get_clock().now().nanoseconds - int(age_s * 1e9), Time)
    msg.trajectory.joint_names = list(names)
    msg.trajectory.points = [JointTrajectoryPoint(positions=[value] * len(names)) for _ in range(steps)]
    return msg


def has_status(status, text):
    return any(text in s.message for s in status.messages)


def test_robot_side_executes_fresh_chunks_only_from_one_source_and_contract(ros_node):
    pub = ros_node.create_publisher(ActionChunk, "policy/remote_chunk", 10)
    cmds = MessageCollector(ros_node, JointState, "joint_commands")
    status = MessageCollector(ros_node, PolicyStatus, "policy/status", qos=STATUS_QOS)
    with EmulatedRobot(), RosProcess("lerobot_policy_node", "policy", parameters=robot_params()) as node:
        assert wait_until(
            lambda: has_status(status, "waiting for the first chunk on policy/remote_chunk"), 60
        ), node.output()
        assert wait_until(lambda: pub.get_subscription_count() > 0, 10)
        # chunks 0.6 s old (bound 0.3 s), value 0.5: never executed, the hold names the cause
        old = lambda: has_status(status, "chunk too old")  # noqa: E731
        assert wait_until(lambda: pub.publish(chunk(ros_node, 0.5, age_s=0.6)) or old(), 10), node.output()
        n_old = len(cmds.messages)
        assert n_old > 0 and np.all(positions(cmds.messages, JointState) == 0.0)
        # another contract: refused with both joint lists named
        # (published until refused, as the old ones: old chunks still in flight may be refused after it)
        other = lambda: has_status(status, "is for another contract")  # noqa: E731
        assert wait_until(lambda: pub.publish(chunk(ros_node, 0.5, names=JOINTS[:5])) or other(), 10), (
            node.output()
        )
        msg = next(s.message for s in status.messages if "another contract" in s.message)
        assert str(JOINTS[:5]) in msg and str(JOINTS) in msg
        # fresh chunks resume by themselves: the arm is driven toward 0.2
        assert wait_until(
            lambda: pub.publish(chunk(ros_node, 0.2)) or positions(cmds.messages, JointState)[-1][0] > 0.1, 20
        )
        # ... and it is running again (still fed: the queue runs dry within a chunk once chunks stop)
        assert wait_until(
            lambda: pub.publish(chunk(ros_node, 0.2))
            or status.messages[-1].state == PolicyStatus.STATE_RUNNING,
            5,
        )
        # a second inference host while the first one publishes: refused; the first one keeps driving
        for _ in range(5):
            pub.publish(chunk(ros_node, 0.2))
            pub.publish(chunk(ros_node, -0.4, source="gpu-b:2"))
            time.sleep(0.02)
        assert wait_until(lambda: has_status(status, "second command source refused: gpu-b:2 publishes"), 10)
        # the link goes silent: hold with that cause, then recovery
        assert wait_until(lambda: has_status(status, "policy host silent: no chunk from gpu-a:1"), 10)
    p = positions(cmds.messages, JointState)
    assert np.all(p[:n_old] == 0.0) and p.max() <= 0.2 + 1e-9 and p.min() >= -1e-9, (
        "a refused chunk moved the arm"
    )


def test_the_split_inference_on_one_node_control_on_another(ros_node):
    """inference: serve infers from the robot's topics and publishes chunks; inference: remote commands the
    arm from them, skipping the actions that fell due since the observation."""
    cmds = MessageCollector(ros_node, JointState, "joint_commands")
    remote = MessageCollector(ros_node, ActionChunk, "policy/remote_chunk")
    status = MessageCollector(ros_node, PolicyStatus, "robot/policy/status", qos=STATUS_QOS)
    states = MessageCollector(ros_node, JointState, "joint_states")
    ages = []
    ros_node.create_subscription(
        ActionChunk,
        "policy/remote_chunk",
        lambda m: ages.append(ros_node.get_clock().now().nanoseconds - stamp_to_ns(m.header.stamp)),
        10,
    )
    serve = policy_params(inference="serve", control_priority=0, link_delay_ms=60.0)
    with (
        EmulatedRobot(),
        RosProcess(
            "lerobot_policy_node",
            "policy",
            name="robot",
            namespace="robot",
            parameters=robot_params(),
            remappings={
                "/robot/joint_states": "/joint_states",
                "/robot/joint_commands": "/joint_commands",
                "/robot/policy/remote_chunk": "/policy/remote_chunk",
            },
        ) as robot,
        RosProcess("lerobot_policy_node", "policy", name="gpu", parameters=serve) as gpu,
    ):
        got = remote.wait(4, timeout=60)
        assert got, gpu.output()
        assert len({c.source_id for c in got}) == 1 and got[0].source_id.endswith(f":{gpu.pid}")
        assert list(got[0].trajectory.joint_names) == JOINTS and len(got[0].trajectory.points) == 10
        assert wait_until(lambda: any(s.state == PolicyStatus.STATE_RUNNING for s in status.messages), 30), (
            robot.output()
        )

        def travel():
            js = positions(list(states.messages), JointState)
            return float(np.abs(js[-1] - js[0]).max()) if len(js) > 1 else 0.0

        assert wait_until(lambda: travel() > 0.05, 60), f"the arm moved {travel():.3f} rad"
        # the serve node commands nothing: the robot-side node is the one command source
        pubs = ros_node.get_publishers_info_by_topic("/joint_commands")
        assert [p.node_name for p in pubs] == ["robot"]
    assert len(cmds.messages) > 10
    # the injected 60 ms round trip: an observation 30 ms old when taken, the chunk sent 30 ms after inference
    assert ages and min(ages) >= 60e6, [a / 1e6 for a in ages]


def test_injected_total_loss_cuts_the_serve_side_off(ros_node):
    """link_loss_percent 100: the serve node drops every observation message, so it never infers (its status
    says it has no data while the arm publishes its joints) and no chunk leaves it."""
    remote = MessageCollector(ros_node, ActionChunk, "policy/remote_chunk")
    status = MessageCollector(ros_node, PolicyStatus, "policy/status", qos=STATUS_QOS)
    states = MessageCollector(ros_node, JointState, "joint_states")
    serve = policy_params(inference="serve", control_priority=0, link_loss_percent=100.0)
    with EmulatedRobot(), RosProcess("lerobot_policy_node", "policy", parameters=serve) as node:
        assert wait_until(lambda: has_status(status, "no data for joints"), 60), node.output()
        assert states.wait(30, timeout=10)
        assert wait_until(lambda: sum("no data for joints" in s.message for s in status.messages) >= 3, 10)
    assert not remote.messages
