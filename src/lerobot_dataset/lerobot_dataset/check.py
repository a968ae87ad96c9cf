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
  * every video file exists, opens and decodes to exactly `length` frames in the episode's span,
    holds no frames beyond its episodes' spans, and has the height x width its feature declares;
    front and wrist files swapped show up by their resolution or, when decoding, by their mean colour
    against the per-episode image statistics stored in meta/episodes;
  * info.json names its data_path (and video_path when there are cameras); every feature's shape
    matches its parquet column; no NaN or inf in float features; meta/stats.json is there and its
    frame counts cover every row (a partial rebuild counts fewer);
  * at least one episode (a recorder killed before its first save leaves none; LeRobot cannot load
    that). `allow_empty=True` accepts it: appending to it is fine.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import format as fmt
from .errors import DatasetError
from .mp4 import count_frames
from .tables import load_episodes, load_info, load_stats, load_tasks

# LeRobot's tolerance for timestamps (tolerance_s in LeRobotDataset).
TIMESTAMP_TOLERANCE_S = 1e-4

_REQUIRED_COLUMNS = ("index", "episode_index", "frame_index", "timestamp", "task_index")


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def check_dataset(
    root: str | Path, decode_videos: bool = True, allow_empty: bool = False, videos: str = "decode"
) -> list[str]:
    """Problems found in the dataset at `root` (empty list = LeRobot can load every frame).

    ``videos``: "decode" decodes every frame of every episode (what --check does); "demux" counts each
    episode's packets without decoding (what resume does: every file opened, every frame accounted
    for, ~20x faster; a frame whose bits are damaged inside an intact file is only found by decoding).
    """
    if videos not in ("decode", "demux"):
        raise ValueError(f"videos must be 'decode' or 'demux', got {videos!r}")
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
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return [f"{fmt.INFO_PATH}: missing or malformed field ({_describe(exc)})"]
    for name, needed in (("data_path", True), ("video_path", bool(fmt.video_keys(features)))):
        if needed and not (isinstance(info.get(name), str) and info[name]):
            problems.append(
                f"{fmt.INFO_PATH}: {name} is {info.get(name)!r}; LeRobot builds every file name from it "
                f"(expected a template like {getattr(fmt, name.upper())!r})"
            )
    if total_episodes == 0 and not allow_empty:
        problems.append(
            f"{fmt.INFO_PATH}: the dataset holds no episodes (a recorder stopped before its first save); "
            "LeRobot cannot load it: record into it with resume, or delete the folder"
        )
    try:
        tasks = load_tasks(root)
        if not tasks and total_episodes > 0:
            problems.append(f"{fmt.TASKS_PATH}: missing or empty, but {total_episodes} episodes have tasks")
            tasks = None
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

    problems += _check_stats(root, features, total_frames, total_episodes)
    problems += _check_data(root, episodes, fps, total_frames, tasks, features)
    if decode_videos:
        means: dict[tuple[int, str], np.ndarray] = {}
        keys = fmt.video_keys(features)
        for key in keys:
            problems += _check_videos(root, key, episodes, fps, features[key], videos == "decode", means)
        problems += _check_fingerprints(root, keys, means)
    return problems


def _check_stats(root: Path, features: dict, total_frames: int, total_episodes: int) -> list[str]:
    """meta/stats.json is what training normalizes with: it must be there and cover every frame."""
    if total_episodes == 0:
        return []
    try:
        stats = load_stats(root)
    except Exception as exc:
        return [f"{fmt.STATS_PATH}: cannot read ({_describe(exc)})"]
    if stats is None:
        return [f"{fmt.STATS_PATH}: missing (training normalizes with it)"]
    problems = []
    for key in fmt.data_keys(features):
        if key in fmt.DEFAULT_FEATURES or features[key]["dtype"] == "string":
            continue
        if key not in stats:
            problems.append(f"{fmt.STATS_PATH}: no statistics for {key}")
            continue
        count = stats[key].get("count") if isinstance(stats[key], dict) else None
        try:
            counted = int(np.asarray(count).reshape(-1)[0]) if count is not None else None
        except (TypeError, ValueError, IndexError):
            counted = None
        if counted is not None and counted != total_frames:
            problems.append(
                f"{fmt.STATS_PATH}: {key} statistics count {counted} frames, the dataset has {total_frames}"
            )
    return problems


