"""rosbags helpers shared by bag import, bag export and their tests (ROS-free: pure rosbags).

The typestore is lerobot_core.cdr's (ROS 2 Kilted's).
"""

from __future__ import annotations

import numpy as np

from lerobot_core import cdr
from lerobot_core.cdr import typestore
from lerobot_core.image_conversion import encode_compressed, fill_image_msg
from lerobot_core.time import ns_to_stamp

from .bag_read import decode_joint_state


def _t(name: str):
    return typestore().types[name]


def header(stamp_ns: int, frame_id: str = ""):
    stamp = ns_to_stamp(stamp_ns, _t("builtin_interfaces/msg/Time"))
    return _t("std_msgs/msg/Header")(stamp=stamp, frame_id=frame_id)


def joint_state(stamp_ns: int, names, position=(), velocity=(), effort=()):
    return _t("sensor_msgs/msg/JointState")(
        header=header(stamp_ns),
        name=list(names),
        position=np.asarray(position, dtype=np.float64),
        velocity=np.asarray(velocity, dtype=np.float64),
        effort=np.asarray(effort, dtype=np.float64),
    )


def image(stamp_ns: int, array: np.ndarray, encoding: str = "rgb8", frame_id: str = ""):
    msg = _t("sensor_msgs/msg/Image")(
        header=header(stamp_ns, frame_id),
        height=0,
        width=0,
        encoding="",
        is_bigendian=0,
        step=0,
        data=np.zeros(0, np.uint8),
    )
    return fill_image_msg(msg, array, encoding)


def compressed_image(stamp_ns: int, rgb: np.ndarray, fmt: str = "jpeg", quality: int = 90):
    format_str, data = encode_compressed(rgb, fmt, quality)
    return _t("sensor_msgs/msg/CompressedImage")(
        header=header(stamp_ns), format=format_str, data=np.frombuffer(data, np.uint8).copy()
    )


def float64_multi_array(values):
    layout = _t("std_msgs/msg/MultiArrayLayout")(dim=[], data_offset=0)
    return _t("std_msgs/msg/Float64MultiArray")(layout=layout, data=np.asarray(values, dtype=np.float64))


def joint_trajectory(stamp_ns: int, names, positions, velocities=()):
    duration = _t("builtin_interfaces/msg/Duration")(sec=0, nanosec=0)
    point = _t("trajectory_msgs/msg/JointTrajectoryPoint")(
        positions=np.asarray(positions, np.float64),
        velocities=np.asarray(velocities, np.float64),
        accelerations=np.zeros(0),
        effort=np.zeros(0),
        time_from_start=duration,
    )
    return _t("trajectory_msgs/msg/JointTrajectory")(
        header=header(stamp_ns), joint_names=list(names), points=[point]
    )


def string(text: str):
    return _t("std_msgs/msg/String")(data=text)


def serialize(msg) -> bytes:
    return typestore().serialize_cdr(msg, msg.__msgtype__)


def deserialize(raw: bytes | memoryview, msgtype: str):
    if msgtype == "sensor_msgs/msg/JointState":
        msg = decode_joint_state(raw, typestore().types)
        if msg is not None:
            return msg
    return cdr.deserialize(raw, msgtype)
