"""`subscription_without_events`: subscriptions that a worker of a multi-threaded executor destroys
(the policy node's lifecycle cleanup and re-configure) or that another thread destroys while the
executor spins (the recorder's safe state) do not kill the executor (ros2/rclpy#1284)."""

import threading
import time

import pytest

pytestmark = pytest.mark.ros

rclpy = pytest.importorskip("rclpy")


def churn_in_a_worker(make_subscription, churns: int, timeout_s: float = 60.0) -> tuple[int, list]:
    """A 3-thread executor spins a node that publishes every 2 ms; a timer in its own callback group
    (so it runs in a worker while the spin thread builds wait sets) destroys three subscriptions and
    makes three new ones every 3 ms, `churns` times. Returns the rounds done and what escaped from
    `executor.spin()` (nothing, if the executor survived)."""
    from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
    from rclpy.executors import MultiThreadedExecutor
    from std_msgs.msg import String

    context = rclpy.Context()
    context.init()
    node = rclpy.create_node("churn", context=context)
    pub = node.create_publisher(String, "churn", 10)
    node.create_timer(0.002, lambda: pub.publish(String(data="x")))
    subs = [make_subscription(node, String, "churn") for _ in range(3)]
    done = [0]

    def churn():
        for s in subs:
            node.destroy_subscription(s)
        subs[:] = [make_subscription(node, String, "churn") for _ in range(3)]
        done[0] += 1

    node.create_timer(0.003, churn, callback_group=MutuallyExclusiveCallbackGroup())
    executor = MultiThreadedExecutor(num_threads=3, context=context)
    executor.add_node(node)
    escaped: list = []

    def spin():
        try:
            executor.spin()
        except Exception as exc:  # what ends a node's process
            escaped.append(exc)

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    deadline = time.monotonic() + timeout_s
    while spinner.is_alive() and done[0] < churns and time.monotonic() < deadline:
        time.sleep(0.05)
    executor.shutdown(timeout_sec=2.0)
    spinner.join(5.0)
    node.destroy_node()
    context.try_shutdown()
    return done[0], escaped


def test_a_worker_destroys_subscriptions_without_event_handlers_while_the_executor_spins():
    from lerobot_core.ros.qos import subscription_without_events

    done, escaped = churn_in_a_worker(
        lambda node, t, topic: subscription_without_events(node, t, topic, lambda m: None, 10), 1000
    )
    assert escaped == [] and done >= 1000, (done, escaped)


def test_the_race_is_real_with_rclpys_default_event_handlers():
    """Why the helper exists: the same churn with rclpy's default subscriptions kills the executor
    (here within 20-40 rounds). If this fails, rclpy has fixed its race and the helper can go."""
    from rclpy.exceptions import InvalidHandle

    done, escaped = churn_in_a_worker(
        lambda node, t, topic: node.create_subscription(t, topic, lambda m: None, 10), 3000
    )
    assert escaped and isinstance(escaped[0], InvalidHandle), (done, escaped)
