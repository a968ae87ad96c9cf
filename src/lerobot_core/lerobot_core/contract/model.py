"""The contract itself: which topics feed which LeRobot features, resolved against the data.

:class:`Contract` loads a file (validated by :mod:`.schema`), fills what the file left to the data
(joint names, image sizes), gives the dataset ``features`` and the aligner's stream specs, and turns
messages into aligned values (:mod:`.extraction`) and aligned values into dataset frames.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import yaml

from lerobot_core import units, yaml_io
from lerobot_core.alignment import HOLD, StreamSpec
from lerobot_core.control_mode import ControlMode
from lerobot_core.image_conversion import AUTO_DEPTH_ENCODINGS, DEPTH_ENCODINGS
from lerobot_core.time import stamp_to_ns

from .extraction import (
    EXTRACTORS,
    decode_image,
    has_type,
    message_joint_names,
    msgtype_of,
    vector_values,
)
from .schema import (
    IMAGE,
    IMAGE_PREFIX,
    JOINT_STATE,
    POSE_FIELD,
    POSE_UNITS,
    VECTOR_TYPES,
    ContractError,
    ExtraSource,
    ImageSource,
    NonFiniteSampleError,
    TopicStream,
    VectorSource,
    normalize_msgtype,
    parse,
)
from .shipped import find_contract, is_contract_name, shipped_contracts

# the contract file's calibration modes -> LeRobot's
_NORM_MODE = {"m100_100": units.RANGE_M100_100, "0_100": units.RANGE_0_100}


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
    extras: dict[str, ExtraSource] = field(default_factory=dict)  # complementary_info.* per frame

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, path: str | os.PathLike) -> Contract:
        """The contract in the file ``path``, or the shipped contract of that name (:mod:`.shipped`)."""
        where = find_contract(path)
        try:
            with open(where, encoding="utf-8") as fh:
                data = yaml_io.load(fh)  # YAML 1.2 floats: max_staleness: 1e-9 is a number
        except OSError as exc:
            hint = ""
            if is_contract_name(where):
                hint = f"; it is no file here, nor a shipped contract ({', '.join(shipped_contracts())})"
            raise ContractError(f"{where}: cannot read the contract: {exc.strerror or exc}{hint}") from None
        except yaml.YAMLError as exc:
            raise ContractError(f"{where}: not valid YAML: {exc}") from None
        return cls.from_dict(data, source=where)

    @classmethod
    def from_dict(cls, data: Any, source: str = "<contract>") -> Contract:
        contract = cls(**parse(data, source))
        if contract.resolved:
            contract._check_names()
        return contract

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
                    self.check_msgtype(src.topic, msgtype_of(msg) if has_type(msg) else src.msgtype)
                    arr_names = message_joint_names(src, msg)
                    if src.joints is None:
                        if arr_names is None:
                            arr_names = self._borrow_names(src, msg, out, vectors)
                        src = replace(src, joints=tuple(arr_names))
                    else:
                        vector_values(
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
                if has_type(msg):
                    self.check_msgtype(src.topic, msgtype_of(msg))
                rgb = decode_image(src, msg)
                h, w = int(rgb.shape[0]), int(rgb.shape[1])
                if (src.height, src.width) not in ((None, None), (h, w)):
                    raise ValueError(
                        f"topic {src.topic}: images are {w}x{h} but the contract says {src.width}x{src.height}"
                    )
                src = replace(src, height=h, width=w)
                if src.msgtype == IMAGE and src.depth is not False:
                    enc = str(msg.encoding)  # a depth camera keeps its first image's encoding (its unit)
                    depth = enc in (DEPTH_ENCODINGS if src.depth else AUTO_DEPTH_ENCODINGS)
                    src = replace(src, depth=depth, encoding=enc if depth else src.encoding)
            elif src.height is None or src.width is None:
                raise ValueError(
                    f"topic {src.topic}: no image to learn the size from; give height and width for {feature}"
                )
            elif src.depth and src.encoding is None:
                raise ValueError(
                    f"topic {src.topic}: no image to learn the depth encoding from; give encoding "
                    f"({', '.join(DEPTH_ENCODINGS)}) for {feature}"
                )
            elif src.depth is None:
                src = replace(src, depth=False)
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
            out[feature]["units"] = self.feature_units(feature)
        for feature, src in self.images.items():
            out[feature] = {
                "dtype": "video",
                "shape": (src.height, src.width, 1 if src.depth else 3),
                "names": ["height", "width", "channels"],
            }
            if src.depth:  # LeRobot 0.6's depth video: 12-bit codes of the depth in this unit
                out[feature]["info"] = {"is_depth_map": True, "depth_unit": src.depth_unit}
        for feature, src in self.extras.items():
            out[feature] = {"dtype": src.dtype, "shape": (1,), "names": None}
        return out

    def paused(self, values: Mapping[str, Any]) -> bool:
        """True when a tick falls in a pause of the control arbiter (such ticks make no frame)."""
        return any(
            (v := values.get(src.topic)) is not None and v["mode"] == ControlMode.HOLD
            for src in self.extras.values()
        )

    def feature_units(self, feature: str) -> str | list[str]:
        """The units of a vector feature as recorded in info.json (``units`` beside ``names``): radians,
        degrees or normalized; one per value when its sources differ. Efforts are kept as published."""
        per_value = [
            POSE_UNITS[j] if f == POSE_FIELD else "radians" if f == "effort" else s.units
            for s in self.vectors[feature]
            for f in s.fields
            for j in s.joints or ()
        ]
        return per_value[0] if len(set(per_value)) == 1 else per_value

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
        extract = EXTRACTORS.get(mtype)
        if extract is None:
            raise ValueError(f"topic {topic}: unsupported message type {mtype}")
        value = extract(self, topic, mtype, msg)
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            bad = ~np.isfinite(value)
            if bad.any():
                layout = self._layout(topic)
                idx = np.flatnonzero(bad)
                if len(layout) == value.size:
                    where = [f"{layout[i][1]} {layout[i][0]}" for i in idx]
                else:
                    where = [f"value {i}" for i in idx]
                raise NonFiniteSampleError(topic, int(bad.sum()), where)
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
        if fld in ("effort", POSE_FIELD) or src.units == "radians":
            return 1.0, 0.0
        if src.units == "degrees":
            return units.DEGREES_PER_RADIAN, 0.0
        lo, hi, mode = self.calibration[joint]
        scale, offset = units.normalize_affine(lo, hi, _NORM_MODE[mode])
        return (scale, 0.0) if fld == "velocity" else (scale, offset)

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
            rgb = decode_image(src, values[src.topic])
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
