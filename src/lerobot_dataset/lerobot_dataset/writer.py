"""Streaming LeRobotDataset v3.0 writer: frames in, parquet + mp4 out, every saved episode durable.

Frames go straight to one PyAV encoder thread per camera (no PNG round trip); numeric columns are
buffered in memory (a few bytes per frame). `save_episode()` closes the episode's mp4s, checks
that each holds exactly one frame per parquet row, then commits all changed files at once through
a journal (see storage.py), so a crash at any point leaves every earlier episode loadable.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import shutil
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa

from . import format as fmt
from .check import check_dataset
from .depth import (
    DEPTH_CRF,
    DEPTH_EXTRA_OPTIONS,
    DEPTH_G,
    DEPTH_MIN_LEROBOT,
    DEPTH_MIN_SIZE,
    DEPTH_PIX_FMT,
    DEPTH_VCODEC,
    X265_PRESETS,
    DepthQuantizer,
    check_lerobot_version,
    is_depth_feature,
)
from .encoders import (
    EncoderSettingError,
    check_encoder_settings,
    codec_options,
    describe_settings,
    encoder_pix_fmt,
    resolve_encoder,
)
from .errors import DatasetError
from .mp4 import concat_mp4, count_frames, video_info
from .stats import aggregate_stats, flatten_episode_stats, numeric_stats, stats_from_json, stats_to_json
from .storage import (
    WORK_DIR,
    Transaction,
    WriterLock,
    apply_journal,
    clear_staging,
    is_disk_full,
    write_json_file,
)
from .tables import (
    append_parquet,
    load_episodes,
    load_info,
    load_stats,
    load_tasks,
    tasks_table,
    write_parquet,
)
from .video import CameraEncoder

_LOG = logging.getLogger(__name__)

_CODEC_FROM_INFO = {"av1": "libsvtav1", "h264": "libx264", "hevc": "libx265", "vp9": "libvpx-vp9"}
BACKPRESSURE_MODES = ("block", "error")


def depth_encoder_options(preset: str | None = None) -> dict[str, str]:
    """LeRobot 0.6.1's depth encoder options (DepthEncoderConfig's defaults) as PyAV takes them;
    `preset` an x265 speed preset (lossless either way: the decoded codes do not depend on it)."""
    return {
        "g": str(DEPTH_G),
        "crf": str(DEPTH_CRF),
        **({"preset": preset} if preset else {}),
        **DEPTH_EXTRA_OPTIONS,
    }


def depth_cameras_need_06(features: Mapping[str, Mapping], lerobot_version: str) -> None:
    """DatasetError if `features` hold depth cameras and the dataset is for LeRobot 0.4.4, or a depth
    camera's images are smaller than libx265 encodes (16 x 16; it refuses 15 x 16 and 8 x 8)."""
    depth = [k for k, ft in features.items() if ft.get("dtype") == fmt.VIDEO_DTYPE and is_depth_feature(ft)]
    for key in depth:
        h, w = features[key]["shape"][:2]
        if min(h, w) < DEPTH_MIN_SIZE:
            raise DatasetError(
                f"depth camera {key!r}: images are {w}x{h}; LeRobot 0.6's depth codec (libx265) needs at "
                f"least {DEPTH_MIN_SIZE}x{DEPTH_MIN_SIZE}"
            )
    if depth and check_lerobot_version(lerobot_version) != DEPTH_MIN_LEROBOT:
        raise DatasetError(
            f"depth camera(s) {depth}: LeRobot {lerobot_version} has no depth video (it would read the "
            f"12-bit depth codes as a grey RGB image); depth is stored as LeRobot 0.6 stores it, so write "
            f"the dataset for LeRobot 0.6 (lerobot_version 0.6) or leave the depth camera out"
        )


def recorded_video_settings(info: Mapping) -> tuple[str, str]:
    """(encoder, pix_fmt) a dataset's RGB videos were written with, from its info.json (libsvtav1 and
    yuv420p, LeRobot's, when it records none). Depth videos have their own fixed settings."""
    feats = fmt.features_from_info(info)
    first = (
        next(
            (
                feats[k]["info"]
                for k in fmt.video_keys(feats)
                if (feats[k].get("info") or {}).get("video.codec") and not is_depth_feature(feats[k])
            ),
            None,
        )
        or {}
    )
    codec = first.get("video.codec", "av1")
    return _CODEC_FROM_INFO.get(codec, codec), first.get("video.pix_fmt", "yuv420p")


def _check_depth_preset(preset: str | None) -> str | None:
    if preset in (None, ""):
        return None
    if preset not in X265_PRESETS:
        raise DatasetError(
            f"depth_preset {preset!r} is not a libx265 preset; one of {', '.join(X265_PRESETS)}"
        )
    return preset


def _quiet_x265(options: Mapping[str, str]) -> dict[str, str]:
    """`options` with x265's per-episode info banner silenced (log level only: same bitstream)."""
    params = options.get("x265-params", "")
    return {**options, "x265-params": ":".join(p for p in (params, "log-level=error") if p)}


