"""Whole-dataset consistency check: everything LeRobot's loader relies on, as readable problems.

`check_dataset(root)` never raises for a damaged dataset: every problem comes back as one line that
names the episode, camera and file involved. What is checked (LeRobot 0.4.4 indexes frames through
meta/episodes and the data parquet, and decodes video by timestamp, so any mismatch there becomes an
IndexError or a silently wrong frame at training time):

  * meta/info.json, meta/tasks.parquet and meta/episodes open; total_episodes and total_frames equal
    what meta/episodes and the data parquet files actually hold;
  * episode_index 0..N-1; dataset_from_index/to_index contiguous and equal to the lengths;
  * every data parquet file exists and opens; per episode its rows == meta/episodes length, `index`
    runs from dataset_from_index without gaps, frame_index is 0..length-1, timestamp ==
    frame_index / fps, task_index names a task; no rows belong to no episode;
  * every video file exists, opens and decodes to exactly `length` frames in the episode's span.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import format as fmt
from .errors import DatasetError
from .tables import load_episodes, load_info, load_tasks
from .video import iter_frames

# LeRobot's tolerance for timestamps (tolerance_s in LeRobotDataset).
TIMESTAMP_TOLERANCE_S = 1e-4

_REQUIRED_COLUMNS = ("index", "episode_index", "frame_index", "timestamp", "task_index")


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def check_dataset(root: str | Path, decode_videos: bool = True) -> list[str]:
    """Problems found in the dataset at `root` (empty list = LeRobot can load every frame)."""
    root = Path(root)
    problems: list[str] = []
    try:
        info = load_info(root)
    except (DatasetError, OSError, ValueError) as exc:
        return [f"{fmt.INFO_PATH}: {exc}"]
    try:
        fps = int(info["fps"])
        features = fmt.features_from_info(info)
        total_episodes = int(info["total_episodes"])
        total_frames = int(info["total_frames"])
    except (KeyError, TypeError, ValueError) as exc:
        return [f"{fmt.INFO_PATH}: missing or malformed field ({_describe(exc)})"]
    try:
        tasks = load_tasks(root)
    except Exception as exc:  # any damage is a finding, never a traceback
        problems.append(f"{fmt.TASKS_PATH}: cannot read ({_describe(exc)})")
        tasks = None
    try:
        episodes = load_episodes(root)
    except Exception as exc:
        return [*problems, f"{fmt.EPISODES_DIR}: cannot read ({_describe(exc)})"]

    if len(episodes) != total_episodes:
        problems.append(
            f"{fmt.INFO_PATH}: total_episodes is {total_episodes} but {fmt.EPISODES_DIR} has {len(episodes)}"
        )
    indices = [int(e["episode_index"]) for e in episodes]
    if indices != list(range(len(episodes))):
        problems.append(f"{fmt.EPISODES_DIR}: episode_index values are not 0..{len(episodes) - 1}: {indices}")
    lengths_sum = sum(int(e["length"]) for e in episodes)
    if lengths_sum != total_frames:
        problems.append(
            f"{fmt.INFO_PATH}: total_frames is {total_frames} but the episodes' lengths add up to {lengths_sum}"
        )
    expect_from = 0
    for e in episodes:
        ep, length = int(e["episode_index"]), int(e["length"])
        lo, hi = int(e["dataset_from_index"]), int(e["dataset_to_index"])
        if lo != expect_from or hi - lo != length:
            problems.append(
                f"episode {ep}: dataset_from_index/to_index {lo}..{hi} for length {length}, "
                f"expected {expect_from}..{expect_from + length}"
            )
        expect_from = lo + length if lo == expect_from else expect_from + length

    problems += _check_data(root, episodes, fps, total_frames, tasks)
    if decode_videos:
        for key in fmt.video_keys(features):
            problems += _check_videos(root, key, episodes, fps)
    return problems


def _check_data(root: Path, episodes: list[dict], fps: int, total_frames: int, tasks) -> list[str]:
    problems: list[str] = []
    by_file: dict[tuple[int, int], list[dict]] = {}
    for e in episodes:
        by_file.setdefault((int(e["data/chunk_index"]), int(e["data/file_index"])), []).append(e)
    rows_total = 0
    for (chunk, file), eps in sorted(by_file.items()):
        rel = fmt.data_path(chunk, file)
        path = root / rel
        names = ", ".join(str(int(e["episode_index"])) for e in eps)
        if not path.exists():
            problems.append(f"episodes {names}: data file {rel} is missing")
            continue
        try:
            table = pq.read_table(path)
        except Exception as exc:  # truncated or garbage parquet
            problems.append(f"episodes {names}: data file {rel} does not open ({_describe(exc)})")
            continue
        missing = [c for c in _REQUIRED_COLUMNS if c not in table.column_names]
        if missing:
            problems.append(f"episodes {names}: data file {rel} lacks columns {missing}")
            continue
        rows_total += table.num_rows
        cols = {c: table.column(c).to_numpy() for c in _REQUIRED_COLUMNS}
        claimed = set()
        for e in eps:
            ep, length, lo = int(e["episode_index"]), int(e["length"]), int(e["dataset_from_index"])
            claimed.add(ep)
            sel = cols["episode_index"] == ep
            n = int(sel.sum())
            where = f"episode {ep}: {rel}"
            if n != length:
                problems.append(f"{where} has {n} rows, meta/episodes says length {length}")
                continue
            index = cols["index"][sel]
            if not np.array_equal(index, np.arange(lo, lo + length)):
                problems.append(f"{where}: index is not contiguous from {lo} ({_first_gap(index, lo)})")
            frame_index = cols["frame_index"][sel]
            if not np.array_equal(frame_index, np.arange(length)):
                problems.append(f"{where}: frame_index is not 0..{length - 1} ({_first_gap(frame_index, 0)})")
            ts = cols["timestamp"][sel].astype(np.float64)
            off = np.abs(ts - frame_index / fps)
            if len(off) and off.max() > TIMESTAMP_TOLERANCE_S:
                k = int(off.argmax())
                problems.append(
                    f"{where}: timestamp {ts[k]:.6f} at frame_index {int(frame_index[k])} != frame_index / fps "
                    f"= {frame_index[k] / fps:.6f}"
                )
            if tasks is not None:
                bad = sorted({int(t) for t in cols["task_index"][sel] if not 0 <= int(t) < len(tasks)})
                if bad:
                    problems.append(f"{where}: task_index {bad} not in {fmt.TASKS_PATH} ({len(tasks)} tasks)")
        stray = sorted(set(int(x) for x in np.unique(cols["episode_index"])) - claimed)
        if stray:
            problems.append(f"{rel}: rows of episodes {stray} that meta/episodes does not place in this file")
    if not problems and rows_total != total_frames:
        problems.append(
            f"{fmt.INFO_PATH}: total_frames is {total_frames} but the data files hold {rows_total} rows"
        )
    return problems


def _first_gap(values: np.ndarray, start: int) -> str:
    want = np.arange(start, start + len(values))
    bad = np.nonzero(values != want)[0]
    if not len(bad):
        return "ok"
    k = int(bad[0])
    return f"row {k}: {int(values[k])}, expected {int(want[k])}"


def _check_videos(root: Path, key: str, episodes: list[dict], fps: int) -> list[str]:
    problems: list[str] = []
    broken: set[str] = set()
    for e in episodes:
        ep, length = int(e["episode_index"]), int(e["length"])
        try:
            rel = fmt.video_path(key, int(e[f"videos/{key}/chunk_index"]), int(e[f"videos/{key}/file_index"]))
            lo = float(e[f"videos/{key}/from_timestamp"])
            hi = float(e[f"videos/{key}/to_timestamp"])
        except (KeyError, TypeError, ValueError) as exc:
            problems.append(
                f"episode {ep}, camera {key}: meta/episodes lacks its video columns ({_describe(exc)})"
            )
            continue
        where = f"episode {ep}, camera {key}, file {rel}"
        if rel in broken:
            problems.append(f"{where}: unreadable (see above)")
            continue
        if not (root / rel).exists():
            problems.append(f"{where}: video file is missing")
            broken.add(rel)
            continue
        try:
            n = sum(1 for _ in iter_frames(root / rel, lo, hi, fps))
        except Exception as exc:  # truncated/corrupt mp4: PyAV raises many kinds
            problems.append(f"{where}: video does not decode ({_describe(exc)})")
            broken.add(rel)
            continue
        if n != length:
            problems.append(f"{where}: decodes {n} frames in {lo:.4f}..{hi:.4f} s for {length} rows")
    return problems


def data_row_count(root: Path, episodes: list[dict]) -> int:
    """Rows actually stored in the data parquet files the episodes point to (parquet footers only)."""
    files = sorted({(int(e["data/chunk_index"]), int(e["data/file_index"])) for e in episodes})
    total = 0
    for chunk, file in files:
        path = root / fmt.data_path(chunk, file)
        try:
            total += pq.ParquetFile(path).metadata.num_rows
        except (OSError, pa.ArrowException) as exc:
            raise DatasetError(f"{path}: cannot read data parquet ({exc})") from exc
    return total
