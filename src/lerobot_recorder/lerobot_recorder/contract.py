"""The mapping contract: which ROS topics become which LeRobot features, and how they are aligned.

A contract is a YAML file (reference and example: docs/recording.md, config/contracts/*.yaml)::

    fps: 30
    robot_type: so101_follower
    units: radians                      # radians (as published) | degrees | normalized
    task: Pick up the cube              # or {topic: /task, default: ...}
    calibration:                        # for units: normalized (LeRobot's -100..100 / 0..100)
      gripper: {range: [0.0, 1.7], mode: "0_100"}
    features:
      observation.state:                # one source, or a list of sources concatenated in order
        topic: /joint_states
        fields: [position]              # position -> <joint>.pos, velocity -> .vel, effort -> .effort
        joints: [shoulder_pan, shoulder_lift, elbow_flex, wrist_flex, wrist_roll, gripper]
        policy: interpolate             # stream keys: policy, tolerance, max_staleness, timeline,
        max_staleness: 0.1              #   qos, rate, required (see STREAM_KEYS)
      action: {topic: /leader/joint_states, joints: [...]}
      observation.images.front: {topic: /cameras/front/image_raw, policy: nearest, tolerance: 0.02}

Supported message types: sensor_msgs/msg/JointState, std_msgs/msg/Float64MultiArray and
trajectory_msgs/msg/JointTrajectory (first point) for vector features; sensor_msgs/msg/Image
(rgb8, bgr8, rgba8, bgra8, mono8) and sensor_msgs/msg/CompressedImage (jpeg, png) for
``observation.images.<name>``; std_msgs/msg/String for the task.

Each *topic* is one alignment stream (``lerobot_recorder.alignment.StreamSpec`` named by the
topic). Use:

    contract = Contract.load("so101.yaml")               # or Contract.from_flags(...)
    contract = contract.resolve({topic: (msgtype, first_msg)})   # fills joints / image sizes
    features = contract.features()                       # -> DatasetWriter.create(features=...)
    aligner = Aligner(contract.fps, contract.stream_specs())
    aligner.push(topic, *contract.extract(topic, msg, msgtype, receive_ns))   # value, stamp_ns, receive_ns
    frame, task = contract.make_frame(aligned.values)    # -> writer.add_frame(frame, task=task)

Errors in the file raise :class:`ContractError` naming the file and the key path; a message that
does not fit the contract raises ``ValueError`` naming the topic.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import yaml

from .alignment import HEADER, HOLD, POLICIES, RECEIVE, TIMELINES, StreamSpec, stamp_to_ns
from .image_conversion import RGB_ENCODINGS, compressed_format_kind, compressed_msg_to_rgb, image_msg_to_rgb

__all__ = [
    "ContractError",
    "Contract",
    "VectorSource",
    "ImageSource",
    "TopicStream",
    "JOINT_STATE",
    "FLOAT64_MULTI_ARRAY",
    "JOINT_TRAJECTORY",
    "IMAGE",
    "COMPRESSED_IMAGE",
    "STRING",
    "normalize_msgtype",
    "msgtype_of",
]

JOINT_STATE = "sensor_msgs/msg/JointState"
FLOAT64_MULTI_ARRAY = "std_msgs/msg/Float64MultiArray"
JOINT_TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
IMAGE = "sensor_msgs/msg/Image"
COMPRESSED_IMAGE = "sensor_msgs/msg/CompressedImage"
STRING = "std_msgs/msg/String"
CONTROL_STATUS = "lerobot_msgs/msg/ControlStatus"  # the control arbiter's mode (human-in-the-loop)
VECTOR_TYPES = (JOINT_STATE, FLOAT64_MULTI_ARRAY, JOINT_TRAJECTORY)
IMAGE_TYPES = (IMAGE, COMPRESSED_IMAGE)
HEADERLESS_TYPES = (FLOAT64_MULTI_ARRAY, STRING)
LATCHED_TYPES = (STRING, CONTROL_STATUS)  # published on change: the latest value stays valid
# per-frame extras, named as LeRobot names them (complementary_info.<name>), from the arbiter's status
EXTRA_PREFIX = "complementary_info."
CONTROL_FIELDS = {"is_intervention": "bool", "mode": "int64"}  # ControlStatus field -> dataset dtype
CONTROL_MODE_HOLD = 2  # ControlStatus.MODE_HOLD: paused, no frames

FIELDS = {"position": "pos", "velocity": "vel", "effort": "effort"}
UNITS = ("radians", "degrees", "normalized")
NORM_MODES = ("m100_100", "0_100")
QOS = ("sensor", "reliable")
IMAGE_PREFIX = "observation.images."
STREAM_KEYS = ("policy", "tolerance", "max_staleness", "timeline", "qos", "rate", "required")
_VECTOR_KEYS = {"topic", "type", "fields", "joints", "prefix", "units", *STREAM_KEYS}
_IMAGE_KEYS = {"topic", "type", "encoding", "height", "width", *STREAM_KEYS}
_TASK_KEYS = {"topic", "default", *STREAM_KEYS}
_EXTRA_KEYS = {"topic", "type", "field", *STREAM_KEYS}
_TOP_KEYS = {"fps", "robot_type", "units", "task", "calibration", "features", "defaults"}
DEFAULT_MAX_STALENESS = 0.5  # s: a stream silent this long drops ticks instead of freezing silently


class ContractError(ValueError):
    """A contract file (or dict) that cannot be used; the message names the file and key path."""


def normalize_msgtype(name: str) -> str:
    """'sensor_msgs/JointState' or 'sensor_msgs/msg/JointState' -> 'sensor_msgs/msg/JointState'."""
    parts = str(name).strip().split("/")
    if len(parts) == 2:
        return f"{parts[0]}/msg/{parts[1]}"
    return "/".join(parts)


def msgtype_of(msg) -> str:
    """The ROS type name of a rosbags message (``__msgtype__``) or an rclpy message (its module)."""
    name = getattr(msg, "__msgtype__", None)
    if name:
        return normalize_msgtype(name)
    module = type(msg).__module__.split(".")  # e.g. sensor_msgs.msg._joint_state
    if len(module) >= 2 and module[1] == "msg":
        return f"{module[0]}/msg/{type(msg).__name__}"
    raise ValueError(f"cannot tell the ROS message type of a {type(msg).__name__}")


@dataclass(frozen=True)
class TopicStream:
    """Alignment and subscription settings of one topic (shared by every source reading it)."""

    topic: str
    msgtype: str
    policy: str = HOLD
    tolerance: float | None = None
    max_staleness: float | None = DEFAULT_MAX_STALENESS
    timeline: str = HEADER
    qos: str = "reliable"
    rate: float | None = None  # expected Hz (rate audit); None: not checked
    required: bool = True

    def spec(self) -> StreamSpec:
        return StreamSpec(
            name=self.topic,
            policy=self.policy,
            tolerance_s=self.tolerance,
            max_staleness_s=self.max_staleness,
            timeline=self.timeline,
            required=self.required,
            latched=self.msgtype
            in LATCHED_TYPES,  # task text, mode: published on change, valid until replaced
        )


@dataclass(frozen=True)
class VectorSource:
    topic: str
    msgtype: str
    fields: tuple[str, ...] = ("position",)
    joints: tuple[str, ...] | None = None  # None: every joint of the first message, in its order
    prefix: str = ""
    units: str = "radians"

    def names(self) -> list[str]:
        return [f"{self.prefix}{j}.{FIELDS[f]}" for f in self.fields for j in self.joints or ()]


@dataclass(frozen=True)
class ImageSource:
    topic: str
    msgtype: str
    encoding: str | None = None  # when set, every message must have it
    height: int | None = None
    width: int | None = None


@dataclass(frozen=True)
class ExtraSource:
    """A per-frame scalar (``complementary_info.<name>``) read from one field of a status message."""

    topic: str
    msgtype: str
    field: str
    dtype: str


@dataclass(frozen=True)
class _Plan:
    """How one vector feature is assembled from its topics' arrays (precomputed)."""

    parts: tuple[tuple[str, np.ndarray, np.ndarray, np.ndarray], ...]  # (topic, index, scale, offset)


