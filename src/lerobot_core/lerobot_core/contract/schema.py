"""What a contract file may say: its keys and choices, the message types, the validated entries
(:class:`TopicStream`, :class:`VectorSource`, :class:`ImageSource`) and :class:`ContractError`.

:func:`parse` checks a loaded YAML document key by key and returns the fields of a
:class:`~lerobot_core.contract.model.Contract`; every error names the file and the key path.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lerobot_core.alignment import HEADER, HOLD, POLICIES, RECEIVE, TIMELINES, StreamSpec
from lerobot_core.image_conversion import DEPTH_ENCODINGS, RGB_ENCODINGS

JOINT_STATE = "sensor_msgs/msg/JointState"
FLOAT64_MULTI_ARRAY = "std_msgs/msg/Float64MultiArray"
JOINT_TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
POSE_STAMPED = "geometry_msgs/msg/PoseStamped"  # an object's pose, e.g. LeRobot's environment_state
IMAGE = "sensor_msgs/msg/Image"
COMPRESSED_IMAGE = "sensor_msgs/msg/CompressedImage"
STRING = "std_msgs/msg/String"
CONTROL_STATUS = "lerobot_msgs/msg/ControlStatus"  # the control arbiter's mode (human-in-the-loop)
VECTOR_TYPES = (JOINT_STATE, FLOAT64_MULTI_ARRAY, JOINT_TRAJECTORY, POSE_STAMPED)
IMAGE_TYPES = (IMAGE, COMPRESSED_IMAGE)
HEADERLESS_TYPES = (FLOAT64_MULTI_ARRAY, STRING)
LATCHED_TYPES = (STRING, CONTROL_STATUS)  # published on change: the latest value stays valid
# per-frame extras, named as LeRobot names them (complementary_info.<name>), from the arbiter's status
EXTRA_PREFIX = "complementary_info."
CONTROL_FIELDS = {"is_intervention": "bool", "mode": "int64"}  # ControlStatus field -> dataset dtype

FIELDS = {"position": "pos", "velocity": "vel", "effort": "effort"}
# a PoseStamped source has the one field "pose"; its "joints" are these components (metres, quaternion)
POSE_FIELD = "pose"
POSE_COMPONENTS = ("x", "y", "z", "qw", "qx", "qy", "qz")
POSE_UNITS = {**dict.fromkeys("xyz", "metres"), **dict.fromkeys(("qw", "qx", "qy", "qz"), "quaternion")}
UNITS = ("radians", "degrees", "normalized")
NORM_MODES = ("m100_100", "0_100")
QOS = ("sensor", "reliable")
IMAGE_PREFIX = "observation.images."
STREAM_KEYS = ("policy", "tolerance", "max_staleness", "timeline", "qos", "rate", "required")
_VECTOR_KEYS = {"topic", "type", "fields", "joints", "prefix", "units", *STREAM_KEYS}
_IMAGE_KEYS = {"topic", "type", "encoding", "height", "width", "depth", *STREAM_KEYS}
_TASK_KEYS = {"topic", "default", *STREAM_KEYS}
_EXTRA_KEYS = {"topic", "type", "field", *STREAM_KEYS}
_TOP_KEYS = {"fps", "robot_type", "units", "task", "calibration", "calibration_file", "features", "defaults"}
DEFAULT_MAX_STALENESS = 0.5  # s: a stream silent this long drops ticks instead of freezing silently


class ContractError(ValueError):
    """A contract file (or dict) that cannot be used; the message names the file and key path."""


class NonFiniteSampleError(ValueError):
    """A message whose values for the contract hold NaN or inf (a driver fault, a broken sensor):
    never recorded as data. ``topic`` and ``count`` (non-finite values in the message) say where."""

    def __init__(self, topic: str, count: int, names: list[str]):
        self.topic, self.count, self.names = topic, count, names
        shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
        super().__init__(f"topic {topic}: {count} non-finite value(s) (NaN or inf) in {shown}")


@functools.lru_cache(maxsize=256)  # called per message with a handful of distinct names
def normalize_msgtype(name: str) -> str:
    """'sensor_msgs/JointState' or 'sensor_msgs/msg/JointState' -> 'sensor_msgs/msg/JointState'."""
    parts = str(name).strip().split("/")
    if len(parts) == 2:
        return f"{parts[0]}/msg/{parts[1]}"
    return "/".join(parts)


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
        if self.msgtype == POSE_STAMPED:
            return [f"{self.prefix}{c}" for c in self.joints or ()]
        return [f"{self.prefix}{j}.{FIELDS[f]}" for f in self.fields for j in self.joints or ()]


@dataclass(frozen=True)
class ExtraSource:
    """A per-frame scalar (``complementary_info.<name>``) read from one field of a status message."""

    topic: str
    msgtype: str
    field: str
    dtype: str


@dataclass(frozen=True)
class ImageSource:
    topic: str
    msgtype: str
    encoding: str | None = None  # when set, every message must have it
    height: int | None = None
    width: int | None = None
    # a depth camera (16UC1 / mono16 / 32FC1, recorded as LeRobot 0.6's depth video); None: decided
    # by the first image's encoding (resolve() pins it, and the encoding, for a depth camera)
    depth: bool | None = None

    @property
    def depth_unit(self) -> str | None:
        """ "mm" or "m" for a resolved depth camera (its encoding's unit), else None."""
        return DEPTH_ENCODINGS.get(self.encoding) if self.depth else None


def parse(data: Any, source: str = "<contract>") -> dict[str, Any]:
    """The fields of a Contract from a loaded YAML document (ContractError on the first problem)."""
    return _Parser(source).contract(data)


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

    def contract(self, data) -> dict[str, Any]:
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
        calibration = self.calibration_file(data.get("calibration_file"), robot_type)
        calibration.update(self.calibration(data.get("calibration") or {}))  # explicit entries win
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
                depth = raw.get("depth")
                if depth is not None and not isinstance(depth, bool):
                    raise self.err(f"{fkey}.depth", f"expected true or false, got {depth!r}")
                if depth and mtype != IMAGE:
                    raise self.err(
                        f"{fkey}.depth",
                        f"depth cameras are recorded from {IMAGE} (16UC1, mono16, 32FC1), not {mtype}",
                    )
                if enc is not None:
                    if mtype == IMAGE:
                        allowed = (
                            tuple(DEPTH_ENCODINGS)
                            if depth
                            else RGB_ENCODINGS
                            if depth is False
                            else (*RGB_ENCODINGS, *DEPTH_ENCODINGS)
                        )
                        self.choice(enc, f"{fkey}.encoding", allowed)
                        depth = enc in DEPTH_ENCODINGS
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
                images[feature] = ImageSource(topic, mtype, enc, h, w, depth if mtype == IMAGE else False)
                continue
            if feature.startswith(EXTRA_PREFIX):
                raw = self.mapping(spec, fkey, _EXTRA_KEYS)
                if "topic" not in raw:
                    raise self.err(f"{fkey}.topic", "missing")
                topic = self.topic(raw["topic"], f"{fkey}.topic")
                mtype = self.msgtype(raw, fkey, (CONTROL_STATUS,), CONTROL_STATUS)
                name = raw.get("field", feature[len(EXTRA_PREFIX) :])
                fld = self.choice(name, f"{fkey}.field", tuple(CONTROL_FIELDS))
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
                if mtype == POSE_STAMPED:
                    sources.append(self.pose_source(raw, key, topic, defaults))
                    add_stream(self.stream(raw, key, topic, mtype, defaults), key)
                    continue
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
        for feature, sources in vectors.items():
            for src in sources:
                if src.units == "normalized" and src.joints is None:
                    raise self.err(
                        f"features.{feature}", "units 'normalized' needs an explicit 'joints' list"
                    )
        return dict(
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

    def pose_source(self, raw: dict, key: str, topic: str, defaults: dict) -> VectorSource:
        """A PoseStamped source: position (metres) and orientation (quaternion) as published, no units."""
        fields = raw.get("fields", [POSE_FIELD])
        if fields not in ([POSE_FIELD], POSE_FIELD):
            raise self.err(
                f"{key}.fields", f"a PoseStamped carries the one field {POSE_FIELD!r}, got {fields!r}"
            )
        if "units" in raw:
            raise self.err(
                f"{key}.units", "a PoseStamped is recorded as published (metres, quaternion): no units"
            )
        comps = self.names(raw.get("joints", list(POSE_COMPONENTS)), f"{key}.joints", allow_none=False)
        for c in comps:
            self.choice(c, f"{key}.joints", POSE_COMPONENTS)
        prefix = raw.get("prefix", "")
        if not isinstance(prefix, str):
            raise self.err(f"{key}.prefix", f"expected text, got {prefix!r}")
        return VectorSource(topic, POSE_STAMPED, (POSE_FIELD,), comps, prefix, "radians")

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

    def calibration_file(self, value, robot_type: str | None) -> dict[str, tuple[float, float, str]]:
        """Ranges in radians from a LeRobot calibration JSON (the file the bus driver loads); the mode of
        each joint is LeRobot's for the robot type (RANGE_0_100 for grippers, RANGE_M100_100 else)."""
        if value is None:
            return {}
        if not isinstance(value, str) or not value:
            raise self.err(
                "calibration_file", f"expected the path of a LeRobot calibration JSON, got {value!r}"
            )
        from lerobot_core import calibration, robots

        path = os.path.expanduser(value)
        if not os.path.isabs(path) and os.path.isfile(self.source):  # relative to the contract file
            path = os.path.join(os.path.dirname(os.path.abspath(self.source)), path)
        try:
            cal = calibration.load_calibration(path)
        except calibration.CalibrationError as exc:
            raise self.err("calibration_file", f"{exc} (units 'normalized' are computed from it)") from None
        modes: dict[str, str] = {}
        if robot_type:
            try:
                modes = {m.name: m.norm_mode for m in robots.get_robot_spec(robot_type).motors}
            except (KeyError, ValueError):
                modes = {}
        out = {}
        for joint, (lo, hi) in calibration.radian_ranges(cal).items():
            mode = modes.get(joint, robots.RANGE_0_100 if joint == "gripper" else robots.RANGE_M100_100)
            out[joint] = (lo, hi, "0_100" if mode == robots.RANGE_0_100 else "m100_100")
        return out

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
