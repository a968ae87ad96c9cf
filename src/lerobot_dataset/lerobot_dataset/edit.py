"""Dataset edits into a new folder: per-frame features added at a constant value; frames filtered.

add_constant_features. Use: demonstrations recorded without the HIL extras (``complementary_info.is_intervention``, ...) get
them with the value a demonstration recorded through the HIL contract has (the human drove every
frame), so HIL episodes can then be resumed into the copy (DatasetWriter.resume / the recorder's
``resume``), which requires equal features. The added columns, their per-episode statistics in
meta/episodes and their aggregate in meta/stats.json are those the writer would have written, so
episodes appended later have the same metadata schema (LeRobot reads every meta/episodes file with
one schema).

keep_frames. Use: HG-DAgger trains on the frames a human drove only (``complementary_info.is_intervention``).
The copy is written by DatasetWriter, so frame_index / index / timestamp, episode_index, meta/episodes,
info.json's totals and the statistics are those of a dataset recorded with just the kept frames.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import format as fmt
from .depth import DepthQuantizer, is_depth_feature
from .errors import DatasetError
from .reader import DatasetReader
from .stats import aggregate_stats, flatten_episode_stats, numeric_stats, stats_from_json, stats_to_json
from .storage import JOURNAL, WORK_DIR, write_json_file
from .tables import episode_files, load_info, load_stats, write_parquet
from .writer import DatasetWriter, recorded_video_settings

_NUMPY = {
    "bool": np.bool_,
    "int64": np.int64,
    "int32": np.int32,
    "float32": np.float32,
    "float64": np.float64,
}


def add_constant_features(
    src: str | os.PathLike, dst: str | os.PathLike, features: Mapping[str, tuple[Mapping, object]]
) -> dict:
    """Copy dataset `src` to the new folder `dst` with each of `features` (name -> (LeRobot feature spec,
    value)) added to every frame at `value`. Scalar features only (shape (1,)). Returns dst's info."""
    src, dst = Path(src), Path(dst)
    info = load_info(src)
    if (src / WORK_DIR / JOURNAL).exists():
        raise DatasetError(f"{src}: an episode save was interrupted mid-commit; complete it first")
    if dst.exists():
        raise DatasetError(f"{dst} exists; give a new folder for the copy")
    specs = fmt.normalize_features({k: spec for k, (spec, _) in features.items()})
    for key, spec in specs.items():
        if key in info["features"]:
            raise DatasetError(f"{src}: already has feature {key!r}")
        if spec["shape"] != (1,) or spec["dtype"] not in _NUMPY:
            raise DatasetError(f"feature {key!r}: only scalar numeric features (shape (1,)), got {spec}")
    for key, (_, v) in features.items():
        try:
            finite = bool(np.isfinite(np.asarray(v, dtype=np.float64)).all())
        except (TypeError, ValueError):
            finite = False
        if not finite:
            raise DatasetError(f"feature {key!r}: value {v!r} is not a finite number")
    values = {k: np.asarray(v, dtype=_NUMPY[specs[k]["dtype"]]) for k, (_, v) in features.items()}

    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(WORK_DIR))
    try:
        old = fmt.features_from_info(info)
        user = {k: v for k, v in old.items() if k not in fmt.DEFAULT_FEATURES}
        new = fmt.all_features({**user, **specs})
        schema = fmt.data_schema(new)
        for path in sorted((dst / fmt.DATA_DIR).glob("chunk-*/file-*.parquet")):
            table = pq.read_table(path)
            n = table.num_rows
            cols = {name: table.column(name) for name in table.column_names}
            cols.update(
                {k: pa.array(np.full(n, v), type=fmt.arrow_type(specs[k])) for k, v in values.items()}
            )
            arrays = [cols[f.name].cast(f.type) for f in schema]
            write_parquet(pa.Table.from_arrays(arrays, schema=schema), path)

        episode_stats = []
        for path in episode_files(dst):
            table = pq.read_table(path)
            rows = []
            for length in table.column("length").to_pylist():
                ep = {k: numeric_stats(np.full(int(length), v)) for k, v in values.items()}
                episode_stats.append(ep)
                rows.append(flatten_episode_stats(ep))
            added = pa.Table.from_pylist(rows)
            for name in added.column_names:
                table = table.append_column(name, added.column(name))
            write_parquet(table, path)

        stats = stats_from_json(load_stats(dst) or {})
        if episode_stats:
            stats.update(aggregate_stats(episode_stats))
        write_json_file(dst / fmt.STATS_PATH, stats_to_json(stats))
        info = dict(info)
        info["features"] = {
            k: info["features"].get(k)
            or {"dtype": v["dtype"], "shape": list(v["shape"]), "names": v["names"]}
            for k, v in new.items()
        }
        write_json_file(dst / fmt.INFO_PATH, info)
    except BaseException:
        shutil.rmtree(dst, ignore_errors=True)
        raise
    return info