@dataclass(frozen=True)
class Contract:
    fps: int
    robot_type: str | None
    vectors: dict[str, tuple[VectorSource, ...]]
    images: dict[str, ImageSource]
    streams: dict[str, TopicStream]
    task_text: str | None = None
    task_topic: str | None = None
    calibration: dict[str, tuple[float, float, str]] = field(default_factory=dict)
    source: str = "<contract>"
    extras: dict[str, ExtraSource] = field(default_factory=dict)

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, path: str | os.PathLike) -> Contract:
        where = os.fspath(path)
        try:
            with open(where, encoding="utf-8") as fh:
                data = yaml.safe_load(fh)
        except OSError as exc:
            raise ContractError(f"{where}: cannot read the contract: {exc.strerror or exc}") from None
        except yaml.YAMLError as exc:
            raise ContractError(f"{where}: not valid YAML: {exc}") from None
        return cls.from_dict(data, source=where)

    @classmethod
    def from_dict(cls, data: Any, source: str = "<contract>") -> Contract:
        return _Parser(source).contract(data)

    @classmethod
    def from_flags(
        cls,
        fps: int,
        state: str | None = None,
        action: str | None = None,
        images: Mapping[str, str] | None = None,
        task: str | None = None,
        task_topic: str | None = None,
        robot_type: str | None = None,
        joints: list[str] | None = None,
        types: Mapping[str, str] | None = None,
    ) -> Contract:
        """The contract of the quick flags: state/action (JointState unless ``types`` maps the topic
        to another type, e.g. as found in a bag), images by name, fixed task or task topic."""
        types = {k: normalize_msgtype(v) for k, v in (types or {}).items()}

        def typed(entry: dict) -> dict:
            if entry["topic"] in types:
                entry["type"] = types[entry["topic"]]
            return entry

        features: dict[str, Any] = {}
        if state:
            policy = "interpolate" if types.get(state, JOINT_STATE) in VECTOR_TYPES else HOLD
            features["observation.state"] = typed({"topic": state, "policy": policy, "joints": joints})
        if action:
            features["action"] = typed({"topic": action, "joints": joints})
        for name, topic in (images or {}).items():
            features[IMAGE_PREFIX + name] = typed({"topic": topic})
        data: dict[str, Any] = {"fps": fps, "robot_type": robot_type, "features": features}
        if task_topic:
            data["task"] = {"topic": task_topic, **({"default": task} if task else {})}
        else:
            data["task"] = task or "default task"
        return cls.from_dict(data, source="command-line flags")

    # ------------------------------------------------------------------ queries
    @property
    def topics(self) -> list[str]:
        return list(self.streams)

    def stream_specs(self) -> list[StreamSpec]:
        return [s.spec() for s in self.streams.values()]

    @property
    def resolved(self) -> bool:
        return all(s.joints is not None for srcs in self.vectors.values() for s in srcs) and all(
            s.height is not None and s.width is not None for s in self.images.values()
        )

    def _err(self, key: str, message: str) -> ContractError:
        return ContractError(f"{self.source}: {key}: {message}")

    def check_msgtype(self, topic: str, msgtype: str) -> None:
        """ValueError when ``msgtype`` (e.g. from a bag) cannot feed ``topic``'s role."""
        stream = self.streams.get(topic)
        if stream is None:
            raise ValueError(f"topic {topic} is not in the contract ({self.source})")
        actual = normalize_msgtype(msgtype)
        if actual != stream.msgtype:
            raise ValueError(
                f"topic {topic} has message type {actual}, but the contract ({self.source}) expects {stream.msgtype}"
            )

    # ------------------------------------------------------------------ resolution
    def resolve(self, first_messages: Mapping[str, Any]) -> Contract:
        """Fill what the contract left to the data: joint lists and image sizes.

        ``first_messages`` maps topic -> a message of that topic (rosbags or rclpy). Also checks
        that each message fits its role (types, joint names, encodings); ValueError names the topic.
        """
        vectors: dict[str, tuple[VectorSource, ...]] = {}
        for feature, sources in self.vectors.items():
            out = []
            for src in sources:
                msg = first_messages.get(src.topic)
                if msg is not None:
                    self.check_msgtype(src.topic, msgtype_of(msg) if _has_type(msg) else src.msgtype)
                    arr_names = _message_joint_names(src, msg)
                    if src.joints is None:
                        if arr_names is None:
                            arr_names = self._borrow_names(src, msg, out, vectors)
                        src = replace(src, joints=tuple(arr_names))
                    else:
                        _vector_values(
                            src.topic, src.msgtype, msg, [(f, j) for f in src.fields for j in src.joints]
                        )
                elif src.joints is None:
                    raise ValueError(
                        f"topic {src.topic}: no message to learn the joint names from; list 'joints' for "
                        f"{feature} in the contract"
                    )
                out.append(src)
            vectors[feature] = tuple(out)
        images: dict[str, ImageSource] = {}
        for feature, src in self.images.items():
            msg = first_messages.get(src.topic)
            if msg is not None:
                if _has_type(msg):
                    self.check_msgtype(src.topic, msgtype_of(msg))
                rgb = _decode_image(src, msg)
                h, w = int(rgb.shape[0]), int(rgb.shape[1])
                if (src.height, src.width) not in ((None, None), (h, w)):
                    raise ValueError(
                        f"topic {src.topic}: images are {w}x{h} but the contract says {src.width}x{src.height}"
                    )
                src = replace(src, height=h, width=w)
            elif src.height is None or src.width is None:
                raise ValueError(
                    f"topic {src.topic}: no image to learn the size from; give height and width for {feature}"
                )
            images[feature] = src
        resolved = replace(self, vectors=vectors, images=images)
        resolved._check_names()
        return resolved

    def _borrow_names(self, src: VectorSource, msg, done: list, vectors: Mapping) -> list[str]:
        """Float64MultiArray without joint names: reuse a resolved JointState source of equal size."""
        n = len(np.asarray(msg.data))
        for other in [*done, *(s for srcs in vectors.values() for s in srcs)]:
            if other.joints is not None and len(other.joints) == n:
                return list(other.joints)
        return [f"joint_{i}" for i in range(n)]

    def _check_names(self) -> None:
        for feature, sources in self.vectors.items():
            names = [n for s in sources for n in s.names()]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise self._err(
                    f"features.{feature}", f"duplicate names {dup} (use 'prefix' to tell arms apart)"
                )
            if not names:
                raise self._err(f"features.{feature}", "selects no values (empty joints or fields)")
            for src in sources:
                if src.units == "normalized":
                    for j in src.joints or ():
                        if j not in self.calibration:
                            raise self._err(
                                "calibration",
                                f"joint {j!r} of {feature} ({src.topic}) has units 'normalized' "
                                "but no calibration range",
                            )

    # ------------------------------------------------------------------ features
    def features(self) -> dict[str, dict]:
        """The LeRobot ``features`` dict (without the default columns) for DatasetWriter.create."""
        if not self.resolved:
            raise ValueError(
                f"{self.source}: call resolve() first: joint names or image sizes are not known yet"
            )
        out: dict[str, dict] = {}
        for feature, sources in self.vectors.items():
            names = [n for s in sources for n in s.names()]
            out[feature] = {"dtype": "float32", "shape": (len(names),), "names": names}
        for feature, src in self.images.items():
            out[feature] = {
                "dtype": "video",
                "shape": (src.height, src.width, 3),
                "names": ["height", "width", "channels"],
            }
        for feature, src in self.extras.items():
            out[feature] = {"dtype": src.dtype, "shape": (1,), "names": None}
        return out

    def paused(self, values: Mapping[str, Any]) -> bool:
        """True when a tick falls in a pause of the control arbiter (such ticks make no frame)."""
        return any(
            (v := values.get(src.topic)) is not None and v["mode"] == CONTROL_MODE_HOLD
            for src in self.extras.values()
        )

    # ------------------------------------------------------------------ per message
    def _layout(self, topic: str) -> list[tuple[str, str]]:
        cache = self.__dict__.setdefault("_layout_cache", {})
        if topic not in cache:
            pairs: list[tuple[str, str]] = []
            for sources in self.vectors.values():
                for src in sources:
                    if src.topic == topic:
                        for f in src.fields:
                            for j in src.joints or ():
                                if (f, j) not in pairs:
                                    pairs.append((f, j))
            cache[topic] = pairs
        return cache[topic]

    def extract(self, topic: str, msg, msgtype: str | None = None, receive_ns: int | None = None):
        """(value, stamp_ns, receive_ns) of one message, ready for ``Aligner.push``.

        Vector topics give a float64 array (every (field, joint) this topic feeds); image topics
        keep the message (decoded lazily in make_frame, only for the ticks that use it); the task
        topic gives its text. ``stamp_ns`` is the header stamp (None for header-less types).
        """
        stream = self.streams.get(topic)
        if stream is None:
            raise ValueError(f"topic {topic} is not in the contract ({self.source})")
        mtype = stream.msgtype if msgtype is None else normalize_msgtype(msgtype)
        header = getattr(msg, "header", None)
        stamp = stamp_to_ns(header.stamp) if header is not None else None
        if mtype in VECTOR_TYPES:
            value = _vector_values(topic, mtype, msg, self._layout(topic))
        elif mtype in IMAGE_TYPES:
            src = next(s for s in self.images.values() if s.topic == topic)
            _check_image_header(src, msg)
            value = msg
        elif mtype == STRING:
            value = str(msg.data)
        elif mtype == CONTROL_STATUS:
            value = {name: getattr(msg, name) for name in CONTROL_FIELDS}
        else:
            raise ValueError(f"topic {topic}: unsupported message type {mtype}")
        return value, stamp, receive_ns

    def _plans(self) -> dict[str, _Plan]:
        cache = self.__dict__.get("_plan_cache")
        if cache is None:
            cache = {}
            for feature, sources in self.vectors.items():
                parts = []
                for src in sources:
                    layout = {pair: i for i, pair in enumerate(self._layout(src.topic))}
                    idx, scale, offset = [], [], []
                    for f in src.fields:
                        for j in src.joints or ():
                            idx.append(layout[(f, j)])
                            s, o = self._unit_scale(src, f, j)
                            scale.append(s)
                            offset.append(o)
                    parts.append((src.topic, np.array(idx, int), np.array(scale), np.array(offset)))
                cache[feature] = _Plan(tuple(parts))
            self.__dict__["_plan_cache"] = cache
        return cache

    def _unit_scale(self, src: VectorSource, fld: str, joint: str) -> tuple[float, float]:
        """value_out = value_published * scale + offset."""
        if fld == "effort" or src.units == "radians":
            return 1.0, 0.0
        if src.units == "degrees":
            return 180.0 / math.pi, 0.0
        lo, hi, mode = self.calibration[joint]
        span = 200.0 if mode == "m100_100" else 100.0
        scale = span / (hi - lo)
        if fld == "velocity":
            return scale, 0.0
        return scale, -lo * scale - (100.0 if mode == "m100_100" else 0.0)

    def unit_conversion(self, feature: str) -> tuple[np.ndarray, np.ndarray]:
        """(scale, offset) per value of a vector feature: stored = published * scale + offset."""
        plan = self._plans()[feature]
        return np.concatenate([p[2] for p in plan.parts]), np.concatenate([p[3] for p in plan.parts])

    def make_frame(self, values: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], str]:
        """Turn an aligned tick's values (topic -> value) into (frame dict, task) for add_frame."""
        frame: dict[str, np.ndarray] = {}
        for feature, plan in self._plans().items():
            pieces = []
            for topic, idx, scale, offset in plan.parts:
                arr = values[topic]
                if arr is None:
                    raise ValueError(f"topic {topic}: no data for {feature} at this tick (optional stream)")
                pieces.append(np.asarray(arr, dtype=np.float64)[idx] * scale + offset)
            frame[feature] = np.concatenate(pieces).astype(np.float32)
        for feature, src in self.images.items():
            rgb = _decode_image(src, values[src.topic])
            if rgb.shape[0] != src.height or rgb.shape[1] != src.width:
                raise ValueError(
                    f"topic {src.topic}: image size changed to {rgb.shape[1]}x{rgb.shape[0]} "
                    f"(the dataset's {feature} is {src.width}x{src.height})"
                )
            frame[feature] = rgb
        for feature, src in self.extras.items():
            v = values.get(src.topic)
            if v is None:
                raise ValueError(f"topic {src.topic}: no data for {feature} at this tick")
            frame[feature] = np.array([v[src.field]], dtype=src.dtype)
        task = self.task_text
        if self.task_topic is not None and values.get(self.task_topic):
            task = values[self.task_topic]
        if not task:
            raise ValueError(
                f"no task text: topic {self.task_topic} has no message yet and there is no default"
            )
        return frame, task


