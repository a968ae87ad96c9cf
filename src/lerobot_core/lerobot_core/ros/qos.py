"""The stack's QoS profiles, named for what they carry (every node picks one of these on purpose)."""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

# subscribers of images and other sensor streams: best effort, keep last 5 (a late frame is worth less
# than the next one)
SENSOR = qos_profile_sensor_data
# publishers of images: reliable depth 2 matches best-effort and reliable subscribers alike and never
# queues stale frames
IMAGES = QoSProfile(depth=2, reliability=ReliabilityPolicy.RELIABLE)
# joint states, commands, diagnostics: reliable, a shallow queue absorbs bursts without growing stale
RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
# streams a recorder takes in (joint states, commands): reliable, a deeper queue absorbs a busy moment
# of the writer without a lost sample
RECORDED = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
# only the newest message counts (a command, a leader arm's state)
LATEST = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
# state a late joiner must still get (robot description, node status, metadata): transient local depth 1
LATCHED = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
# a status whose every transition counts (arbiter/status): reaches live subscribers, transient local
# so a late joiner gets the newest
STATUS = QoSProfile(
    depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
# subscribers of joint states that only need the newest pose: best effort, so any publisher matches
JOINTS_IN = QoSProfile(depth=10, reliability=ReliabilityPolicy.BEST_EFFORT)
# /tf: reliable, volatile, a deep queue as tf2's broadcasters use (bursts of transforms per tick)
TF = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)


def subscription_without_events(node, msg_type, topic: str, callback, qos, **kwargs):
    """A subscription that may be destroyed from another thread than the one spinning `node`: the
    test's thread, or a worker of a MultiThreadedExecutor (a lifecycle cleanup, a re-configure).

    rclpy gives every subscription and publisher QoS event handlers (incompatible QoS, incompatible
    type), which the executor adds to its wait set. Destroyed while the spinning thread builds a wait
    set, such a handler raises InvalidHandle out of ``executor.spin()`` (ros2/rclpy#1284, #1206), and
    the process's executor dies. Here a 3-thread executor whose worker re-made three subscriptions
    every 3 ms died within 20-40 rounds; without the handlers it ran 5,000. The executor then only
    meets the subscription itself, whose destruction it handles. The cost: this side logs no QoS
    mismatch; the publisher's side still does. (Publishers have the same handlers, but 5,000 made
    and destroyed under a 500 Hz timer never killed the executor here; why was not found.)
    """
    from rclpy.event_handler import SubscriptionEventCallbacks

    return node.create_subscription(
        msg_type,
        topic,
        callback,
        qos,
        event_callbacks=SubscriptionEventCallbacks(use_default_callbacks=False),
        **kwargs,
    )


__all__ = [
    "IMAGES",
    "JOINTS_IN",
    "LATCHED",
    "LATEST",
    "RECORDED",
    "RELIABLE",
    "SENSOR",
    "STATUS",
    "TF",
    "subscription_without_events",
]
