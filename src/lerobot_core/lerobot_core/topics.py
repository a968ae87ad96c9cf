"""Topic names the stack's nodes agree on (ROS-free). Names are relative: a namespace prefixes them."""

from __future__ import annotations

JOINT_STATES = "joint_states"
JOINT_COMMANDS = "joint_commands"
IMAGE_FEATURE_PREFIX = "observation.images."


def camera_topic(camera: str) -> str:
    """``front`` -> ``cameras/front/image_raw`` (sensor_msgs/Image)."""
    return f"cameras/{camera}/image_raw"


def camera_info_topic(camera: str) -> str:
    return f"cameras/{camera}/camera_info"


def compressed_camera_topic(camera: str) -> str:
    """The image_transport name of the jpeg stream beside :func:`camera_topic`."""
    return camera_topic(camera) + "/compressed"


def camera_name(image_key: str) -> str:
    """``observation.images.front`` -> ``front``: the LeRobot camera key is the topic's camera name."""
    if image_key.startswith(IMAGE_FEATURE_PREFIX):
        return image_key[len(IMAGE_FEATURE_PREFIX) :]
    return image_key.rsplit(".", 1)[-1]


def image_feature(camera: str) -> str:
    """``front`` -> ``observation.images.front``."""
    return IMAGE_FEATURE_PREFIX + camera