# ---------------------------------------------------------------------- message helpers
def _has_type(msg) -> bool:
    try:
        msgtype_of(msg)
    except ValueError:
        return False
    return True


def _message_joint_names(src: VectorSource, msg) -> list[str] | None:
    if src.msgtype == JOINT_STATE:
        return [str(n) for n in msg.name] or None
    if src.msgtype == JOINT_TRAJECTORY:
        return [str(n) for n in msg.joint_names] or None
    return None


_NAME_CACHE: dict[tuple, dict[str, int]] = {}


def _vector_values(topic: str, mtype: str, msg, layout: list[tuple[str, str]]) -> np.ndarray:
    """The float64 values of ``layout`` [(field, joint), ...] from one message."""
    if mtype == FLOAT64_MULTI_ARRAY:
        data = np.asarray(msg.data, dtype=np.float64)
        joints = list(dict.fromkeys(j for _, j in layout))
        if len(data) != len(joints):
            raise ValueError(
                f"topic {topic}: Float64MultiArray has {len(data)} values, the contract names {len(joints)}"
            )
        pos = {j: i for i, j in enumerate(joints)}
        return data[[pos[j] for _, j in layout]]
    if mtype == JOINT_STATE:
        names = tuple(msg.name)
        arrays = {"position": msg.position, "velocity": msg.velocity, "effort": msg.effort}
    elif mtype == JOINT_TRAJECTORY:
        names = tuple(msg.joint_names)
        if not len(msg.points):
            raise ValueError(f"topic {topic}: JointTrajectory without points")
        point = msg.points[0]
        arrays = {"position": point.positions, "velocity": point.velocities, "effort": point.effort}
    else:
        raise ValueError(f"topic {topic}: unsupported message type {mtype} for a joint feature")
    index = _NAME_CACHE.get(names)
    if index is None:
        index = {n: i for i, n in enumerate(names)}
        if len(_NAME_CACHE) > 256:
            _NAME_CACHE.clear()
        _NAME_CACHE[names] = index
    positional = None
    if not names:  # a message without names: positional, when the sizes agree
        positional = {j: i for i, j in enumerate(dict.fromkeys(j for _, j in layout))}
    out = np.empty(len(layout), dtype=np.float64)
    converted: dict[str, np.ndarray] = {}
    for k, (fld, joint) in enumerate(layout):
        arr = converted.get(fld)
        if arr is None:
            arr = converted[fld] = np.asarray(arrays[fld], dtype=np.float64)
            if positional is not None and len(arr) != len(positional):
                raise ValueError(
                    f"topic {topic}: message has no joint names and {len(arr)} {fld} values for "
                    f"{len(positional)} joints"
                )
        if positional is not None:
            i = positional[joint]
        else:
            i = index.get(joint)
            if i is None:
                raise ValueError(
                    f"topic {topic}: joint {joint!r} is not in the message (it has {list(names)})"
                )
        if i >= len(arr):
            raise ValueError(
                f"topic {topic}: the message has {len(arr)} {fld} values for {len(names)} joints "
                f"(is {fld} published at all?)"
            )
        out[k] = arr[i]
    return out


