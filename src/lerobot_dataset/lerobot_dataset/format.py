"""LeRobotDataset v3.0 on-disk layout: paths, default columns, feature validation, arrow schema.

Facts follow LeRobot 0.4.4 (codebase_version "v3.0"); the code is our own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

import pyarrow as pa

from .depth import DepthQuantizer
from .errors import DatasetError

CODEBASE_VERSION = "v3.0"

INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
TASKS_PATH = "meta/tasks.parquet"
EPISODES_DIR = "meta/episodes"
DATA_DIR = "data"
VIDEO_DIR = "videos"
CHUNK_FILE_PATTERN = "chunk-{chunk_index:03d}/file-{file_index:03d}"
DATA_PATH = DATA_DIR + "/" + CHUNK_FILE_PATTERN + ".parquet"
EPISODES_PATH = EPISODES_DIR + "/" + CHUNK_FILE_PATTERN + ".parquet"
VIDEO_PATH = VIDEO_DIR + "/{video_key}/" + CHUNK_FILE_PATTERN + ".mp4"

DEFAULT_CHUNK_SIZE = 1000
DEFAULT_DATA_FILE_SIZE_IN_MB = 100
DEFAULT_VIDEO_FILE_SIZE_IN_MB = 200

# Columns every frame gets; callers must not supply them.
DEFAULT_FEATURES: dict[str, dict] = {
    "timestamp": {"dtype": "float32", "shape": (1,), "names": None},
    "frame_index": {"dtype": "int64", "shape": (1,), "names": None},
    "episode_index": {"dtype": "int64", "shape": (1,), "names": None},
    "index": {"dtype": "int64", "shape": (1,), "names": None},
    "task_index": {"dtype": "int64", "shape": (1,), "names": None},
}

QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
QUANTILE_KEYS = tuple(f"q{round(q * 100):02d}" for q in QUANTILES)
STAT_KEYS = ("min", "max", "mean", "std", "count", *QUANTILE_KEYS)

_ARROW_TYPES = {
    "float32": pa.float32(),
    "float64": pa.float64(),
    "float16": pa.float16(),
    "int64": pa.int64(),
    "int32": pa.int32(),
    "int16": pa.int16(),
    "int8": pa.int8(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "bool": pa.bool_(),
    "string": pa.string(),
}
VIDEO_DTYPE = "video"


def update_chunk_file_indices(chunk_index: int, file_index: int, chunks_size: int) -> tuple[int, int]:
    """Next (chunk, file) pair: files fill a chunk folder up to `chunks_size`, then a new chunk starts."""
    if file_index == chunks_size - 1:
        return chunk_index + 1, 0
    return chunk_index, file_index + 1


def data_path(chunk_index: int, file_index: int) -> str:
    return DATA_PATH.format(chunk_index=chunk_index, file_index=file_index)


def episodes_path(chunk_index: int, file_index: int) -> str:
    return EPISODES_PATH.format(chunk_index=chunk_index, file_index=file_index)


def video_path(video_key: str, chunk_index: int, file_index: int) -> str:
    return VIDEO_PATH.format(video_key=video_key, chunk_index=chunk_index, file_index=file_index)


def normalize_features(features: Mapping[str, Mapping]) -> dict[str, dict]:
    """Validate user features and return them as plain dicts with tuple shapes (defaults not included)."""
    if not isinstance(features, Mapping) or not features:
        raise DatasetError("features must be a non-empty dict of LeRobot feature specs")
    out: dict[str, dict] = {}
    for key, spec in features.items():
        where = f"feature {key!r}"
        if not isinstance(key, str) or not key or "/" in key:
            raise DatasetError(f"{where}: feature names must be non-empty strings without '/'")
        if key in DEFAULT_FEATURES:
            raise DatasetError(f"{where}: {key!r} is a default column the writer fills itself; remove it")
        if key in ("task", "size"):
            raise DatasetError(f"{where}: {key!r} is reserved")
        if not isinstance(spec, Mapping) or "dtype" not in spec or "shape" not in spec:
            raise DatasetError(f"{where}: needs at least 'dtype' and 'shape', got {spec!r}")
        dtype = spec["dtype"]
        try:
            shape = tuple(int(s) for s in spec["shape"])
        except (TypeError, ValueError) as exc:
            raise DatasetError(f"{where}: shape must be a sequence of ints, got {spec['shape']!r}") from exc
        if not shape or any(s <= 0 for s in shape):
            raise DatasetError(f"{where}: shape must be non-empty and positive, got {shape}")
        names = spec.get("names")
        depth = dtype == VIDEO_DTYPE and bool((spec.get("info") or {}).get("is_depth_map"))
        if dtype == VIDEO_DTYPE:
            if len(shape) != 3 or shape[2] != (1 if depth else 3):
                raise DatasetError(
                    f"{where}: video features are (height, width, 3), depth maps (info.is_depth_map "
                    f"true) (height, width, 1); got {shape}{' for a depth map' if depth else ''}"
                )
            if names is None:
                names = ["height", "width", "channels"]
        elif dtype == "image":
            raise DatasetError(f"{where}: dtype 'image' (PNG in parquet) is not supported; use 'video'")
        elif dtype not in _ARROW_TYPES:
            raise DatasetError(
                f"{where}: unsupported dtype {dtype!r}; use one of {sorted(_ARROW_TYPES)} or video"
            )
        elif len(shape) != 1:
            raise DatasetError(f"{where}: only 1-D non-video features are supported, got shape {shape}")
        elif dtype == "string" and shape != (1,):
            raise DatasetError(f"{where}: string features have shape (1,), got {shape}")
        if names is not None:
            if isinstance(names, Mapping):
                names = {k: list(v) for k, v in names.items()}
            else:
                names = list(names)
                if dtype != VIDEO_DTYPE and len(names) != shape[0]:
                    raise DatasetError(f"{where}: {len(names)} names for shape {shape}")
        entry = {"dtype": dtype, "shape": shape, "names": names}
        if spec.get("units") is not None:  # ours, beside LeRobot's keys: what the policy node checks
            entry["units"] = spec["units"]
        if dtype == VIDEO_DTYPE:
            # LeRobot 0.6 marks every camera with a top-level is_depth_map before its first video exists
            entry["info"] = {"is_depth_map": False, **(spec.get("info") or {})}
            if depth:
                try:
                    entry["info"].update(DepthQuantizer.from_info(spec["info"]).info())
                except DatasetError as exc:
                    raise DatasetError(f"{where}: {exc}") from None
        out[key] = entry
    return out


def all_features(user_features: Mapping[str, dict]) -> dict[str, dict]:
    """User features followed by the default columns, in LeRobot's order."""
    return {**user_features, **{k: dict(v) for k, v in DEFAULT_FEATURES.items()}}


