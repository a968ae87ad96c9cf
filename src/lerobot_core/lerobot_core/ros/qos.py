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
# only the newest message counts (a command, a leader arm's state)
LATEST = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
# state a late joiner must still get (robot description, node status, metadata): transient local depth 1
LATCHED = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)

__all__ = ["IMAGES", "LATCHED", "LATEST", "RELIABLE", "SENSOR"]
