"""Lockstep with required consumers: the sim steps past a tick only when every consumer acknowledged it
on sim/tick_ack, and stops itself, naming the consumer, when one leaves the graph."""

import time

import pytest
import rclpy
from sensor_msgs.msg import JointState
from std_msgs.msg import Header

from lerobot_core.ros.testing import MessageCollector, RosProcess, wait_until
from lerobot_msgs.msg import EpisodeInfo
from lerobot_sim.bridge_base import QOS_COMMAND, TICK_ACK_TOPIC
from lerobot_sim.so101_model import JOINT_NAMES

pytestmark = pytest.mark.ros
NS = "/consumers_test"


def test_sim_waits_for_every_acknowledgement_and_stops_when_a_consumer_dies(ros_node):
    info = MessageCollector(ros_node, EpisodeInfo, f"{NS}/sim/episode_info")
    js = MessageCollector(ros_node, JointState, f"{NS}/joint_states")
    # the consumer: a node of its own, so the sim can see it leave the graph
    consumer = rclpy.create_node("ack_tester", namespace=NS, context=ros_node.context)
    ack = consumer.create_publisher(Header, f"{NS}/{TICK_ACK_TOPIC}", QOS_COMMAND)
    cmd = ros_node.create_publisher(JointState, f"{NS}/joint_commands", QOS_COMMAND)
    params = {
        "mode": "lockstep",
        "cameras": [""],
        "seed": 0,
        "autostart": True,
        "required_consumers": ["ack_tester"],
    }
    with RosProcess("lerobot_sim", "sim", namespace=NS, parameters=params) as sim:
        assert wait_until(lambda: js.messages, 60), sim.output()[-3000:]
        assert wait_until(lambda: cmd.get_subscription_count() > 0 and ack.get_subscription_count() > 0, 30)
        first = js.messages[-1]
        command = JointState(name=list(JOINT_NAMES), position=list(first.position))
        command.header.stamp = first.header.stamp
        cmd.publish(command)
        time.sleep(1.5)  # no acknowledgement yet: the sim holds the tick
        assert not any(m.step >= 1 for m in info.messages), "stepped without the consumer's ack"
        ack.publish(Header(stamp=first.header.stamp, frame_id="ack_tester"))
        assert wait_until(lambda: any(m.step == 1 for m in info.messages), 20), sim.output()[-3000:]
        # the consumer dies (leaves the graph): the sim stops with a message naming it
        consumer.destroy_node()
        assert wait_until(lambda: sim.returncode is not None, 30), sim.output()[-3000:]
        assert sim.returncode != 0
        assert "required consumer 'ack_tester' left the ROS graph" in sim.output()