def video_keys(features: Mapping[str, Mapping]) -> list[str]:
    return [k for k, ft in features.items() if ft["dtype"] == VIDEO_DTYPE]


def data_keys(features: Mapping[str, Mapping]) -> list[str]:
    """Columns stored in the data parquet (everything except videos), in feature order."""
    return [k for k, ft in features.items() if ft["dtype"] not in (VIDEO_DTYPE, "image")]


def arrow_type(feature: Mapping) -> pa.DataType:
    base = _ARROW_TYPES[feature["dtype"]]
    shape = tuple(feature["shape"])
    if shape == (1,):
        return base
    return pa.list_(base, shape[0])


def _hf_value(dtype: str) -> dict:
    return {"dtype": dtype, "_type": "Value"}


def data_schema(features: Mapping[str, Mapping]) -> pa.Schema:
    """Arrow schema of the data parquet, with the `huggingface` metadata `datasets` writes."""
    fields = []
    hf = {}
    for key in data_keys(features):
        ft = features[key]
        fields.append(pa.field(key, arrow_type(ft)))
        shape = tuple(ft["shape"])
        if shape == (1,):
            hf[key] = _hf_value(ft["dtype"])
        else:
            hf[key] = {"feature": _hf_value(ft["dtype"]), "length": shape[0], "_type": "List"}
    meta = {b"huggingface": json.dumps({"info": {"features": hf}}).encode()}
    return pa.schema(fields, metadata=meta)


def empty_info(
    fps: int,
    features: Mapping[str, dict],
    robot_type: str | None,
    chunks_size: int,
    data_files_size_in_mb: float,
    video_files_size_in_mb: float,
) -> dict:
    has_video = bool(video_keys(features))
    return {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": robot_type,
        "total_episodes": 0,
        "total_frames": 0,
        "total_tasks": 0,
        "chunks_size": chunks_size,
        "data_files_size_in_mb": data_files_size_in_mb,
        "video_files_size_in_mb": video_files_size_in_mb,
        "fps": fps,
        "splits": {},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if has_video else None,
        "features": {k: _json_feature(v) for k, v in features.items()},
    }


def _json_feature(ft: Mapping) -> dict:
    out = {"dtype": ft["dtype"], "shape": list(ft["shape"]), "names": ft.get("names")}
    if ft.get("units") is not None:
        out["units"] = ft["units"]
    if ft["dtype"] == VIDEO_DTYPE:
        out["info"] = ft.get("info")
    return out


def features_from_info(info: Mapping) -> dict[str, dict]:
    """Features from info.json with tuple shapes (default columns included)."""
    out = {}
    for key, ft in info["features"].items():
        entry = dict(ft)
        entry["shape"] = tuple(ft["shape"])
        out[key] = entry
    return out


_VERSION_RE = re.compile(r"^v(\d+)\.(\d+)")


def check_version(info: Mapping, where: str) -> None:
    version = str(info.get("codebase_version", ""))
    m = _VERSION_RE.match(version)
    if not m or int(m.group(1)) != 3:
        raise DatasetError(
            f"{where}: codebase_version is {version!r}; only LeRobotDataset v3.x is supported "
            "(convert v2.1 datasets with LeRobot's convert_dataset_v21_to_v30 first)"
        )