def _rgb_encoder_info(options: Mapping[str, str]) -> dict:
    """The encoder fields LeRobot 0.6.1 records for an RGB video, from the options we encoded with."""

    def value(key: str):
        v = options.get(key)
        return int(v) if isinstance(v, str) and v.lstrip("-").isdigit() else v

    return {
        "video.g": value("g"),
        "video.crf": value("crf"),
        "video.preset": value("preset"),
        "video.fast_decode": 0,
        "video.video_backend": "pyav",
        "video.extra_options": {},
    }


def _depth_encoder_info(preset: str | None) -> dict:
    """The encoder fields LeRobot 0.6.1 records for a depth video (``video.<DepthEncoderConfig field>``)."""
    return {
        "video.g": DEPTH_G,
        "video.crf": DEPTH_CRF,
        "video.preset": preset or None,
        "video.fast_decode": 0,
        "video.video_backend": "pyav",
        "video.extra_options": dict(DEPTH_EXTRA_OPTIONS),
    }


class _Column:
    """Growable (N, *shape) array for one numeric feature: a few bytes per frame, no per-frame objects."""

    def __init__(self, feature: Mapping):
        self._buf = np.empty((1024, *feature["shape"]), dtype=feature["dtype"])
        self._n = 0

    def append(self, value: np.ndarray) -> None:
        if self._n == len(self._buf):
            bigger = np.empty((2 * len(self._buf), *self._buf.shape[1:]), dtype=self._buf.dtype)
            bigger[: self._n] = self._buf
            self._buf = bigger
        self._buf[self._n] = value
        self._n += 1

    def values(self) -> np.ndarray:
        return self._buf[: self._n]


class _EncodedVideo:
    """Stands in for a CameraEncoder whose episode mp4 is already on disk (save_encoded_episode)."""

    class _Stats:
        def __init__(self, stats):
            self._stats = {k: np.asarray(v) for k, v in stats.items()} if stats else None

        def result(self):
            return self._stats

    def __init__(self, path: Path, stats: Mapping[str, np.ndarray] | None, frames: int):
        self.path = path
        self.stats = self._Stats(stats)
        self.frames_encoded = frames

    def finish(self) -> None:
        pass

    def cancel(self) -> None:
        pass


def _mb(path: Path) -> float:
    return path.stat().st_size / (1024**2)


def _free_mb(root: Path) -> float:
    try:
        return shutil.disk_usage(root).free / 1024**2
    except OSError:
        return float("nan")


def damaged_message(root: Path, problems: Sequence[str]) -> str:
    """Why a damaged dataset is refused for appending, and the commands that show and repair it."""
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return (
        f"{root}: refusing to append to a damaged dataset: {problems[0]}{more}. Nothing was changed. "
        f"`lerobot-dataset-info {root} --check` lists every problem; "
        f"`lerobot-dataset-info {root} --repair` repairs what can be repaired"
    )


class _RollingFile:
    """One kind of file that episodes are appended to (the data parquet, the episodes parquet, one
    camera's mp4) until the next episode would take it to its size limit; then the next (chunk, file)
    index starts a new file. Its indices are recorded in meta/episodes as ``<prefix>/chunk_index`` and
    ``<prefix>/file_index``."""

    def __init__(self, prefix: str, path: Callable[[int, int], str], limit_key: str):
        self.prefix = prefix
        self.path = path  # (chunk, file) -> path relative to the dataset root
        self.limit_key = limit_key  # info.json key of the size limit in MB
        self.current: tuple[int, int] | None = None  # None: the next save opens a new file
        self.units = 0  # frames (data, videos) or episodes (meta) in the current file

    def place(
        self, root: Path, info: Mapping, last: Mapping | None, added_units: int, added_mb: float | None = None
    ) -> tuple[tuple[int, int], bool]:
        """(chunk, file) of the next episode and whether it is appended to the current file. Its growth
        is ``added_mb`` when known, else the current file's MB per unit times ``added_units``."""
        chunks = int(info["chunks_size"])
        if self.current is None:  # fresh writer: after the last saved episode's file, if any
            if last is None:
                return (0, 0), False
            prev = int(last[f"{self.prefix}/chunk_index"]), int(last[f"{self.prefix}/file_index"])
            return fmt.update_chunk_file_indices(*prev, chunks), False
        size = _mb(root / self.path(*self.current))
        if added_mb is None:
            added_mb = size / self.units * added_units if self.units else 0.0
        if size + added_mb >= float(info[self.limit_key]):
            return fmt.update_chunk_file_indices(*self.current, chunks), False
        return self.current, True


