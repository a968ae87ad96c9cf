"""One episode's action (or state) column of a LeRobotDataset v3.0, and its units back to radians.

ROS-free and small on purpose: replaying an episode on a robot needs the actions, the fps and the
joint names, not the dataset reader (which lives in lerobot_recorder, above the packages that
command robots). Reads ``meta/info.json``, ``meta/episodes/`` and the episode's rows of its
``data/`` parquet file with pyarrow only.

A dataset does not say which units its joint values are in; the recording's contract does
(``units: radians | degrees | normalized``, with a calibration for normalized). ``to_radians`` takes
either a unit name or the contract's per-value ``(scale, offset)``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

UNITS = ("radians", "degrees", "normalized")
_INFO = "meta/info.json"
_FRAME_COLUMNS = ("timestamp", "frame_index", "episode_index", "index", "task_index")
_DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"


class DatasetActionsError(ValueError):
    """A dataset, episode or feature that cannot be read; the message names which and why."""


@dataclass(frozen=True)
class EpisodeActions:
    root: Path
    episode_index: int
    feature: str
    fps: float
    names: tuple[str, ...]  # joint names, without LeRobot's ".pos" suffix
    values: np.ndarray  # (frames, joints) float64, in the dataset's units
    timestamps: np.ndarray  # (frames,) s from the episode start

    @property
    def num_frames(self) -> int:
        return int(self.values.shape[0])


def joint_name(feature_name: str) -> str:
    """``shoulder_pan.pos`` -> ``shoulder_pan`` (LeRobot's motor feature names)."""
    return feature_name[: -len(".pos")] if feature_name.endswith(".pos") else feature_name


def read_info(root: str | Path) -> dict:
    root = Path(root)
    if not root.is_dir():
        raise DatasetActionsError(f"dataset {str(root)!r} does not exist (or is not a folder)")
    path = root / _INFO
    if not path.is_file():
        raise DatasetActionsError(f"{str(root)!r} is not a LeRobot dataset: {_INFO} is missing")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DatasetActionsError(f"{path}: cannot read it as JSON ({exc})") from exc


def episode_indices(root: str | Path) -> list[int]:
    """The episode indices recorded in ``meta/episodes/`` (sorted)."""
    import pyarrow.parquet as pq

    files = sorted((Path(root) / "meta" / "episodes").glob("chunk-*/file-*.parquet"))
    out: list[int] = []
    for f in files:
        out += pq.read_table(f, columns=["episode_index"]).column("episode_index").to_pylist()
    return sorted(out)


def _episode_row(root: Path, episode_index: int) -> dict:
    import pyarrow.parquet as pq

    for f in sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet")):
        table = pq.read_table(f, filters=[("episode_index", "=", episode_index)])
        if table.num_rows:
            return {name: table.column(name)[0].as_py() for name in table.column_names}
    indices = episode_indices(root)
    have = f"episodes {indices[0]}..{indices[-1]}" if indices else "no episodes"
    raise DatasetActionsError(f"episode {episode_index} is not in {str(root)!r} (it has {have})")


def load_episode_actions(root: str | Path, episode_index: int, feature: str = "action") -> EpisodeActions:
    """The ``feature`` column (default ``action``) of one episode, in frame order."""
    import pyarrow.parquet as pq

    root = Path(root)
    info = read_info(root)
    features = info.get("features", {})
    if feature not in features:
        vectors = sorted(
            k
            for k, v in features.items()
            if v.get("dtype") in ("float32", "float64") and k not in _FRAME_COLUMNS
        )
        raise DatasetActionsError(
            f"{str(root)!r} has no feature {feature!r} (its vector features: {vectors})"
        )
    spec = features[feature]
    names = spec.get("names") or [f"joint_{i}" for i in range(int(spec["shape"][0]))]
    if isinstance(names, dict):  # LeRobot v2 style {"motors": [...]}
        names = next(iter(names.values()))
    if episode_index < 0:
        raise DatasetActionsError(f"episode {episode_index}: episode indices start at 0")
    row = _episode_row(root, episode_index)
    template = info.get("data_path") or _DATA_PATH
    path = root / template.format(chunk_index=row["data/chunk_index"], file_index=row["data/file_index"])
    if not path.is_file():
        raise DatasetActionsError(f"episode {episode_index}: its data file {path} is missing")
    table = pq.read_table(
        path,
        columns=["episode_index", "frame_index", "timestamp", feature],
        filters=[("episode_index", "=", episode_index)],
    )
    if table.num_rows == 0:
        raise DatasetActionsError(f"episode {episode_index}: no rows in {path}")
    order = np.argsort(np.asarray(table.column("frame_index").to_numpy()), kind="stable")
    values = np.asarray(table.column(feature).to_pylist(), dtype=np.float64)[order]
    if values.ndim != 2 or values.shape[1] != len(names):
        raise DatasetActionsError(
            f"{path}: {feature} has shape {values.shape}, but meta/info.json names {len(names)} values"
        )
    return EpisodeActions(
        root=root,
        episode_index=episode_index,
        feature=feature,
        fps=float(info["fps"]),
        names=tuple(joint_name(n) for n in names),
        values=values,
        timestamps=np.asarray(table.column("timestamp").to_numpy(), dtype=np.float64)[order],
    )


def to_radians(
    values: np.ndarray,
    units: str = "radians",
    scale: np.ndarray | None = None,
    offset: np.ndarray | None = None,
) -> np.ndarray:
    """Stored joint values -> radians.

    ``units`` radians or degrees converts directly; otherwise give the contract's per-value
    ``(scale, offset)`` (``stored = radians * scale + offset``, ``Contract.unit_conversion``), which
    covers normalized units with their calibration ranges too.
    """
    values = np.asarray(values, dtype=np.float64)
    if scale is not None:
        scale = np.asarray(scale, dtype=np.float64)
        offset = np.zeros_like(scale) if offset is None else np.asarray(offset, dtype=np.float64)
        if scale.shape != values.shape[-1:]:
            raise DatasetActionsError(
                f"unit conversion has {scale.size} values, the data has {values.shape[-1]}"
            )
        return (values - offset) / scale
    if units == "radians":
        return values.copy()
    if units == "degrees":
        return values * (math.pi / 180.0)
    if units == "normalized":
        raise DatasetActionsError(
            "units 'normalized' need the calibration ranges of the recording's contract to go back to radians"
        )
    raise DatasetActionsError(f"units {units!r}: use one of {UNITS}")
