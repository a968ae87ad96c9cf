"""The `ros_node` fixture keeps spinning while the test closes its collectors."""

import random
import threading
import time

import pytest


def _churn(ros_node, make, close, count: int = 300) -> int:
    """Make and close `count` entities a moment apart, from this thread, while a 500 Hz timer keeps
    the node's executor building wait sets. Returns how many were closed while it still spun."""
    spinners = [t for t in threading.enumerate() if t.name.endswith("(spin)")]
    assert len(spinners) == 1, [t.name for t in threading.enumerate()]
    rng = random.Random(0)
    closes = 0
    while closes < count and spinners[0].is_alive():
        entity = make()
        time.sleep(rng.random() * 0.002)
        close(entity)
        closes += 1
    assert spinners[0].is_alive(), f"the ros_node fixture's spin thread died after {closes} closes"
    return closes


@pytest.mark.ros
def test_collectors_closed_while_the_node_spins_do_not_kill_its_executor(ros_node):
    """A subscription with rclpy's default QoS event handlers, destroyed from the test's thread while
    the executor builds a wait set, raises InvalidHandle out of ``executor.spin()`` (ros2/rclpy#1284).
    Here that killed the fixture's spin thread within 10-100 closes. `MessageCollector` (and so
    `wait_for_messages`) must survive 300, and a collector made afterwards must still receive."""
    from std_msgs.msg import Int32

    from lerobot_core.ros.testing import MessageCollector

    pub = ros_node.create_publisher(Int32, "/harness_churn", 10)
    timer = ros_node.create_timer(0.002, lambda: pub.publish(Int32(data=1)))
    try:
        _churn(ros_node, lambda: MessageCollector(ros_node, Int32, "/harness_churn"), MessageCollector.close)
        with MessageCollector(ros_node, Int32, "/harness_churn") as after:
            after.wait(5, timeout=10)
    finally:
        timer.cancel()


@pytest.mark.ros
def test_a_collector_subscribes_without_event_handlers(ros_node):
    from std_msgs.msg import Int32

    from lerobot_core.ros.testing import MessageCollector

    default = ros_node.create_subscription(Int32, "/harness_plain", lambda m: None, 10)
    assert default.event_handlers  # rclpy's default, which the executor race needs
    with MessageCollector(ros_node, Int32, "/harness_plain") as collector:
        assert not collector.sub.event_handlers