class DatasetWriter:
    """Write a LeRobotDataset v3.0. Build with `create()` or `resume()`, not the constructor."""

    def __init__(self, *_args, **_kwargs):
        raise TypeError("use DatasetWriter.create(root, ...) or DatasetWriter.resume(root)")

    # ------------------------------------------------------------------------------ construction
    @classmethod
    def create(
        cls,
        root: str | os.PathLike,
        fps: int,
        features: Mapping[str, Mapping],
        robot_type: str | None = None,
        vcodec: str = "libsvtav1",
        pix_fmt: str = "yuv420p",
        g: int | None = 2,
        crf: int | None = 30,
        preset: int | str | None = None,
        data_files_size_in_mb: float = fmt.DEFAULT_DATA_FILE_SIZE_IN_MB,
        video_files_size_in_mb: float = fmt.DEFAULT_VIDEO_FILE_SIZE_IN_MB,
        chunks_size: int = fmt.DEFAULT_CHUNK_SIZE,
        encoder_queue_size: int = 30,
        on_backpressure: str = "block",
        encoder_threads: int | None = None,
        lerobot_version: str = DEPTH_MIN_LEROBOT,
        depth_preset: str | None = None,
    ) -> DatasetWriter:
        """Start a new dataset in `root` (must not exist or be empty).

        `lerobot_version` ("0.4.4" or "0.6") is the LeRobot the dataset is for: both read what this
        writer writes, except depth cameras, which only LeRobot 0.6 reads (an error for 0.4.4).
        `depth_preset`: libx265's speed preset for depth cameras (None: its default, as LeRobot 0.6;
        "ultrafast" encodes ~5x faster, same codes, ~3 % larger files)."""
        root = Path(root)
        if isinstance(fps, bool) or not isinstance(fps, (int, np.integer)) or fps <= 0:
            raise DatasetError(f"fps must be a positive integer, got {fps!r}")
        for name, value in (
            ("chunks_size", chunks_size),
            ("data_files_size_in_mb", data_files_size_in_mb),
            ("video_files_size_in_mb", video_files_size_in_mb),
        ):
            if value is None or value <= 0:
                raise DatasetError(f"{name} must be positive, got {value!r}")
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise DatasetError(
                f"{root} already exists and is not empty; use DatasetWriter.resume() to append"
            )
        depth_preset = _check_depth_preset(depth_preset)
        user = fmt.normalize_features(features)
        depth_cameras_need_06(user, lerobot_version)
        feats = fmt.all_features(user)
        if on_backpressure not in BACKPRESSURE_MODES:
            raise DatasetError(
                f"on_backpressure must be one of {BACKPRESSURE_MODES}, got {on_backpressure!r}"
            )
        encoder = resolve_encoder(vcodec) if fmt.video_keys(feats) else vcodec
        for key in fmt.video_keys(feats):  # refused settings fail here, before anything is written
            height, width = feats[key]["shape"][:2]
            depth = is_depth_feature(feats[key])  # depth cameras: LeRobot 0.6's depth encoder
            try:
                check_encoder_settings(
                    DEPTH_VCODEC if depth else encoder,
                    DEPTH_PIX_FMT if depth else encoder_pix_fmt(encoder, pix_fmt),
                    _quiet_x265(depth_encoder_options(depth_preset))
                    if depth
                    else codec_options(encoder, g, crf, preset),
                    int(fps),
                    width,
                    height,
                )
            except EncoderSettingError as exc:
                exc.args = (f"{key}: {exc}",)
                raise
        info = fmt.empty_info(
            int(fps), feats, robot_type, int(chunks_size), data_files_size_in_mb, video_files_size_in_mb
        )
        root.mkdir(parents=True, exist_ok=True)
        self = cls.__new__(cls)
        self._depth_preset = depth_preset
        self._init_state(root, info, vcodec, pix_fmt, g, crf, preset, encoder_queue_size, on_backpressure)
        self._encoder_threads = encoder_threads
        (root / "meta").mkdir(parents=True, exist_ok=True)
        tmp = root / WORK_DIR / "info.json.tmp"
        write_json_file(tmp, info)
        os.replace(tmp, root / fmt.INFO_PATH)
        return self

    @classmethod
    def resume(
        cls,
        root: str | os.PathLike,
        vcodec: str | None = None,
        pix_fmt: str | None = None,
        g: int | None = 2,
        crf: int | None = 30,
        preset: int | str | None = None,
        encoder_queue_size: int = 30,
        on_backpressure: str = "block",
        encoder_threads: int | None = None,
        lerobot_version: str = DEPTH_MIN_LEROBOT,
        depth_preset: str | None = None,
        validate: bool = True,
    ) -> DatasetWriter:
        """Open an existing dataset to append episodes (`lerobot_version`, `depth_preset` as in create()).

        Completes a save that was interrupted after its commit started, and drops an episode that
        was being recorded when the previous writer died (it was never committed). Then checks the
        dataset as `lerobot-dataset-info --check` does (its videos demuxed, every frame counted, not
        decoded) and refuses a damaged one: appending would build the new episodes' metadata on wrong
        totals, tasks or stats.
        `validate=False` skips that check (for --repair only).
        """
        root = Path(root)
        if not (root / fmt.INFO_PATH).exists():
            raise DatasetError(f"{root}: no {fmt.INFO_PATH}; nothing to resume (use DatasetWriter.create)")
        self = cls.__new__(cls)
        self._depth_preset = _check_depth_preset(depth_preset)
        self._lock = WriterLock(root)
        try:
            recovered = apply_journal(root)
            if recovered:
                _LOG.warning("%s: completed an episode save interrupted by a crash", root)
            dropped = (root / WORK_DIR / "episode").exists()
            clear_staging(root)
            if dropped:
                _LOG.warning("%s: dropped a partial episode left by a crashed writer", root)
            if validate:
                problems = check_dataset(root, allow_empty=True, videos="demux")
                if problems:
                    raise DatasetError(damaged_message(root, problems))
            info = load_info(root)
            depth_cameras_need_06(fmt.features_from_info(info), lerobot_version)
            recorded_vcodec, recorded_pix_fmt = recorded_video_settings(info)
            vcodec = recorded_vcodec if vcodec is None else vcodec
            pix_fmt = recorded_pix_fmt if pix_fmt is None else pix_fmt
            self._init_state(root, info, vcodec, pix_fmt, g, crf, preset, encoder_queue_size, on_backpressure)
            self._encoder_threads = encoder_threads
            self._load_existing()
        except BaseException:
            self._lock.release()
            raise
        self.recovered_interrupted_save = recovered
        self.dropped_partial_episode = dropped
        return self

    def _init_state(self, root, info, vcodec, pix_fmt, g, crf, preset, queue_size, on_backpressure) -> None:
        if on_backpressure not in BACKPRESSURE_MODES:
            raise DatasetError(
                f"on_backpressure must be one of {BACKPRESSURE_MODES}, got {on_backpressure!r}"
            )
        if int(queue_size) < 1:
            raise DatasetError(f"encoder_queue_size must be >= 1, got {queue_size!r}")
        self.root = Path(root)
        self.info = info
        self.features = fmt.features_from_info(info)
        self.fps = int(info["fps"])
        self.video_keys = fmt.video_keys(self.features)
        self.depth_keys = [k for k in self.video_keys if is_depth_feature(self.features[k])]
        self._depth = {k: DepthQuantizer.from_info(self.features[k].get("info")) for k in self.depth_keys}
        self.data_keys = fmt.data_keys(self.features)
        self._user_keys = [k for k in self.features if k not in fmt.DEFAULT_FEATURES]
        self._user_key_set = set(self._user_keys)
        self._schema = fmt.data_schema(self.features)
        if self.depth_keys:
            resolve_encoder(DEPTH_VCODEC)
        self.vcodec = resolve_encoder(vcodec) if self.video_keys else vcodec
        self.pix_fmt = encoder_pix_fmt(self.vcodec, pix_fmt) if self.video_keys else pix_fmt
        self._options = codec_options(self.vcodec, g, crf, preset)
        self._queue_size = int(queue_size)
        self._depth_preset = getattr(self, "_depth_preset", None)
        self._block = on_backpressure == "block"
        self._encoder_threads = None
        if not hasattr(self, "_lock"):
            self._lock = WriterLock(self.root)
        self.tasks: list[str] = []
        self._task_index: dict[str, int] = {}
        self._stats = None
        self._last_episode: dict | None = None
        # Files we may append to; a fresh or resumed writer opens new ones on its first save.
        self._data_file = _RollingFile("data", fmt.data_path, "data_files_size_in_mb")
        self._video_files = {
            k: _RollingFile(f"videos/{k}", partial(fmt.video_path, k), "video_files_size_in_mb")
            for k in self.video_keys
        }
        self._episodes_file = _RollingFile("meta/episodes", fmt.episodes_path, "data_files_size_in_mb")
        self._finalized = False
        self._broken: str | None = None
        self.recovered_interrupted_save = False
        self.dropped_partial_episode = False
        self._reset_episode()

    def _load_existing(self) -> None:
        self.tasks = load_tasks(self.root)
        self._task_index = {t: i for i, t in enumerate(self.tasks)}
        stats = load_stats(self.root)
        self._stats = stats_from_json(stats) if stats else None
        episodes = load_episodes(self.root)
        total_eps = int(self.info.get("total_episodes", 0))
        total_frames = int(self.info.get("total_frames", 0))
        if len(episodes) != total_eps or sum(int(e["length"]) for e in episodes) != total_frames:
            raise DatasetError(
                f"{self.root}: meta/info.json says {total_eps} episodes / {total_frames} frames but "
                f"meta/episodes holds {len(episodes)} episodes / {sum(int(e['length']) for e in episodes)} "
                "frames (a dataset written by LeRobot must be finalize()d before it can be resumed)"
            )
        if [int(e["episode_index"]) for e in episodes] != list(range(total_eps)):
            raise DatasetError(f"{self.root}: episode indices in meta/episodes are not 0..{total_eps - 1}")
        self._last_episode = episodes[-1] if episodes else None

    # --------------------------------------------------------------------------------- properties
    @property
    def total_episodes(self) -> int:
        return int(self.info["total_episodes"])

    @property
    def total_frames(self) -> int:
        return int(self.info["total_frames"])

    @property
    def encoder_settings(self) -> str:
        """Every video encoder setting in one line, e.g. "libsvtav1 yuv420p crf=30 g=2 preset=10" (and
        the depth cameras' after "; depth: ")."""
        text = describe_settings(self.vcodec, self.pix_fmt, self._options) if self.rgb_keys else ""
        if self.depth_keys:
            depth = describe_settings(DEPTH_VCODEC, DEPTH_PIX_FMT, depth_encoder_options(self._depth_preset))
            text = f"{text}; depth: {depth}" if text else f"depth: {depth}"
        return text

    @property
    def rgb_keys(self) -> list[str]:
        return [k for k in self.video_keys if k not in self.depth_keys]

    @property
    def episode_frames(self) -> int:
        """Frames added to the episode being recorded (not yet saved)."""
        return self._n

    def backlog(self) -> int:
        """Frames queued in the encoders, not yet encoded (summed over cameras)."""
        return sum(e.backlog() for e in self._encoders.values())

    # ---------------------------------------------------------------------------------- recording
    def _reset_episode(self) -> None:
        self._n = 0
        self._columns: dict[str, _Column | list] = {
            k: [] if self.features[k]["dtype"] == "string" else _Column(self.features[k])
            for k in self._user_keys
            if k not in self.video_keys
        }
        self._frame_tasks: list[str] = []
        self._encoders: dict[str, CameraEncoder] = {}
        self._encoded = False
        self._episode_error: str | None = None

    def _episode_dir(self) -> Path:
        return self.root / WORK_DIR / "episode"

    def _check_writable(self) -> None:
        if self._finalized:
            raise DatasetError(f"{self.root}: the writer was finalized; use DatasetWriter.resume() to append")
        if self._broken:
            raise DatasetError(f"{self.root}: writer unusable after an earlier failure: {self._broken}")

    def _check_episode_ok(self) -> None:
        if self._episode_error is not None:
            raise DatasetError(
                f"episode {self.total_episodes} cannot be continued or saved after an encoder failure "
                f"({self._episode_error}); call discard_episode()"
            )
        if self._n > 0 and self.video_keys and set(self._encoders) != set(self.video_keys):
            raise DatasetError(f"episode {self.total_episodes}: encoders missing; call discard_episode()")

    def add_frame(self, frame: Mapping[str, object], task: str | None = None) -> None:
        """Append one frame. `task` may also be given as frame["task"]. Images: HxWx3 uint8 RGB."""
        self._check_writable()
        self._check_episode_ok()
        keys = set(frame)
        if "task" in keys:
            keys.discard("task")
            if task is None:
                task = frame["task"]
        if keys != self._user_key_set:
            missing = sorted(self._user_key_set - keys)
            extra = sorted(keys - self._user_key_set)
            hint = (
                " (default columns are filled by the writer)"
                if set(extra) & set(fmt.DEFAULT_FEATURES)
                else ""
            )
            raise DatasetError(
                f"frame {self._n} of episode {self.total_episodes}: missing features {missing}, "
                f"unexpected features {extra}{hint}"
            )
        if not isinstance(task, str) or not task:
            raise DatasetError(
                f"frame {self._n} of episode {self.total_episodes}: a non-empty task string is required"
            )
        values = {}
        for key in self._columns:
            ft = self.features[key]
            raw = frame[key]
            if ft["dtype"] == "string":
                if not isinstance(raw, str):
                    raise DatasetError(f"feature {key!r}: expected str, got {type(raw).__name__}")
                values[key] = raw
                continue
            try:
                arr = np.asarray(raw, dtype=ft["dtype"])
            except (TypeError, ValueError) as exc:
                raise DatasetError(f"feature {key!r}: cannot convert to {ft['dtype']}: {exc}") from exc
            if arr.shape != ft["shape"] and not (ft["shape"] == (1,) and arr.shape == ()):
                raise DatasetError(f"feature {key!r}: expected shape {ft['shape']}, got {arr.shape}")
            values[key] = arr.reshape(ft["shape"])
        images = {}
        for key in self.video_keys:
            img = frame[key]
            shape = tuple(self.features[key]["shape"])
            if key in self._depth:
                depth_dtype = np.uint16 if self._depth[key].unit == "mm" else np.float32
                if (
                    not isinstance(img, np.ndarray)
                    or img.dtype != depth_dtype
                    or img.shape not in (shape, shape[:2])
                ):
                    got = f"{img.dtype} {img.shape}" if isinstance(img, np.ndarray) else type(img).__name__
                    raise DatasetError(
                        f"depth camera {key!r}: expected a {shape[:2]} {np.dtype(depth_dtype)} array of "
                        f"depth in {self._depth[key].unit}, got {got}"
                    )
                images[key] = img
                continue
            if not isinstance(img, np.ndarray) or img.dtype != np.uint8 or img.shape != shape:
                got = f"{img.dtype} {img.shape}" if isinstance(img, np.ndarray) else type(img).__name__
                raise DatasetError(f"camera {key!r}: expected a {shape} uint8 RGB array, got {got}")
            images[key] = img
        if self._n == 0 and self.video_keys and not self._encoders:
            self._start_encoders()
        if images:
            if not self._block:
                behind = [k for k, e in self._encoders.items() if not e.has_room()]
                if behind:
                    raise DatasetError(
                        f"encoder backlog full for {behind} (queue size {self._queue_size}); frame {self._n} "
                        "was NOT recorded. Lower the frame rate/resolution, use a faster codec or preset, "
                        "or on_backpressure='block'"
                    )
            try:
                for key, img in images.items():
                    self._encoders[key].put(img, block=self._block)
            except DatasetError as exc:
                # A camera may already hold this frame: the episode is inconsistent from here on.
                self._episode_error = str(exc)
                raise
        for key, v in values.items():
            self._columns[key].append(v)
        self._frame_tasks.append(task)
        self._n += 1

    def _start_encoders(self) -> None:
        ep_dir = self._episode_dir()
        if ep_dir.exists():
            shutil.rmtree(ep_dir)
        ep_dir.mkdir(parents=True)
        try:
            for key in self.video_keys:
                h, w, _ = self.features[key]["shape"]
                depth = self._depth.get(key)
                self._encoders[key] = CameraEncoder(
                    key,
                    ep_dir / f"{key}.mp4",
                    self.fps,
                    h,
                    w,
                    DEPTH_VCODEC if depth else self.vcodec,
                    DEPTH_PIX_FMT if depth else self.pix_fmt,
                    _quiet_x265(depth_encoder_options(self._depth_preset)) if depth else self._options,
                    self._queue_size,
                    self._encoder_threads,
                    depth=depth,
                )
        except BaseException:
            self._cancel_encoders()
            raise

    def _cancel_encoders(self) -> None:
        for enc in self._encoders.values():
            enc.cancel()
        self._encoders = {}

    def discard_episode(self) -> None:
        """Drop the episode being recorded (nothing of it reaches the dataset)."""
        self._cancel_encoders()
        shutil.rmtree(self._episode_dir(), ignore_errors=True)
        self._reset_episode()

    # -------------------------------------------------------------------------------------- save
    def save_episode(self) -> dict:
        """Commit the recorded frames as the next episode and return a summary dict."""
        self._check_writable()
        n = self._n
        ep = self.total_episodes
        if n == 0:
            raise DatasetError(f"save_episode(): episode {ep} has no frames")
        self._check_episode_ok()
        if not self._encoded:
            try:
                for enc in self._encoders.values():
                    enc.finish()
            except DatasetError as exc:
                self._episode_error = str(exc)
                self._cancel_encoders()
                raise DatasetError(f"episode {ep}: {exc}") from exc
            self._encoded = True
        for key, enc in self._encoders.items():
            try:
                on_disk = count_frames(enc.path)
            except Exception as exc:
                raise DatasetError(
                    f"episode {ep}: camera {key!r} mp4 {enc.path} is unreadable ({exc}); discard_episode()"
                ) from exc
            if on_disk != n or enc.frames_encoded != n:
                raise DatasetError(
                    f"episode {ep}: camera {key!r} mp4 has {on_disk} frames but the episode has {n} parquet "
                    "rows; nothing was saved (discard_episode() to drop it)"
                )
        try:
            summary = self._commit_episode(ep, n)
        except DatasetError:
            raise
        except Exception as exc:
            if is_disk_full(exc):
                raise DatasetError(
                    f"{self.root}: disk full: episode {ep} was not saved ({exc}); it needs about "
                    f"{self.space_needed_mb():.1f} MB free, {_free_mb(self.root):.1f} MB are. "
                    f"The {ep} episode(s) saved before it are intact"
                ) from exc
            raise DatasetError(
                f"{self.root}: saving episode {ep} failed: {exc!r}; earlier episodes are intact"
            ) from exc
        self._cancel_encoders()
        shutil.rmtree(self._episode_dir(), ignore_errors=True)
        self._reset_episode()
        return summary

    def save_encoded_episode(
        self,
        columns: Mapping[str, object],
        tasks: Sequence[str],
        videos: Mapping[str, tuple[Path, Mapping[str, np.ndarray]]],
    ) -> dict:
        """Commit an episode whose video was encoded elsewhere (a parallel bag-import worker).

        `columns`: every non-video user feature, N rows each; `tasks`: the N per-frame task strings;
        `videos`: per camera, an mp4 holding exactly these N frames from pts 0 (encoded with this
        writer's settings) and its image statistics. The mp4 is moved into the dataset (concatenated
        by remuxing, as save_episode does); the same checks and the same atomic commit apply.
        """
        self._check_writable()
        if self._n:
            raise DatasetError(
                f"episode {self.total_episodes} is being recorded; save or discard it before adding an encoded one"
            )
        n = len(tasks)
        if set(columns) != set(self._columns) or set(videos) != set(self.video_keys):
            raise DatasetError(
                f"encoded episode: features {sorted(columns)} + videos {sorted(videos)}, "
                f"expected {sorted(self._columns)} + {sorted(self.video_keys)}"
            )
        for key, values in columns.items():
            if len(values) != n:
                raise DatasetError(f"encoded episode: {key!r} has {len(values)} rows for {n} tasks")
            for v in values:
                self._columns[key].append(v)
        self._frame_tasks = list(tasks)
        ep_dir = self._episode_dir()  # the commit stages files from inside the dataset folder
        shutil.rmtree(ep_dir, ignore_errors=True)
        ep_dir.mkdir(parents=True)
        for key, (path, stats) in videos.items():
            local = ep_dir / f"{key}.mp4"
            shutil.move(str(path), local)
            self._encoders[key] = _EncodedVideo(local, stats, n)
        self._encoded = True
        self._n = n
        try:
            return self.save_episode()
        except BaseException:
            shutil.rmtree(self._episode_dir(), ignore_errors=True)
            self._reset_episode()
            raise

    def space_needed_mb(self) -> float:
        """Disk space a save of the current episode writes beside the dataset before it replaces
        files: its mp4s, plus a copy of each file it appends to (data, videos; their new versions are
        written whole), plus a little metadata."""
        total = sum(_mb(e.path) for e in self._encoders.values() if Path(e.path).exists())
        slots = [self._data_file, *self._video_files.values()]
        for slot in slots:
            if slot.current is not None and (self.root / slot.path(*slot.current)).exists():
                total += _mb(self.root / slot.path(*slot.current))
        row_bytes = sum(
            int(np.prod(self.features[k]["shape"])) * 8 for k in self._columns if k in self.features
        )
        return total + (self._n * (row_bytes + 40) + 256 * 1024) / 1024**2

    def _episode_table(self, ep: int, n: int, task_indices: np.ndarray) -> tuple[pa.Table, dict]:
        start = self.total_frames
        cols: dict[str, np.ndarray | list] = {}
        for key in self._columns:
            ft = self.features[key]
            if ft["dtype"] == "string":
                cols[key] = list(self._columns[key])
            else:
                cols[key] = self._columns[key].values()
        frame_index = np.arange(n, dtype=np.int64)
        cols["timestamp"] = (frame_index / self.fps).astype(np.float32)
        cols["frame_index"] = frame_index
        cols["episode_index"] = np.full(n, ep, dtype=np.int64)
        cols["index"] = np.arange(start, start + n, dtype=np.int64)
        cols["task_index"] = task_indices
        arrays = []
        for field in self._schema:
            value = cols[field.name]
            if pa.types.is_fixed_size_list(field.type):
                flat = pa.array(np.ascontiguousarray(value).reshape(-1), type=field.type.value_type)
                arrays.append(pa.FixedSizeListArray.from_arrays(flat, field.type.list_size))
            elif isinstance(value, np.ndarray):
                arrays.append(pa.array(value.reshape(n), type=field.type))
            else:
                arrays.append(pa.array(value, type=field.type))
        table = pa.Table.from_arrays(arrays, schema=self._schema)
        stats = {}
        for key in self.data_keys:
            if self.features[key]["dtype"] == "string":
                continue
            stats[key] = numeric_stats(cols[key])
        return table, stats

    def _commit_episode(self, ep: int, n: int) -> dict:
        root = self.root
        info = dict(self.info)
        info["features"] = {k: dict(v) for k, v in self.info["features"].items()}
        tasks = list(self.tasks)
        task_index = dict(self._task_index)
        for t in self._frame_tasks:
            if t not in task_index:
                task_index[t] = len(tasks)
                tasks.append(t)
        ti = np.fromiter((task_index[t] for t in self._frame_tasks), dtype=np.int64, count=n)
        table, ep_stats = self._episode_table(ep, n, ti)
        for key, enc in self._encoders.items():
            vstats = enc.stats.result()
            if vstats is not None:
                ep_stats[key] = vstats

        tx = Transaction(root, f"episode-{ep:06d}")
        start = self.total_frames
        last = self._last_episode
        placed: list[tuple[_RollingFile, tuple[int, int], int]] = []  # adopted once the commit is done
        meta = {
            "episode_index": ep,
            "tasks": sorted(set(self._frame_tasks), key=self._frame_tasks.index),
            "length": n,
        }

        def place(slot: _RollingFile, added_units: int, added_mb: float | None = None):
            """The episode's file in ``slot``: its path, whether to append, the units already in it."""
            cf, append = slot.place(root, info, last, added_units, added_mb)
            offset = slot.units if append else 0  # units already in the file the episode goes to
            placed.append((slot, cf, offset + added_units))
            meta[f"{slot.prefix}/chunk_index"], meta[f"{slot.prefix}/file_index"] = cf
            return slot.path(*cf), append, offset

        def stage_parquet(table: pa.Table, rel: str, append: bool, **kwargs) -> None:
            tmp = tx.temp_path(rel)
            if append:
                append_parquet(root / rel, table, tmp, **kwargs)
            else:
                write_parquet(table, tmp)
            tx.stage(tmp, rel)

        try:
            # ---- data parquet
            data_rel, append, _ = place(self._data_file, n)
            stage_parquet(table, data_rel, append)
            meta["dataset_from_index"] = start
            meta["dataset_to_index"] = start + n
            # ---- videos: concatenate onto the camera's current mp4 or start a new file
            video_rels = {}
            for key, enc in self._encoders.items():
                ep_mp4 = enc.path
                rel, concat, offset = place(self._video_files[key], n, _mb(ep_mp4))
                video_rels[key] = rel
                if concat:
                    tmp = tx.temp_path(rel)
                    concat_mp4(root / rel, ep_mp4, tmp, self.fps)
                    tx.stage(tmp, rel)
                else:
                    tx.stage(ep_mp4, rel)
                meta[f"videos/{key}/from_timestamp"] = offset / self.fps
                meta[f"videos/{key}/to_timestamp"] = (offset + n) / self.fps
                vinfo = info["features"][key].get("info") or {}
                if "video.codec" not in vinfo:  # the first video: what LeRobot records of it
                    merged = {**vinfo, **video_info(ep_mp4, is_depth_feature(info["features"][key]))}
                    if key in self._depth:  # 0.6 reads its DepthEncoderConfig back from these
                        merged.update(_depth_encoder_info(self._depth_preset))
                        merged.update(self._depth[key].info())
                    else:  # and its RGBEncoderConfig from these (0.4.4 ignores them)
                        merged.update(_rgb_encoder_info(self._options))
                    info["features"][key]["info"] = merged
            meta.update(flatten_episode_stats(ep_stats))
            # ---- episodes metadata parquet
            rel, append, _ = place(self._episodes_file, 1)
            stage_parquet(pa.Table.from_pylist([meta]), rel, append, merge_row_groups=True)
            # ---- tasks, stats, info (info last: it carries the totals)
            if len(tasks) != len(self.tasks):
                stage_parquet(tasks_table(tasks), fmt.TASKS_PATH, append=False)
            new_stats = aggregate_stats([self._stats, ep_stats]) if self._stats else ep_stats
            tmp = tx.temp_path(fmt.STATS_PATH)
            write_json_file(tmp, stats_to_json(new_stats))
            tx.stage(tmp, fmt.STATS_PATH)
            info["total_episodes"] = ep + 1
            info["total_frames"] = start + n
            info["total_tasks"] = len(tasks)
            info["splits"] = {"train": f"0:{ep + 1}"}
            tmp = tx.temp_path(fmt.INFO_PATH)
            write_json_file(tmp, info)
            tx.stage(tmp, fmt.INFO_PATH)
        except BaseException:
            tx.abort()
            raise
        try:
            tx.commit()
        except BaseException as exc:
            if not tx.journaled:
                # the journal never reached the disk: nothing was renamed, the dataset is as it was
                tx.abort()
                raise
            self._broken = (
                f"the save of episode {ep} was interrupted after its commit journal was written ({exc}); "
                f"`lerobot-dataset-info {root} --repair` completes it"
            )
            raise DatasetError(f"{root}: {self._broken}") from exc
        tx.abort()  # removes the (now empty) staging folder
        # ---- commit done: adopt the new state
        self.info = info
        self.features = fmt.features_from_info(info)
        self.tasks, self._task_index = tasks, task_index
        self._stats = new_stats
        for slot, cf, units in placed:
            slot.current, slot.units = cf, units
        self._last_episode = {k: v for k, v in meta.items() if not k.startswith("stats/")}
        return {
            "episode_index": ep,
            "length": n,
            "tasks": meta["tasks"],
            "dataset_from_index": start,
            "dataset_to_index": start + n,
            "data_file": data_rel,
            "video_files": video_rels,
            "duration_s": n / self.fps,
        }

    # ---------------------------------------------------------------------------------- finalize
    def finalize(self, on_pending: str = "error") -> None:
        """Close the writer. Every saved episode is already durable; this releases resources.

        Idempotent. An unsaved episode in progress is an error by default (nothing is lost
        silently); pass on_pending="save" or "discard" to decide.
        """
        if self._finalized:
            return
        if self._n > 0:
            if on_pending == "save":
                self.save_episode()
            elif on_pending == "discard":
                self.discard_episode()
            else:
                raise DatasetError(
                    f"finalize(): episode {self.total_episodes} has {self._n} unsaved frames; "
                    "call save_episode() or discard_episode() first (or finalize(on_pending='save'|'discard'))"
                )
        self._cancel_encoders()
        if self._broken is None:
            clear_staging(self.root)
        self._lock.release()
        if self._broken is None:
            shutil.rmtree(self.root / WORK_DIR, ignore_errors=True)
        self._finalized = True

    def __enter__(self) -> DatasetWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.finalize(on_pending="discard" if exc_type is not None else "error")

    def __del__(self):
        # Dropped without finalize(): stop encoders and free the lock; saved episodes are durable.
        for e in (getattr(self, "_encoders", None) or {}).values():
            e._cancel.set()
            with contextlib.suppress(queue.Full):
                e.queue.put_nowait(None)
        lock = getattr(self, "_lock", None)
        if lock is not None:
            lock.release()

    def __repr__(self) -> str:
        return (
            f"DatasetWriter(root={str(self.root)!r}, fps={self.fps}, episodes={self.total_episodes}, "
            f"frames={self.total_frames}, recording={self._n})"
        )
