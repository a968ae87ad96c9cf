"""Message -> values, one table entry per message type (duck-typed: rclpy and rosbags messages alike).

``EXTRACTORS[msgtype](contract, topic, msg)`` gives what a topic feeds the aligner: a float64
array for joint vectors, the message itself for images (decoded lazily, only for the ticks that
use it), the text for a task. A type the contract file may name but no table lists is unsupported.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from lerobot_core.image_conversion import (
    AUTO_DEPTH_ENCODINGS,
    DEPTH_ENCODINGS,
    RGB_ENCODINGS,
    compressed_format_kind,
    compressed_msg_to_rgb,
    image_msg_to_depth,
    image_msg_to_rgb,
)
from lerobot_core.joint_map import index_plan

from .schema import (
    COMPRESSED_IMAGE,
    CONTROL_FIELDS,
    CONTROL_STATUS,
    FLOAT64_MULTI_ARRAY,
    IMAGE,
    JOINT_STATE,
    JOINT_TRAJECTORY,
    POSE_STAMPED,
    STRING,
    ImageSource,
    VectorSource,
    normalize_msgtype,
)

Layout = list[tuple[str, str]]  # the (field, joint) pairs a topic feeds, in order


def msgtype_of(msg) -> str:
    """The ROS type name of a rosbags message (``__msgtype__``) or an rclpy message (its module)."""
    name = getattr(msg, "__msgtype__", None)
    if name:
        return normalize_msgtype(name)
    module = type(msg).__module__.split(".")  # e.g. sensor_msgs.msg._joint_state
    if len(module) >= 2 and module[1] == "msg":
        return f"{module[0]}/msg/{type(msg).__name__}"
    raise ValueError(f"cannot tell the ROS message type of a {type(msg).__name__}")


def has_type(msg) -> bool:
    try:
        msgtype_of(msg)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------------- joint vectors
def _joint_state_arrays(topic: str, msg) -> tuple[tuple, dict[str, Any]]:
    return tuple(msg.name), {"position": msg.position, "velocity": msg.velocity, "effort": msg.effort}


def _trajectory_arrays(topic: str, msg) -> tuple[tuple, dict[str, Any]]:
    if not len(msg.points):
        raise ValueError(f"topic {topic}: JointTrajectory without points")
    point = msg.points[0]
    return tuple(msg.joint_names), {
        "position": point.positions,
        "velocity": point.velocities,
        "effort": point.effort,
    }


# type -> (the field holding the joint names, (topic, msg) -> (names, arrays by field))
NAMED_JOINT_ARRAYS: dict[str, tuple[str, Callable]] = {
    JOINT_STATE: ("name", _joint_state_arrays),
    JOINT_TRAJECTORY: ("joint_names", _trajectory_arrays),
}


def message_joint_names(src: VectorSource, msg) -> list[str] | None:
    """The joint names a message carries (None for a type without names, or an empty list)."""
    entry = NAMED_JOINT_ARRAYS.get(src.msgtype)
    if entry is None:
        return None
    return [str(n) for n in getattr(msg, entry[0])] or None


def _multi_array_values(topic: str, msg, layout: Layout) -> np.ndarray:
    data = np.asarray(msg.data, dtype=np.float64)
    joints = list(dict.fromkeys(j for _, j in layout))
    if len(data) != len(joints):
        raise ValueError(
            f"topic {topic}: Float64MultiArray has {len(data)} values, the contract names {len(joints)}"
        )
    pos = {j: i for i, j in enumerate(joints)}
    return data[[pos[j] for _, j in layout]]


# (joint names, layout) -> [(field, indices into the message's array, positions in the output, values
# the message must have)]
_PLANS: dict[tuple, list[tuple[str, np.ndarray, np.ndarray, int]]] = {}


def _plan(topic: str, names: tuple, layout: Layout) -> list[tuple[str, np.ndarray, np.ndarray, int]]:
    joints = tuple(dict.fromkeys(j for _, j in layout))
    if names:  # by name (lerobot_core.joint_map: the one names -> vector mapping)
        index = dict(
            zip(joints, index_plan(names, joints).require(f"topic {topic}").src.tolist(), strict=True)
        )
    else:  # a message without names: positional, when the sizes agree (checked per message)
        index = {j: i for i, j in enumerate(joints)}
    by_field: dict[str, tuple[list[int], list[int]]] = {}
    for k, (fld, joint) in enumerate(layout):
        src, dst = by_field.setdefault(fld, ([], []))
        src.append(index[joint])
        dst.append(k)
    if not names:  # positional: exactly one value per joint
        return [(fld, np.array(src), np.array(dst), len(index)) for fld, (src, dst) in by_field.items()]
    return [(fld, np.array(src), np.array(dst), max(src) + 1) for fld, (src, dst) in by_field.items()]


def _named_values(arrays_of: Callable, topic: str, msg, layout: Layout) -> np.ndarray:
    names, arrays = arrays_of(topic, msg)
    key = (names, tuple(layout))
    plan = _PLANS.get(key)
    if plan is None:
        plan = _plan(topic, names, layout)
        if len(_PLANS) > 256:
            _PLANS.clear()
        _PLANS[key] = plan
    out = np.empty(len(layout), dtype=np.float64)
    for fld, src, dst, need in plan:
        arr = np.asarray(arrays[fld], dtype=np.float64)
        if not names:
            if len(arr) != need:
                raise ValueError(
                    f"topic {topic}: message has no joint names and {len(arr)} {fld} values for {need} joints"
                )
        elif len(arr) < need:
            raise ValueError(
                f"topic {topic}: the message has {len(arr)} {fld} values for {len(names)} joints "
                f"(is {fld} published at all?)"
            )
        out[dst] = arr[src]
    return out


def _pose_values(topic: str, msg, layout: Layout) -> np.ndarray:
    p, o = msg.pose.position, msg.pose.orientation
    comps = {"x": p.x, "y": p.y, "z": p.z, "qw": o.w, "qx": o.x, "qy": o.y, "qz": o.z}
    return np.array([comps[c] for _, c in layout], dtype=np.float64)


# type -> (topic, msg, layout) -> float64 values of the layout
VECTOR_VALUES: dict[str, Callable[[str, Any, Layout], np.ndarray]] = {
    FLOAT64_MULTI_ARRAY: _multi_array_values,
    POSE_STAMPED: _pose_values,
    **{t: partial(_named_values, arrays_of) for t, (_, arrays_of) in NAMED_JOINT_ARRAYS.items()},
}


def vector_values(topic: str, mtype: str, msg, layout: Layout) -> np.ndarray:
    """The float64 values of ``layout`` [(field, joint), ...] from one message."""
    values_of = VECTOR_VALUES.get(mtype)
    if values_of is None:
        raise ValueError(f"topic {topic}: unsupported message type {mtype} for a joint feature")
    return values_of(topic, msg, layout)


# ---------------------------------------------------------------------- images
def _check_raw_header(src: ImageSource, msg) -> None:
    enc = str(msg.encoding)
    if src.encoding is not None and enc != src.encoding:
        raise ValueError(
            f"topic {src.topic}: encoding {enc!r} does not match the contract's {src.encoding!r}"
        )
    if src.depth:
        if enc not in DEPTH_ENCODINGS:
            raise ValueError(
                f"topic {src.topic}: encoding {enc!r} cannot be recorded as depth "
                f"(supported depth encodings: {', '.join(DEPTH_ENCODINGS)})"
            )
    elif enc not in RGB_ENCODINGS:
        if enc in DEPTH_ENCODINGS and src.depth is False:
            raise ValueError(
                f"topic {src.topic}: encoding {enc!r} is a depth encoding but the camera is recorded as "
                "RGB; set 'depth: true' for it (or leave 'depth' out to decide from the first image)"
            )
        if src.depth is False:
            raise ValueError(
                f"topic {src.topic}: encoding {enc!r} cannot be recorded as RGB (supported: {', '.join(RGB_ENCODINGS)})"
            )
        if enc not in AUTO_DEPTH_ENCODINGS:
            hint = (
                "; set 'depth: true' to record it as depth in millimetres" if enc in DEPTH_ENCODINGS else ""
            )
            raise ValueError(
                f"topic {src.topic}: encoding {enc!r} cannot be recorded (supported: RGB "
                f"{', '.join(RGB_ENCODINGS)}; depth {', '.join(DEPTH_ENCODINGS)}){hint}"
            )


def _check_compressed_header(src: ImageSource, msg) -> None:
    kind = compressed_format_kind(msg.format)
    if src.encoding is not None and kind != compressed_format_kind(src.encoding):
        raise ValueError(
            f"topic {src.topic}: format {msg.format!r} does not match the contract's {src.encoding!r}"
        )


# type -> (header check, decoder to HxWx3 uint8)
IMAGE_READERS: dict[str, tuple[Callable[[ImageSource, Any], None], Callable[[Any], np.ndarray]]] = {
    IMAGE: (_check_raw_header, image_msg_to_rgb),
    COMPRESSED_IMAGE: (_check_compressed_header, compressed_msg_to_rgb),
}


def check_image_header(src: ImageSource, msg) -> None:
    IMAGE_READERS[src.msgtype][0](src, msg)


def decode_image(src: ImageSource, msg) -> np.ndarray:
    """HxWx3 uint8 RGB, or for a depth camera HxW depth in its unit (uint16 mm, float32 m)."""
    check, decode = IMAGE_READERS[src.msgtype]
    check(src, msg)
    if src.depth is None and str(getattr(msg, "encoding", "")) in AUTO_DEPTH_ENCODINGS:
        decode = image_msg_to_depth  # an unresolved camera (resolve() decides from this image)
    elif src.depth:
        decode = image_msg_to_depth
    try:
        return decode(msg)
    except ValueError as exc:
        raise ValueError(f"topic {src.topic}: {exc}") from None


# ---------------------------------------------------------------------- the extraction table
def _extract_vector(contract, topic: str, mtype: str, msg) -> np.ndarray:
    return vector_values(topic, mtype, msg, contract._layout(topic))


def _extract_image(contract, topic: str, mtype: str, msg):
    check_image_header(next(s for s in contract.images.values() if s.topic == topic), msg)
    return msg


def _extract_text(contract, topic: str, mtype: str, msg) -> str:
    return str(msg.data)


def _extract_control(contract, topic: str, mtype: str, msg) -> dict:
    return {name: getattr(msg, name) for name in CONTROL_FIELDS}


# type -> (contract, topic, type, msg) -> the value an aligner stream stores
EXTRACTORS: dict[str, Callable[[Any, str, str, Any], Any]] = {
    **dict.fromkeys(VECTOR_VALUES, _extract_vector),
    **dict.fromkeys(IMAGE_READERS, _extract_image),
    STRING: _extract_text,
    CONTROL_STATUS: _extract_control,
}