def keep_frames(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    keep: Callable[[Mapping[str, np.ndarray]], np.ndarray],
    video: Mapping[str, object] | None = None,
) -> dict:
    """Copy dataset `src` to the new folder `dst` with only the frames `keep` selects.

    `keep(columns)` gets one episode's columns (DatasetReader.episode: name -> array, vector features
    (N, D), "task" texts) and returns N bools, one per frame. Each run of consecutive kept frames becomes
    its own episode: a dropped stretch is a jump in time that no frame of a kept episode may straddle
    (LeRobot's action chunks and delta timestamps read neighbouring frames). Video features are decoded
    frame by frame and the kept frames encoded again by the writer with `video` (DatasetWriter.create's
    vcodec / crf / g / preset / pix_fmt; default: the source's codec and pixel format at LeRobot's
    other settings, as DatasetWriter.resume takes them): one
    more lossy generation, at the codec's speed. Per-frame image features (dtype "image") are refused.

    Returns {"info": dst's info.json, "episodes": [(source episode, first frame, frames), ...] in the
    order of dst's episodes}.
    """
    src, dst = Path(src), Path(dst)
    if dst.exists():
        raise DatasetError(f"{dst} exists; give a new folder for the copy")
    reader = DatasetReader(src)
    images = [k for k, f in reader.features.items() if f["dtype"] == "image"]
    if images:
        raise DatasetError(
            f"{src}: keep_frames cuts video features, not per-frame image features ({', '.join(images)})"
        )
    info = reader.info
    # without the source's video info: the writer records that of the videos it encodes (a depth
    # camera keeps its flag, unit and quantiser: its frames are re-encoded to the same codes)
    user = {
        k: {key: v for key, v in f.items() if key != "info"}
        for k, f in reader.features.items()
        if k not in fmt.DEFAULT_FEATURES
    }
    depth_units = {}
    for k in user:
        if is_depth_feature(reader.features[k]):
            quantizer = DepthQuantizer.from_info(reader.features[k]["info"])
            user[k]["info"] = quantizer.info()
            depth_units[k] = quantizer.unit
    cameras = [k for k in user if user[k]["dtype"] == fmt.VIDEO_DTYPE]
    columns_of = [k for k in user if k not in cameras]
    runs = []  # (source episode, its columns, [(first kept frame, end), ...]) for episodes with any
    for e in range(reader.num_episodes):
        columns = reader.episode(e)
        n = len(columns["frame_index"])
        mask = np.asarray(keep(columns))
        if mask.dtype != np.bool_ or mask.shape != (n,):
            raise DatasetError(
                f"keep_frames: the predicate must return {n} bools for episode {e}, got {mask.dtype} {mask.shape}"
            )
        # starts and ends of the runs of True: the edges of the mask padded with False on both sides
        edges = np.flatnonzero(np.diff(np.concatenate(([False], mask, [False])).astype(np.int8)))
        if len(edges):
            runs.append(
                (e, columns, [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True)])
            )
    if not runs:
        raise DatasetError(f"keep_frames: no frame of {src} matches; nothing to write to {dst}")

    vcodec, pix_fmt = recorded_video_settings(info)
    writer = DatasetWriter.create(
        dst,
        fps=reader.fps,
        features=user,
        robot_type=info.get("robot_type"),
        chunks_size=info.get("chunks_size", fmt.DEFAULT_CHUNK_SIZE),
        data_files_size_in_mb=info.get("data_files_size_in_mb", fmt.DEFAULT_DATA_FILE_SIZE_IN_MB),
        video_files_size_in_mb=info.get("video_files_size_in_mb", fmt.DEFAULT_VIDEO_FILE_SIZE_IN_MB),
        **{"vcodec": vcodec, "pix_fmt": pix_fmt, **dict(video or {})},
    )
    try:
        for e, columns, spans in runs:
            frames = {k: reader.iter_video_frames(k, e) for k in cameras}
            try:
                nxt = 0  # the frame every camera's iterator yields next
                for a, b in spans:
                    for i in range(nxt, b):
                        images = {k: _next_frame(frames[k], src, e, k, i) for k in cameras}
                        for k, unit in depth_units.items():  # depth decodes as float32 in its unit
                            images[k] = np.rint(images[k]).astype(np.uint16) if unit == "mm" else images[k]
                        if i >= a:
                            row = {k: columns[k][i] for k in columns_of}
                            writer.add_frame({**row, **images}, task=str(columns["task"][i]))
                    nxt = b
                    writer.save_episode()
            finally:
                for it in frames.values():
                    it.close()  # closes the video file (the rest of the episode is not decoded)
        writer.finalize()
    except BaseException:
        writer.finalize(on_pending="discard")
        shutil.rmtree(dst, ignore_errors=True)
        raise
    return {"info": load_info(dst), "episodes": [(e, a, b - a) for e, _, spans in runs for a, b in spans]}


def _next_frame(frames: Iterator[np.ndarray], src: Path, episode: int, camera: str, index: int) -> np.ndarray:
    frame = next(frames, None)
    if frame is None:
        raise DatasetError(
            f"{src}: episode {episode}: camera {camera!r} has no frame {index} (its video is shorter than "
            "the episode's rows; lerobot-dataset-info --check tells more)"
        )
    return frame
