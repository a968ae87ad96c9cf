"""One episode's action (or state) column of a LeRobotDataset v3.0, and its units back to radians.

What replaying an episode on a robot needs: the actions, the fps and the joint names, read through
the dataset reader (errors name the dataset, the episode or the feature, for the replay's flags).

A dataset does not say which units its joint values are in; the recording's contract does
(``units: radians | degrees | normalized``, with a calibration for normalized). ``to_radians`` takes
either a unit name or the contract's per-value ``(scale, offset)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import DatasetError
from .format import DEFAULT_FEATURES
from .reader import DatasetReader

UNITS = ("radians", "degrees", "normalized")


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


def load_episode_actions(root: str | Path, episode_index: int, feature: str = "action") -> EpisodeActions:
    """The ``feature`` column (default ``action``) of one episode, in frame order."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"dataset {str(root)!r} does not exist (or is not a folder)")
    reader = DatasetReader(root)
    if feature not in reader.features:
        vectors = sorted(
            k
            for k, v in reader.features.items()
            if v.get("dtype") in ("float32", "float64") and k not in DEFAULT_FEATURES
        )
        raise DatasetError(f"{str(root)!r} has no feature {feature!r} (its vector features: {vectors})")
    spec = reader.features[feature]
    names = spec.get("names") or [f"joint_{i}" for i in range(int(spec["shape"][0]))]
    if isinstance(names, dict):  # LeRobot v2 style {"motors": [...]}
        names = next(iter(names.values()))
    if episode_index < 0:
        raise DatasetError(f"episode {episode_index}: episode indices start at 0")
    if episode_index >= reader.num_episodes:
        have = f"episodes 0..{reader.num_episodes - 1}" if reader.num_episodes else "no episodes"
        raise DatasetError(f"episode {episode_index} is not in {str(root)!r} (it has {have})")
    table = reader.episode_table(episode_index)
    order = np.argsort(np.asarray(table.column("frame_index").to_numpy()), kind="stable")
    values = np.asarray(table.column(feature).to_pylist(), dtype=np.float64)[order]
    if values.ndim != 2 or values.shape[1] != len(names):
        raise DatasetError(
            f"{root}: {feature} has shape {values.shape}, but meta/info.json names {len(names)} values"
        )
    return EpisodeActions(
        root=root,
        episode_index=episode_index,
        feature=feature,
        fps=float(reader.info["fps"]),
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
            raise DatasetError(f"unit conversion has {scale.size} values, the data has {values.shape[-1]}")
        return (values - offset) / scale
    if units == "radians":
        return values.copy()
    if units == "degrees":
        return values * (math.pi / 180.0)
    if units == "normalized":
        raise DatasetError(
            "units 'normalized' need the calibration ranges of the recording's contract to go back to radians"
        )
    raise DatasetError(f"units {units!r}: use one of {UNITS}")