def _row_width(column: pa.ChunkedArray) -> set[int]:
    """Element counts per row of a parquet column: {1} for scalars, the list lengths otherwise."""
    t = column.type
    if pa.types.is_fixed_size_list(t):
        return {t.list_size}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        import pyarrow.compute as pc

        return {int(x) for x in np.unique(pc.list_value_length(column).to_numpy(zero_copy_only=False))}
    return {1}


def _float_values(column: pa.ChunkedArray) -> np.ndarray | None:
    """All numbers of a float column (lists flattened), or None for other types."""
    t = column.type
    while pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        t = t.value_type
    if not pa.types.is_floating(t):
        return None
    arr = column.combine_chunks()
    while hasattr(arr, "flatten") and not pa.types.is_floating(arr.type):
        arr = arr.flatten()
    return arr.to_numpy(zero_copy_only=False)


def _check_columns(table: pa.Table, rel: str, names: str, features: dict) -> list[str]:
    """Each feature's column is there with the shape info.json declares."""
    problems = []
    for key in fmt.data_keys(features):
        if key in fmt.DEFAULT_FEATURES:
            continue
        ft = features[key]
        if key not in table.column_names:
            problems.append(f"episodes {names}: data file {rel} lacks the column of feature {key}")
            continue
        if ft["dtype"] == "string":
            continue
        want = int(np.prod(ft["shape"])) if len(ft["shape"]) else 1
        got = _row_width(table.column(key))
        if got != {want}:
            problems.append(
                f"feature {key}: {fmt.INFO_PATH} says shape {list(ft['shape'])} but {rel} stores "
                f"{sorted(got)} value(s) per row"
            )
    return problems


