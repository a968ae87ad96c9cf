"""Serialized (CDR) ROS 2 messages decoded with rosbags, no rclpy needed (bags; raw subscriptions:
:func:`lerobot_core.ros.serialized.decode_message`).

The typestore is ROS 2 Kilted's (the same definitions and CDR as Jazzy for every type the stack uses).
"""

from __future__ import annotations

from functools import cache


@cache
def typestore():
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_KILTED)


def deserialize(raw: bytes | memoryview, msgtype: str):
    # through a memoryview: rosbags slices off the CDR header, which on bytes copies the whole
    # payload (a VGA frame per image message); the arrays it returns are read-only views either way
    return typestore().deserialize_cdr(memoryview(raw), msgtype)