def _check_image_header(src: ImageSource, msg) -> None:
    if src.msgtype == IMAGE:
        enc = str(msg.encoding)
        if src.encoding is not None and enc != src.encoding:
            raise ValueError(
                f"topic {src.topic}: encoding {enc!r} does not match the contract's {src.encoding!r}"
            )
        if enc not in RGB_ENCODINGS:
            raise ValueError(
                f"topic {src.topic}: encoding {enc!r} cannot be recorded as RGB (supported: {', '.join(RGB_ENCODINGS)})"
            )
    else:
        kind = compressed_format_kind(msg.format)
        if src.encoding is not None and kind != compressed_format_kind(src.encoding):
            raise ValueError(
                f"topic {src.topic}: format {msg.format!r} does not match the contract's {src.encoding!r}"
            )


def _decode_image(src: ImageSource, msg) -> np.ndarray:
    _check_image_header(src, msg)
    try:
        return image_msg_to_rgb(msg) if src.msgtype == IMAGE else compressed_msg_to_rgb(msg)
    except ValueError as exc:
        raise ValueError(f"topic {src.topic}: {exc}") from None


# ---------------------------------------------------------------------- YAML parsing
class _Parser:
    def __init__(self, source: str):
        self.source = source

    def err(self, key: str, message: str) -> ContractError:
        return ContractError(f"{self.source}: {key}: {message}")

    def mapping(self, value, key: str, allowed: set[str]) -> dict:
        if not isinstance(value, Mapping):
            raise self.err(key, f"expected a mapping, got {type(value).__name__}")
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise self.err(key, f"unknown key(s) {unknown}; allowed: {sorted(allowed)}")
        return dict(value)

    def number(self, value, key: str, positive: bool = True, allow_none: bool = True) -> float | None:
        if value is None and allow_none:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.err(key, f"expected a number, got {value!r}")
        if positive and value <= 0:
            raise self.err(key, f"must be > 0, got {value!r}")
        if not positive and value < 0:
            raise self.err(key, f"must be >= 0, got {value!r}")
        return float(value)

    def choice(self, value, key: str, options) -> str:
        if value not in options:
            raise self.err(key, f"{value!r} is not one of {', '.join(map(str, options))}")
        return value

    def topic(self, value, key: str) -> str:
        if not isinstance(value, str) or not value.strip() or " " in value:
            raise self.err(key, f"expected a topic name, got {value!r}")
        return value  # relative names stay relative (a live node resolves them in its namespace)

    def stream(self, raw: dict, key: str, topic: str, msgtype: str, defaults: dict) -> TopicStream:
        if msgtype != STRING and raw.get("required", True) is not True:
            raise self.err(
                f"{key}.required", "feature sources are always required (every frame needs a value)"
            )
        merged = {**defaults, **{k: v for k, v in raw.items() if k in STREAM_KEYS}}
        if msgtype != STRING:
            merged.pop("required", None)
        headerless = msgtype in HEADERLESS_TYPES
        default_timeline = RECEIVE if headerless or msgtype == JOINT_TRAJECTORY else HEADER
        timeline = self.choice(merged.get("timeline", default_timeline), f"{key}.timeline", TIMELINES)
        if timeline == HEADER and headerless:
            raise self.err(f"{key}.timeline", f"{msgtype} has no header: use timeline 'receive'")
        policy = self.choice(merged.get("policy", HOLD), f"{key}.policy", POLICIES)
        if policy == "interpolate" and msgtype not in VECTOR_TYPES:
            raise self.err(f"{key}.policy", f"interpolate needs numeric values; {msgtype} is not")
        default_qos = "sensor" if msgtype in IMAGE_TYPES else "reliable"
        required = merged.get("required", True)
        if not isinstance(required, bool):
            raise self.err(f"{key}.required", f"expected true or false, got {required!r}")
        staleness_default = None if msgtype in LATCHED_TYPES else DEFAULT_MAX_STALENESS
        return TopicStream(
            topic=topic,
            msgtype=msgtype,
            policy=policy,
            tolerance=self.number(merged.get("tolerance"), f"{key}.tolerance"),
            max_staleness=self.number(merged.get("max_staleness", staleness_default), f"{key}.max_staleness"),
            timeline=timeline,
            qos=self.choice(merged.get("qos", default_qos), f"{key}.qos", QOS),
            rate=self.number(merged.get("rate"), f"{key}.rate"),
            required=required,
        )

    def msgtype(self, raw: dict, key: str, allowed: tuple[str, ...], default: str) -> str:
        value = raw.get("type", default)
        if not isinstance(value, str):
            raise self.err(f"{key}.type", f"expected a message type name, got {value!r}")
        return self.choice(normalize_msgtype(value), f"{key}.type", allowed)

    def names(self, value, key: str, allow_none: bool) -> tuple[str, ...] | None:
        if value is None and allow_none:
            return None
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
            raise self.err(key, f"expected a list of names, got {value!r}")
        if len(set(value)) != len(value):
            raise self.err(key, f"names repeat: {list(value)}")
        return tuple(value)

    def contract(self, data) -> Contract:
        if data is None:
            raise self.err("(top level)", "the contract is empty")
        data = self.mapping(data, "(top level)", _TOP_KEYS)
        if "fps" not in data:
            raise self.err("fps", "missing (the dataset's frames per second)")
        fps = data["fps"]
        if isinstance(fps, bool) or not isinstance(fps, int) or fps <= 0:
            raise self.err("fps", f"expected a positive integer, got {fps!r}")
        robot_type = data.get("robot_type")
        if robot_type is not None and not isinstance(robot_type, str):
            raise self.err("robot_type", f"expected text, got {robot_type!r}")
        units = self.choice(data.get("units", "radians"), "units", UNITS)
        defaults = self.mapping(data.get("defaults") or {}, "defaults", set(STREAM_KEYS) - {"required"})
        calibration = self.calibration(data.get("calibration") or {})
        feats = data.get("features")
        if not isinstance(feats, Mapping) or not feats:
            raise self.err("features", "missing or empty (map feature names to topics)")
        streams: dict[str, TopicStream] = {}
        vectors: dict[str, tuple[VectorSource, ...]] = {}
        images: dict[str, ImageSource] = {}
        extras: dict[str, ExtraSource] = {}

        def add_stream(stream: TopicStream, key: str) -> None:
            old = streams.get(stream.topic)
            if old is not None and old != stream:
                raise self.err(
                    key,
                    f"topic {stream.topic} is used twice with different type or stream settings ({old} vs {stream})",
                )
            streams[stream.topic] = stream

        for feature, spec in feats.items():
            fkey = f"features.{feature}"
            if not isinstance(feature, str) or not feature or "/" in feature:
                raise self.err(fkey, "feature names are non-empty text without '/'")
            if feature in ("timestamp", "frame_index", "episode_index", "index", "task_index", "task"):
                raise self.err(fkey, f"{feature!r} is filled by the dataset writer; do not map it")
            if feature.startswith(IMAGE_PREFIX):
                if not feature[len(IMAGE_PREFIX) :]:
                    raise self.err(fkey, "camera name missing after 'observation.images.'")
                raw = self.mapping(spec, fkey, _IMAGE_KEYS)
                if "topic" not in raw:
                    raise self.err(f"{fkey}.topic", "missing")
                topic = self.topic(raw["topic"], f"{fkey}.topic")
                default_type = COMPRESSED_IMAGE if topic.endswith("/compressed") else IMAGE
                mtype = self.msgtype(raw, fkey, IMAGE_TYPES, default_type)
                enc = raw.get("encoding")
                if enc is not None:
                    if mtype == IMAGE:
                        self.choice(enc, f"{fkey}.encoding", RGB_ENCODINGS)
                    else:
                        self.choice(enc, f"{fkey}.encoding", ("jpeg", "png"))
                h = raw.get("height")
                w = raw.get("width")
                if (h is None) != (w is None):
                    raise self.err(fkey, "give both height and width, or neither")
                for k, v in (("height", h), ("width", w)):
                    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0):
                        raise self.err(f"{fkey}.{k}", f"expected a positive integer, got {v!r}")
                add_stream(self.stream(raw, fkey, topic, mtype, defaults), fkey)
                images[feature] = ImageSource(topic, mtype, enc, h, w)
                continue
            if feature.startswith(EXTRA_PREFIX):
                raw = self.mapping(spec, fkey, _EXTRA_KEYS)
                if "topic" not in raw:
                    raise self.err(f"{fkey}.topic", "missing")
                topic = self.topic(raw["topic"], f"{fkey}.topic")
                mtype = self.msgtype(raw, fkey, (CONTROL_STATUS,), CONTROL_STATUS)
                fld = self.choice(
                    raw.get("field", feature[len(EXTRA_PREFIX) :]), f"{fkey}.field", tuple(CONTROL_FIELDS)
                )
                # a mode published on change is held until replaced: no staleness from the defaults
                latched = {
                    k: v for k, v in defaults.items() if k not in ("policy", "tolerance", "max_staleness")
                }
                add_stream(self.stream(raw, fkey, topic, mtype, latched), fkey)
                extras[feature] = ExtraSource(topic, mtype, fld, CONTROL_FIELDS[fld])
                continue
            items = spec if isinstance(spec, list) else [spec]
            if not items:
                raise self.err(fkey, "no sources")
            sources = []
            for i, item in enumerate(items):
                key = f"{fkey}[{i}]" if isinstance(spec, list) else fkey
                raw = self.mapping(item, key, _VECTOR_KEYS)
                if "topic" not in raw:
                    raise self.err(f"{key}.topic", "missing")
                topic = self.topic(raw["topic"], f"{key}.topic")
                mtype = self.msgtype(raw, key, VECTOR_TYPES, JOINT_STATE)
                fields = raw.get("fields", ["position"])
                if isinstance(fields, str):
                    fields = [fields]
                if not isinstance(fields, list) or not fields:
                    raise self.err(f"{key}.fields", f"expected a list of {', '.join(FIELDS)}, got {fields!r}")
                for f in fields:
                    self.choice(f, f"{key}.fields", tuple(FIELDS))
                if len(set(fields)) != len(fields):
                    raise self.err(f"{key}.fields", f"fields repeat: {fields}")
                if mtype == FLOAT64_MULTI_ARRAY and fields != ["position"] and len(fields) != 1:
                    raise self.err(f"{key}.fields", "a Float64MultiArray carries one field")
                prefix = raw.get("prefix", "")
                if not isinstance(prefix, str):
                    raise self.err(f"{key}.prefix", f"expected text, got {prefix!r}")
                src_units = self.choice(raw.get("units", units), f"{key}.units", UNITS)
                joints = self.names(raw.get("joints"), f"{key}.joints", allow_none=True)
                add_stream(self.stream(raw, key, topic, mtype, defaults), key)
                sources.append(VectorSource(topic, mtype, tuple(fields), joints, prefix, src_units))
            vectors[feature] = tuple(sources)
        task_text, task_topic = self.task(data.get("task"), streams, defaults)
        contract = Contract(
            fps=fps,
            robot_type=robot_type,
            vectors=vectors,
            images=images,
            streams=streams,
            task_text=task_text,
            task_topic=task_topic,
            calibration=calibration,
            source=self.source,
            extras=extras,
        )
        if contract.resolved:
            contract._check_names()
        else:
            for feature, sources in vectors.items():
                for src in sources:
                    if src.units == "normalized" and src.joints is None:
                        raise self.err(
                            f"features.{feature}", "units 'normalized' needs an explicit 'joints' list"
                        )
        return contract

    def task(self, value, streams: dict, defaults: dict) -> tuple[str | None, str | None]:
        if value is None:
            raise self.err("task", "missing (fixed text, or {topic: /task, default: text})")
        if isinstance(value, str):
            if not value.strip():
                raise self.err("task", "must not be empty")
            return value, None
        raw = self.mapping(value, "task", _TASK_KEYS)
        if "topic" not in raw:
            raise self.err("task.topic", "missing")
        topic = self.topic(raw["topic"], "task.topic")
        default = raw.get("default")
        if default is not None and (not isinstance(default, str) or not default.strip()):
            raise self.err("task.default", f"expected non-empty text, got {default!r}")
        raw.setdefault("required", default is None)
        if topic in streams:
            raise self.err("task.topic", f"{topic} already feeds a feature")
        task_defaults = {
            k: v for k, v in defaults.items() if k not in ("policy", "tolerance", "max_staleness")
        }
        streams[topic] = self.stream(raw, "task", topic, STRING, task_defaults)
        return default, topic

    def calibration(self, value) -> dict[str, tuple[float, float, str]]:
        if not isinstance(value, Mapping):
            raise self.err(
                "calibration", f"expected a mapping joint -> {{range: [lo, hi], mode}}, got {value!r}"
            )
        out = {}
        for joint, spec in value.items():
            key = f"calibration.{joint}"
            raw = self.mapping(spec, key, {"range", "mode"})
            rng = raw.get("range")
            ok = (
                isinstance(rng, (list, tuple))
                and len(rng) == 2
                and all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in rng
                )
                and rng[0] < rng[1]
            )
            if not ok:
                raise self.err(f"{key}.range", f"expected [min, max] in radians with min < max, got {rng!r}")
            lo, hi = float(rng[0]), float(rng[1])
            mode = str(raw.get("mode", "m100_100"))
            self.choice(mode, f"{key}.mode", NORM_MODES)
            out[str(joint)] = (lo, hi, mode)
        return out