def _check_data(
    root: Path, episodes: list[dict], fps: int, total_frames: int, tasks, features: dict
) -> list[str]:
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
        problems += _check_columns(table, rel, names, features)
        cols = {c: table.column(c).to_numpy() for c in _REQUIRED_COLUMNS}
        floats = {}
        for key in fmt.data_keys(features):
            if key in table.column_names and key not in fmt.DEFAULT_FEATURES:
                values = _float_values(table.column(key))
                if values is not None and len(values) % max(table.num_rows, 1) == 0:
                    floats[key] = values.reshape(table.num_rows, -1)
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
            for key, values in floats.items():
                bad_rows = np.nonzero(~np.isfinite(values[sel]).all(axis=1))[0]
                if len(bad_rows):
                    problems.append(
                        f"{where}: {key} has non-finite values (NaN or inf) in {len(bad_rows)} rows, "
                        f"first at frame_index {int(frame_index[bad_rows[0]])}"
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


def _count_in_span(
    path: Path, lo: float, hi: float, fps: int, decode: bool, sample_every: int = 0
) -> tuple[int, np.ndarray | None]:
    """Frames (decoded) or packets (demuxed) whose timestamps lie in [lo, hi), as iter_frames places
    them, and (decoding, with ``sample_every``) the mean RGB in [0, 1] of every sample_every-th frame."""
    import av

    half = 0.5 / fps
    n = 0
    sums, sampled = np.zeros(3), 0
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        if decode:
            stream.thread_type = "AUTO"
            if lo > 0:
                container.seek(int(max(0.0, lo - half) / stream.time_base), stream=stream, backward=True)
            for frame in container.decode(stream):
                t = float(frame.pts * stream.time_base)
                if t >= hi - half:
                    break
                if t >= lo - half:
                    if sample_every and n % sample_every == 0:
                        sums += frame.to_ndarray(format="rgb24").reshape(-1, 3).mean(axis=0) / 255.0
                        sampled += 1
                    n += 1
        else:
            for packet in container.demux(stream):
                if packet.pts is None or packet.size == 0:
                    continue
                t = float(packet.pts * stream.time_base)
                n += lo - half <= t < hi - half
    return n, (sums / sampled if sampled else None)


# A camera's decoded frames whose mean colour is this far from its own stored statistics, and this
# close to another camera's, are that camera's file (the stats are of the frames before encoding,
# over sampled pixels: a few thousandths apart for the right file).
_OWN_MEAN_FAR, _OTHER_MEAN_NEAR = 0.05, 0.02


def _check_fingerprints(root: Path, keys: list[str], decoded: dict) -> list[str]:
    """Camera files swapped between features of one resolution: their stored mean colours say so."""
    if len(keys) < 2 or not decoded:
        return []
    try:
        stored = {}
        for e in load_episodes(root, with_stats=True):
            for key in keys:
                mean = e.get(f"stats/{key}/mean")
                if mean is not None:
                    stored[(int(e["episode_index"]), key)] = np.asarray(mean, dtype=np.float64).reshape(-1)[
                        :3
                    ]
    except Exception:  # the statistics are optional for this: the other checks report damage
        return []
    problems = []
    for (ep, key), got in sorted(decoded.items()):
        own = stored.get((ep, key))
        if own is None or len(own) != 3 or np.abs(got - own).max() <= _OWN_MEAN_FAR:
            continue
        like = [
            k
            for k in keys
            if k != key
            and stored.get((ep, k)) is not None
            and len(stored[(ep, k)]) == 3
            and np.abs(got - stored[(ep, k)]).max() <= _OTHER_MEAN_NEAR
        ]
        if like:
            problems.append(
                f"episode {ep}, camera {key}: its video looks like camera {like[0]}'s (mean colour "
                f"{np.round(got, 3).tolist()}, recorded {np.round(own, 3).tolist()} for {key} and "
                f"{np.round(stored[(ep, like[0])], 3).tolist()} for {like[0]}): front and wrist files swapped?"
            )
    return problems


def _check_videos(
    root: Path, key: str, episodes: list[dict], fps: int, feature: dict, decode: bool = True, means=None
) -> list[str]:
    problems: list[str] = []
    broken: set[str] = set()
    in_file: dict[str, int] = {}  # frames the episodes place in each file
    names: dict[str, list[int]] = {}
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
            n, mean = _count_in_span(root / rel, lo, hi, fps, decode, max(1, length // 8))
            if mean is not None and means is not None:
                means[(ep, key)] = mean
        except Exception as exc:  # truncated/corrupt mp4: PyAV raises many kinds
            problems.append(f"{where}: video does not {'decode' if decode else 'open'} ({_describe(exc)})")
            broken.add(rel)
            continue
        if n != length:
            what = "decodes" if decode else "holds"
            problems.append(f"{where}: {what} {n} frames in {lo:.4f}..{hi:.4f} s for {length} rows")
        in_file[rel] = max(in_file.get(rel, 0), int(round(hi * fps)))
        names.setdefault(rel, []).append(ep)
    for rel, spanned in in_file.items():
        if rel in broken:
            continue
        where = f"camera {key}, file {rel} (episodes {', '.join(map(str, names[rel]))})"
        try:
            held = count_frames(root / rel)
            h, w = _resolution(root / rel)
        except Exception as exc:
            problems.append(f"{where}: does not open ({_describe(exc)})")
            continue
        if held > spanned:
            problems.append(
                f"{where}: holds {held} frames but its episodes span {spanned} (another recording's file?)"
            )
        shape = tuple(feature.get("shape") or ())
        if len(shape) == 3 and (h, w) != (int(shape[0]), int(shape[1])):
            problems.append(
                f"{where}: is {w}x{h} but feature {key} is {shape[1]}x{shape[0]} "
                "(another camera's file, e.g. front and wrist swapped?)"
            )
    return problems


def _resolution(path: Path) -> tuple[int, int]:
    import av

    with av.open(str(path)) as container:
        cc = container.streams.video[0].codec_context
        return int(cc.height), int(cc.width)


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
