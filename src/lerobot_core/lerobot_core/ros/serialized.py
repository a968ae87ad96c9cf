"""Messages a ``raw=True`` subscription delivers, decoded where they are used (recorder, policy node)."""

from __future__ import annotations

from rclpy.serialization import deserialize_message

from lerobot_core import cdr
from lerobot_core.contract.schema import IMAGE_TYPES


def decode_message(data: bytes, msgtype: str, cls):
    """A serialized message (what a ``raw=True`` subscription delivers) -> a message to read from.

    An image decodes through rosbags into read-only views of ``data``: ``bytes`` never change, so
    ``image_msg_to_array`` shares them and the pixels reach their consumer (the recorder's encoder,
    the policy's conversion to float) without a copy. The one copy they have had is rclpy's, from the
    serialized message it takes into (freed after the take) into ``data``. rclpy's
    ``deserialize_message`` would copy them twice more (into a C message, then into an
    ``array.array``) and the conversion once again (an ``array.array`` can be written to, so it is not
    shared). Other types go through rclpy (``cls``, its message class).
    """
    if msgtype in IMAGE_TYPES:
        return cdr.deserialize(data, msgtype)
    return deserialize_message(data, cls)
