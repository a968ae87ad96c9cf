"""LeRobotDataset episode -> mcap rosbag2 (JointState + Image), to replay recorded data in rviz.

    lerobot-bag-export DATASET --episode I --output OUT_DIR [--config contract.yaml]

Without a contract: ``observation.state`` -> ``/joint_states`` and ``action`` ->
``/action/joint_states`` (sensor_msgs/JointState; feature names ``<joint>.pos`` / ``.vel`` /
``.effort`` fill position / velocity / effort), each camera ``observation.images.<name>`` ->
``/cameras/<name>/image_raw`` (sensor_msgs/Image rgb8; a depth camera as the depth image it was
recorded from, 16UC1 millimetres or 32FC1 metres, decoded within its quantisation error), the task -> ``/task`` (std_msgs/String,
once per change). Values are written as stored (radians when recorded with the default units).
With ``--config``, the contract's topics are used for JointState and Image sources and its unit
conversion is inverted (degrees / normalized back to radians). Message stamps and log times are
``start + frame_index / fps``. Video is decoded frame by frame (memory stays flat).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer

from lerobot_core import cli
from lerobot_core.contract import IMAGE, IMAGE_PREFIX, JOINT_STATE, Contract, ContractError
from lerobot_core.topics import camera_name, camera_topic
from lerobot_dataset.depth import DepthQuantizer, is_depth_feature
from lerobot_dataset.mp4 import iter_frames

from . import bag_io

__all__ = ["ExportError", "export_episode", "main"]

_NS = 1_000_000_000
_SUFFIX_FIELD = {"pos": "position", "vel": "velocity", "effort": "effort"}


class ExportError(RuntimeError):
    pass


@dataclass
class _JointTarget:
    topic: str
    columns: list[int]  # indices into the feature vector
    joints: list[str]
    fields: list[str]  # per column: position / velocity / effort
    scale: np.ndarray  # stored = published * scale + offset (inverted on export)
    offset: np.ndarray


def _split_name(name: str) -> tuple[str, str]:
    joint, dot, suffix = name.rpartition(".")
    if dot and suffix in _SUFFIX_FIELD:
        return joint, _SUFFIX_FIELD[suffix]
    return name, "position"


def _default_targets(features: dict) -> dict[str, list[_JointTarget]]:
    topics = {"observation.state": "/joint_states", "action": "/action/joint_states"}
    out = {}
    for feature, topic in topics.items():
        ft = features.get(feature)
        if ft is None or ft["dtype"] not in ("float32", "float64"):
            continue
        names = ft.get("names") or [f"joint_{i}" for i in range(ft["shape"][0])]
        if isinstance(names, dict):  # LeRobot sometimes nests names: {"motors": [...]}
            names = next(iter(names.values()))
        split = [_split_name(str(n)) for n in names]
        n = len(split)
        out[feature] = [
            _JointTarget(
                topic, list(range(n)), [j for j, _ in split], [f for _, f in split], np.ones(n), np.zeros(n)
            )
        ]
    return out


def _contract_targets(contract: Contract, features: dict) -> dict[str, list[_JointTarget]]:
    out: dict[str, list[_JointTarget]] = {}
    for feature, sources in contract.vectors.items():
        if feature not in features:
            raise ExportError(f"{contract.source}: feature {feature} is not in the dataset")
        names = features[feature].get("names") or []
        scale, offset = contract_scale(contract, feature, names)
        col = 0
        targets = []
        for src in sources:
            joints = list(src.joints or [])
            width = len(joints) * len(src.fields)
            topic = src.topic if src.msgtype == JOINT_STATE else f"/{feature.replace('.', '/')}/joint_states"
            cols = list(range(col, col + width))
            targets.append(
                _JointTarget(
                    topic,
                    cols,
                    [j for _ in src.fields for j in joints],
                    [f for f in src.fields for _ in joints],
                    scale[cols],
                    offset[cols],
                )
            )
            col += width
        out[feature] = targets
    return out


def contract_scale(contract: Contract, feature: str, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    sources = contract.vectors[feature]
    if any(s.joints is None for s in sources):  # joints left to the data: take them from the dataset
        n_named = sum(len(s.fields) for s in sources)
        if len(sources) != 1 or n_named != 1:
            raise ExportError(
                f"{contract.source}: {feature}: list the joints to export with several sources/fields"
            )
        joints = [_split_name(str(n))[0] for n in names]
        only = replace(sources[0], joints=tuple(joints))
        contract = replace(contract, vectors={**contract.vectors, feature: (only,)})
    scale, offset = contract.unit_conversion(feature)
    if len(scale) != len(names):
        raise ExportError(
            f"{contract.source}: {feature} has {len(scale)} values in the contract, {len(names)} in the dataset"
        )
    return scale, offset


def export_episode(
    dataset: str | os.PathLike,
    episode: int,
    output: str | os.PathLike,
    *,
    contract: Contract | None = None,
    start_ns: int | None = None,
) -> dict:
    """Write episode ``episode`` of ``dataset`` to a new mcap rosbag2 at ``output``; returns counts."""
    from lerobot_dataset import DatasetError, DatasetReader
    from lerobot_dataset import format as dsfmt

    output = Path(output)
    if output.exists():
        raise ExportError(
            f"--output {output} already exists: rosbag2 writes a new directory; pass a new --output"
        )
    try:
        reader = DatasetReader(dataset)
        if not 0 <= episode < reader.num_episodes:
            raise ExportError(
                f"--episode {episode}: {dataset} has {reader.num_episodes} episode(s) (0..{reader.num_episodes - 1})"
            )
        columns = reader.episode(episode)
        meta = reader.episode_meta(episode)
    except DatasetError as exc:
        raise ExportError(f"{dataset}: {exc}") from None
    fps = reader.fps
    n = len(columns["frame_index"])
    targets = _contract_targets(contract, reader.features) if contract else _default_targets(reader.features)
    cameras = {}
    depth_keys = [k for k in reader.video_keys if is_depth_feature(reader.features[k])]
    for key in reader.video_keys:
        topic = "/" + camera_topic(camera_name(key)) if key.startswith(IMAGE_PREFIX) else f"/{key}"
        if contract and key in contract.images and contract.images[key].msgtype == IMAGE:
            topic = contract.images[key].topic
        path = Path(dataset) / dsfmt.video_path(
            key, meta[f"videos/{key}/chunk_index"], meta[f"videos/{key}/file_index"]
        )
        depth = DepthQuantizer.from_info(reader.features[key].get("info")) if key in depth_keys else None
        frames = iter_frames(
            path,
            float(meta[f"videos/{key}/from_timestamp"]),
            float(meta[f"videos/{key}/to_timestamp"]),
            fps,
            depth,
        )
        cameras[key] = (topic, frames, depth)
    base = int(start_ns) if start_ns is not None else time.time_ns()
    counts: dict[str, int] = {}
    ts = bag_io.typestore()
    try:
        with Writer(output, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
            conns = {}

            def conn(topic: str, msgtype: str):
                if topic not in conns:
                    conns[topic] = writer.add_connection(topic, msgtype, typestore=ts)
                return conns[topic]

            def write(topic: str, msg, stamp: int) -> None:
                writer.write(conn(topic, msg.__msgtype__), stamp, bag_io.serialize(msg))
                counts[topic] = counts.get(topic, 0) + 1

            last_task = None
            for i in range(n):
                stamp = base + (int(columns["frame_index"][i]) * _NS) // fps
                task = str(columns["task"][i])
                if task != last_task:
                    write("/task", bag_io.string(task), stamp)
                    last_task = task
                for feature, tlist in targets.items():
                    row = np.asarray(columns[feature][i], dtype=np.float64)
                    for t in tlist:
                        values = (row[t.columns] - t.offset) / t.scale
                        write(t.topic, _joint_state(stamp, t, values), stamp)
                for key, (topic, frames, depth) in cameras.items():
                    frame = next(frames, None)
                    if frame is None:
                        raise ExportError(
                            f"{dataset}: {key}: the video ends before frame {i} of episode {episode}"
                        )
                    if depth is not None:  # back to the depth image it was: 16UC1 mm or 32FC1 m
                        frame = np.rint(frame).astype(np.uint16) if depth.unit == "mm" else frame
                        enc = "16UC1" if depth.unit == "mm" else "32FC1"
                        write(topic, bag_io.image(stamp, frame, enc, frame_id=key), stamp)
                        continue
                    write(topic, bag_io.image(stamp, frame, "rgb8", frame_id=key), stamp)
    except BaseException as exc:
        import shutil

        shutil.rmtree(output, ignore_errors=True)  # no half-written bag is left behind
        if isinstance(exc, DatasetError):
            raise ExportError(f"{dataset}: episode {episode}: {exc}") from None
        raise
    return {"frames": n, "messages": counts, "output": str(output)}


def _joint_state(stamp: int, target: _JointTarget, values: np.ndarray):
    joints: list[str] = []
    per_field: dict[str, dict[str, float]] = {"position": {}, "velocity": {}, "effort": {}}
    for joint, fld, v in zip(target.joints, target.fields, values, strict=True):
        if joint not in joints:
            joints.append(joint)
        per_field[fld][joint] = float(v)
    arrays = {
        f: [vals[j] for j in joints] if len(vals) == len(joints) else [] for f, vals in per_field.items()
    }
    return bag_io.joint_state(stamp, joints, arrays["position"], arrays["velocity"], arrays["effort"])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="lerobot-bag-export",
        description="Write one episode of a LeRobotDataset v3 as an mcap rosbag2 (JointState, Image) for rviz.",
        formatter_class=cli.HelpFormatter,
    )
    p.add_argument("dataset", help="dataset directory")
    p.add_argument("--episode", type=cli.non_negative_int, required=True, help="episode index")
    p.add_argument("--output", "-o", required=True, help="new rosbag2 directory to create")
    p.add_argument(
        "--config",
        help="mapping contract used to record it (topics and units to restore): a YAML path, or a shipped "
        "one's name",
    )
    p.add_argument(
        "--start-time",
        type=cli.non_negative_float,
        help="stamp of the first frame, s since the epoch (default: now)",
    )
    args = p.parse_args(argv)
    try:
        contract = Contract.load(args.config) if args.config else None
        start = int(round(args.start_time * _NS)) if args.start_time is not None else None
        result = export_episode(args.dataset, args.episode, args.output, contract=contract, start_ns=start)
    except (ExportError, ContractError) as exc:
        print(f"lerobot-bag-export: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # damage no check above foresaw: one line, never a traceback
        print(
            f"lerobot-bag-export: error: {args.dataset}: episode {args.episode} cannot be exported "
            f"({type(exc).__name__}: {exc}); `lerobot-dataset-info {args.dataset} --check` lists what is damaged",
            file=sys.stderr,
        )
        return 2
    topics = ", ".join(f"{t} ({c})" for t, c in result["messages"].items())
    print(f"exported episode {args.episode}: {result['frames']} frames -> {result['output']}: {topics}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
