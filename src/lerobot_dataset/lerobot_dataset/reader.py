"""Reader for LeRobotDataset v3.0 folders (ours and LeRobot's), with pyarrow and PyAV only."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import format as fmt
from .check import data_row_count
from .depth import DepthQuantizer, is_depth_feature
from .errors import DatasetError
from .mp4 import decode_range, iter_frames
from .stats import stats_from_json
from .storage import JOURNAL, WORK_DIR
from .tables import load_episodes, load_info, load_stats, load_tasks


class DatasetReader:
    """Random access to frames and episodes of a dataset on disk.

    `r[i]` returns frame i as a dict (numeric features as numpy arrays, default columns as ints /
    floats, "task" as text, cameras as HxWx3 uint8); `r.episode(e)` returns an episode's columns.
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        if (self.root / WORK_DIR / JOURNAL).exists():
            raise DatasetError(
                f"{self.root}: an episode save was interrupted mid-commit; complete it first: "
                f"`lerobot-dataset-info --repair {self.root}` (reopens it for writing once)"
            )
        self.info = load_info(self.root)
        self.features = fmt.features_from_info(self.info)
        self.fps = int(self.info["fps"])
        self.video_keys = fmt.video_keys(self.features)
        self.tasks = load_tasks(self.root)
        self.episodes = load_episodes(self.root)
        raw = load_stats(self.root)
        self.stats = stats_from_json(raw) if raw else None
        if len(self.episodes) != int(self.info["total_episodes"]):
            raise DatasetError(
                f"{self.root}: meta/info.json lists {self.info['total_episodes']} episodes but meta/episodes "
                f"has {len(self.episodes)} (not finalized, or an interrupted save): "
                f"`lerobot-dataset-info --repair {self.root}` (reopens it for writing once)"
            )
        self._tables: dict[tuple[int, int], pa.Table] = {}
        self._video_cache: tuple[str, int, np.ndarray] | None = None
        self._num_rows: int | None = None

    # -------------------------------------------------------------------------------- overview
    @property
    def num_episodes(self) -> int:
        return len(self.episodes)

    @property
    def num_frames(self) -> int:
        """Rows the data parquet files really hold (their footers), not what info.json claims.

        A dataset whose info.json disagrees is damaged: `lerobot-dataset-info --check` says how.
        """
        if self._num_rows is None:
            self._num_rows = data_row_count(self.root, self.episodes)
        return self._num_rows

    def __len__(self) -> int:
        return self.num_frames

    @property
    def camera_keys(self) -> list[str]:
        return list(self.video_keys)

    def episode_meta(self, episode_index: int) -> dict:
        self._check_episode(episode_index)
        return self.episodes[episode_index]

    def episode_stats(self, episode_index: int) -> dict:
        """Per-episode stats from the `stats/<feature>/<stat>` columns of meta/episodes."""
        self._check_episode(episode_index)
        meta = self.episodes[episode_index]
        path = self.root / fmt.episodes_path(
            meta["meta/episodes/chunk_index"], meta["meta/episodes/file_index"]
        )
        table = pq.read_table(path, filters=[("episode_index", "=", episode_index)])
        out: dict[str, dict[str, np.ndarray]] = {}
        for name in table.column_names:
            if name.startswith("stats/"):
                feature, stat = name[len("stats/") :].rsplit("/", 1)
                out.setdefault(feature, {})[stat] = np.asarray(table.column(name)[0].as_py())
        return out

    # ------------------------------------------------------------------------------------ data
    def _check_episode(self, episode_index: int) -> None:
        if not 0 <= episode_index < self.num_episodes:
            raise DatasetError(
                f"{self.root}: episode {episode_index} out of range 0..{self.num_episodes - 1}"
            )

    def _data_table(self, chunk: int, file: int) -> pa.Table:
        key = (int(chunk), int(file))
        if key not in self._tables:
            path = self.root / fmt.data_path(*key)
            try:
                self._tables[key] = pq.read_table(path)
            except (OSError, pa.ArrowException) as exc:
                raise DatasetError(f"{path}: cannot read data parquet ({exc})") from exc
        return self._tables[key]

    def episode_table(self, episode_index: int) -> pa.Table:
        meta = self.episode_meta(episode_index)
        table = self._data_table(meta["data/chunk_index"], meta["data/file_index"])
        idx = table.column("episode_index").to_numpy()
        rows = np.nonzero(idx == episode_index)[0]
        if len(rows) != meta["length"]:
            raise DatasetError(
                f"{self.root}: episode {episode_index} has {len(rows)} rows in "
                f"{fmt.data_path(meta['data/chunk_index'], meta['data/file_index'])}, metadata says {meta['length']}"
            )
        return table.take(pa.array(rows))

    def episode(self, episode_index: int) -> dict[str, np.ndarray]:
        """Columns of one episode as numpy arrays (vector features as (N, D)), plus "task" texts."""
        table = self.episode_table(episode_index)
        out: dict[str, np.ndarray] = {}
        for name in table.column_names:
            out[name] = _column_to_numpy(table.column(name), self.features.get(name))
        out["task"] = np.array([self._task(i) for i in out["task_index"]], dtype=object)
        return out

    def _task(self, task_index) -> str:
        try:
            return self.tasks[int(task_index)]
        except IndexError:
            raise DatasetError(
                f"{self.root}: task_index {int(task_index)} is not in meta/tasks.parquet "
                f"({len(self.tasks)} task(s){'' if self.tasks else ': the file is missing or empty'})"
            ) from None

    def iter_video_frames(self, key: str, episode_index: int) -> Iterator[np.ndarray]:
        """The episode's frames of camera `key` decoded one at a time (HxWx3 uint8): memory is one
        frame, whatever the episode's length."""
        if key not in self.video_keys:
            raise DatasetError(f"{self.root}: {key!r} is not a video feature ({self.video_keys})")
        meta = self.episode_meta(episode_index)
        path = self.root / fmt.video_path(
            key, meta[f"videos/{key}/chunk_index"], meta[f"videos/{key}/file_index"]
        )
        return iter_frames(
            path,
            float(meta[f"videos/{key}/from_timestamp"]),
            float(meta[f"videos/{key}/to_timestamp"]),
            self.fps,
            self.depth_quantizer(key),
        )

    def depth_quantizer(self, key: str) -> DepthQuantizer | None:
        """A depth camera's quantiser (its frames decode to depth in its unit), else None."""
        ft = self.features[key]
        return DepthQuantizer.from_info(ft.get("info")) if is_depth_feature(ft) else None

    def video_frames(self, key: str, episode_index: int) -> np.ndarray:
        """Decoded frames of camera `key` for the episode, (N, H, W, 3) uint8; a depth camera's as
        (N, H, W, 1) float32 depth in its recorded unit (info.depth_unit), as LeRobot 0.6 decodes it."""
        if key not in self.video_keys:
            raise DatasetError(f"{self.root}: {key!r} is not a video feature ({self.video_keys})")
        cache = self._video_cache
        if cache is not None and cache[0] == key and cache[1] == episode_index:
            return cache[2]
        meta = self.episode_meta(episode_index)
        path = self.root / fmt.video_path(
            key, meta[f"videos/{key}/chunk_index"], meta[f"videos/{key}/file_index"]
        )
        frames = decode_range(
            path,
            float(meta[f"videos/{key}/from_timestamp"]),
            float(meta[f"videos/{key}/to_timestamp"]),
            self.fps,
            self.depth_quantizer(key),
        )
        self._video_cache = (key, episode_index, frames)
        return frames

    def __getitem__(self, index: int) -> dict:
        if isinstance(index, (np.integer,)):
            index = int(index)
        if not isinstance(index, int):
            raise TypeError(f"frame index must be an int, got {type(index).__name__}")
        if index < 0:
            index += self.num_frames
        if not 0 <= index < self.num_frames:
            raise IndexError(f"frame {index} out of range 0..{self.num_frames - 1}")
        ep = self._episode_of(index)
        meta = self.episodes[ep]
        table = self._data_table(meta["data/chunk_index"], meta["data/file_index"])
        indices = table.column("index")
        guess = index - indices[0].as_py()  # files hold consecutive frames in index order
        if 0 <= guess < len(indices) and indices[guess].as_py() == index:
            pos = guess
        else:
            rows = np.nonzero(indices.to_numpy() == index)[0]
            if len(rows) != 1:
                raise DatasetError(
                    f"{self.root}: frame index {index} found {len(rows)} times in episode {ep}'s file"
                )
            pos = int(rows[0])
        row = table.slice(pos, 1)
        item: dict = {}
        for name in row.column_names:
            value = _column_to_numpy(row.column(name), self.features.get(name))[0]
            item[name] = value.item() if isinstance(value, np.generic) else value
        item["task"] = self._task(item["task_index"])
        frame_in_ep = int(item["frame_index"])
        for key in self.video_keys:
            frames = self.video_frames(key, ep)
            if frame_in_ep >= len(frames):
                raise DatasetError(
                    f"{self.root}: {key!r} episode {ep} decodes {len(frames)} frames, need {frame_in_ep + 1}"
                )
            item[key] = frames[frame_in_ep]
        return item

    def _episode_of(self, index: int) -> int:
        starts = getattr(self, "_starts", None)
        if starts is None:
            starts = self._starts = np.array([e["dataset_from_index"] for e in self.episodes], dtype=np.int64)
        return int(np.searchsorted(starts, index, side="right") - 1)


def _column_to_numpy(column: pa.ChunkedArray, feature: dict | None) -> np.ndarray:
    typ = column.type
    if pa.types.is_fixed_size_list(typ) or pa.types.is_list(typ) or pa.types.is_large_list(typ):
        combined = column.combine_chunks()
        if len(combined) == 0:
            return np.zeros((0, 0))
        flat = combined.flatten().to_numpy(zero_copy_only=False)
        return flat.reshape(len(combined), -1)
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return np.array(column.to_pylist(), dtype=object)
    return column.to_numpy()
