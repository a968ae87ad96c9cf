"""The recorder node's engine, ROS-free: messages in, episodes out, all work on one worker thread.

The node's subscription callbacks only call :meth:`LiveRecorder.ingest` (serialized bytes + receive
time: an append to a queue and a counter). The worker thread does everything that takes time:
deserializing, the alignment core (one fresh :class:`~lerobot_core.alignment.Aligner` per
episode, exactly as bag import does per bag), image conversion, ``DatasetWriter.add_frame`` (whose
encoders run on their own threads), saving, and handing the raw bytes to the raw-bag writer
thread. Services and the action call :meth:`request` and wait on the returned future.

Backpressure is visible, never silent: when the video encoders fall behind, ``add_frame`` blocks
the worker, the ingest queue grows and its size is reported (``ingest_backlog``,
``encoder_backlog``); only when the queue exceeds ``max_ingest_mb`` are the oldest messages
dropped, counted per stream and reported in the status and the log.

Record raw, convert later: in ``mode="raw"`` or ``"both"`` every message an episode's aligner
sees is also written, byte for byte, into that episode's mcap bag (log time = receive time), so
importing the bag replays the same samples into the same alignment rules.
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import logging
import shutil
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lerobot_core.alignment import RECEIVE, Aligner
from lerobot_core.contract import CONTROL_STATUS, IMAGE_TYPES, LATCHED_TYPES, Contract, NonFiniteSampleError
from lerobot_core.time import stamp_to_ns
from lerobot_dataset import DatasetError, DatasetWriter
from lerobot_dataset import format as dsfmt
from lerobot_dataset.storage import is_disk_full

from .episode_control import (
    BEGIN,
    END,
    Effect,
    EpisodeConfig,
    EpisodeController,
    EpisodeError,
    SimEpisodes,
    State,
    check_episode_boundaries,
)
from .rate_audit import AuditSpec, RateAudit, StreamHealth
from .raw_bag import RawBagError, RawRecording, ThreadedBagWriter
from .sim_seeds import record_seed

_NS = 1_000_000_000
NON_FINITE_CHOICES = ("refuse", "drop")
NON_FINITE_REFUSALS_TO_STOP = 3  # a source that sent NaN in 3 episodes in a row keeps sending it
MODES = ("dataset", "raw", "both")

RESULT_SAVED, RESULT_DISCARDED, RESULT_EMPTY, RESULT_ERROR = 0, 1, 2, 3


class RecorderError(ValueError):
    """A configuration or request the recorder cannot carry out; the message says what to fix."""


class NoMessageYetError(RecorderError):
    """An episode cannot start yet: nothing has arrived on these topics (their sources may be starting)."""

    def __init__(self, topics):
        self.topics = sorted(topics)
        super().__init__(f"no message received yet on {self.topics}: are the sources running?")


@dataclass(frozen=True)
class LiveConfig:
    dataset_root: str
    mode: str = "dataset"  # dataset | raw | both
    raw_dir: str = ""  # default: <dataset_root>_raw
    resume: bool = False
    vcodec: str = "libsvtav1"
    crf: int = 30
    preset: str = ""  # "" = the writer's default; digits = a numeric (svt-av1) preset
    lerobot_version: str = "0.6"  # the LeRobot the dataset is for; 0.4.4 refuses depth cameras
    depth_preset: str = ""  # libx265 preset of depth cameras ("" = its default, as LeRobot 0.6)
    encoder_queue_size: int = 30
    episode: EpisodeConfig = field(default_factory=EpisodeConfig)
    latency_margin_s: float = 0.1
    history_s: float = 5.0
    rate_tolerance: float = 0.9
    audit_window_s: float = 1.0
    max_ingest_mb: float = 512.0
    streams: tuple[str, ...] = ()  # record only these contract streams/features (empty = all)
    # "time": an episode is episode_time_s long; "sim": it is one sim episode (reset .. done, as the
    # sim reports on episode_info_topic), episode_time_s then caps it
    episode_boundaries: str = "time"
    episode_info_topic: str = "/sim/episode_info"
    # a message holding NaN or inf: "refuse" fails the episode being recorded, "drop" skips the message
    non_finite: str = "refuse"
    # a required stream still silent this long after the first message of any other: fail, naming it
    source_timeout_s: float = 15.0

    @property
    def raw_root(self) -> Path:
        return Path(self.raw_dir) if self.raw_dir else Path(str(Path(self.dataset_root)) + "_raw")


@dataclass
class EpisodeOutcome:
    seq: int
    result_code: int
    message: str
    episode_index: int
    frames: int
    dropped_ticks: int
    duration_s: float
    streams: list[StreamHealth]
    raw_bag: str = ""


@dataclass
class Snapshot:
    state: int = State.UNCONFIGURED
    message: str = ""
    dataset_root: str = ""
    task: str = ""
    episode_index: int = 0
    episodes_recorded: int = 0
    total_episodes: int = 0
    frames: int = 0
    elapsed_s: float = 0.0
    episode_time_s: float = 0.0
    dropped_ticks: int = 0
    encoder_backlog: int = 0
    ingest_backlog: int = 0
    ingest_dropped: int = 0
    streams: list[StreamHealth] = field(default_factory=list)
    episode_seq: int = 0
    session: bool = False


@dataclass
class _Episode:
    """The episode being recorded: made when it begins, dropped when it is saved or discarded."""

    index: int  # its index in the dataset (and of its raw bag)
    aligner: Aligner
    t_begin_ns: (
        int | None
    )  # node clock at the start: its data window opens here (None: not yet, sim boundaries)
    bag: ThreadedBagWriter | None = None
    frames: int = 0  # ticks written
    paused: int = 0  # ticks dropped because the control arbiter held the robot
    t_stop_ns: int | None = None  # node clock at the stop: its data window closes here
    closing_until: float | None = None  # monotonic deadline of the stop's latency margin
    passed_stop: set[str] = field(default_factory=set)  # streams with a sample past the stop
    sim_done_ns: int | None = None  # sim boundaries: stamp of the sim episode's done step (the stop)
    end_ns: int | None = None  # the last tick the aligner settles (None: _end_of decides)
    sim_seed: int | None = None  # sim boundaries: the seed of the sim episode it records
    cut_short: bool = False  # ended by the recorder's shutdown (Ctrl-C), not by its plan or a request

    def settled(self, now: float, required: set[str]) -> bool:
        """Stopped, and done waiting: the margin ran out or every required stream passed the stop."""
        return self.closing_until is not None and (now >= self.closing_until or required <= self.passed_stop)


def _preset(value: str):
    value = str(value).strip()
    if not value or value == "-1":
        return None
    return int(value) if value.isdigit() else value


def cdr_header_stamp(data: bytes) -> int:
    """Header stamp (ns) of a CDR-serialized message whose first field is std_msgs/Header."""
    if len(data) < 12 or data[0] != 0 or data[1] not in (0, 1):
        raise ValueError("not a CDR message with a header")
    order = "<" if data[1] == 1 else ">"
    sec, nanosec = struct.unpack_from(order + "iI", data, 4)
    return sec * _NS + nanosec


def check_dataset_root(root: Path, resume: bool, mode: str) -> str:
    """'create' or 'resume' for a dataset folder, or RecorderError saying why it cannot be used."""
    if mode == "raw":
        return "none"
    if root.exists() and not root.is_dir():
        raise RecorderError(f"dataset_root {root} exists and is not a directory")
    is_dataset = (root / dsfmt.INFO_PATH).is_file()
    if is_dataset:
        if not resume:
            raise RecorderError(
                f"dataset_root {root} already holds a dataset; set resume:=true to append episodes, "
                "or choose a new folder"
            )
        return "resume"
    if root.is_dir() and any(root.iterdir()):
        raise RecorderError(
            f"dataset_root {root} is an existing folder that is not a LeRobot dataset (no {dsfmt.INFO_PATH}); "
            "refusing to write into it: choose a new or empty folder"
        )
    return "create"


def select_streams(contract: Contract, wanted: tuple[str, ...]) -> Contract:
    """Check that every requested stream (feature name or topic) exists in the contract."""
    if not wanted:
        return contract
    known = set(contract.vectors) | set(contract.images) | set(contract.streams)
    unknown = [w for w in wanted if w not in known]
    if unknown:
        raise RecorderError(
            f"unknown stream(s) {unknown}: the contract ({contract.source}) has features "
            f"{sorted(set(contract.vectors) | set(contract.images))} and topics {sorted(contract.streams)}"
        )
    from dataclasses import replace

    vectors = {k: v for k, v in contract.vectors.items() if k in wanted or any(s.topic in wanted for s in v)}
    images = {k: v for k, v in contract.images.items() if k in wanted or v.topic in wanted}
    topics = {s.topic for v in vectors.values() for s in v} | {v.topic for v in images.values()}
    if contract.task_topic:
        topics.add(contract.task_topic)
    topics |= {e.topic for e in contract.extras.values()}  # the control mode gates every frame
    streams = {t: s for t, s in contract.streams.items() if t in topics}
    if not vectors and not images:
        raise RecorderError(f"streams {list(wanted)} select no feature to record")
    return replace(contract, vectors=vectors, images=images, streams=streams)


class LiveRecorder:
    """See the module docstring. ``decode(topic, bytes) -> message``; ``clock() -> ns`` (node clock)."""

    def __init__(
        self,
        cfg: LiveConfig,
        contract: Contract,
        decode: Callable[[str, bytes], object],
        clock: Callable[[], int],
        monotonic: Callable[[], float] = time.monotonic,
        logger: logging.Logger | None = None,
        on_change: Callable[[], None] | None = None,
        on_taken: Callable[[int], None] | None = None,
    ):
        if cfg.mode not in MODES:
            raise RecorderError(f"mode must be one of {MODES}, got {cfg.mode!r}")
        if cfg.non_finite not in NON_FINITE_CHOICES:
            raise RecorderError(f"non_finite must be one of {NON_FINITE_CHOICES}, got {cfg.non_finite!r}")
        self.cfg = cfg
        self.contract = select_streams(contract, cfg.streams)
        self._decode = decode
        self._clock = clock
        self._mono = monotonic
        self.log = logger or logging.getLogger("recorder")
        self._on_change = on_change or (lambda: None)
        # lockstep: on_taken(t) says every required stamped stream has been taken in up to stamp t
        # (handed to the aligner and the writer, whose full encoder queue blocks this: backpressure)
        self._on_taken = on_taken
        self._lockstep = on_taken is not None
        self._taken: dict[str, int] = {}
        self._acked_ns = -1
        check_episode_boundaries(cfg.episode_boundaries)
        # sim boundaries: stamped samples wait in _held until the sim's episode info places them
        self._sim = SimEpisodes() if cfg.episode_boundaries == "sim" else None
        self._info_topic = cfg.episode_info_topic
        self._held: list[tuple[str, bytes, int, int]] = []
        self._placed_ns = -1  # newest stamp of a sample taken into an episode or dropped
        self._releasing = False
        self.root = Path(cfg.dataset_root).expanduser().absolute()
        self.kind = check_dataset_root(self.root, cfg.resume, cfg.mode)
        # folders above a new dataset that do not exist yet, deepest first: removed with it when no
        # episode gets saved
        self._made_parents = [p for p in self.root.parents if not p.exists()]
        self._root_existed = self.root.is_dir()
        self.raw = RawRecording(cfg.raw_root) if cfg.mode in ("raw", "both") else None
        saved_before = 0
        self.writer: DatasetWriter | None = None
        self._resolved: Contract | None = None
        if self.kind == "resume":
            info_fps = int(json.loads((self.root / dsfmt.INFO_PATH).read_text())["fps"])
            if info_fps != self.contract.fps:
                raise RecorderError(
                    f"dataset {self.root} was recorded at {info_fps} fps but the contract says {self.contract.fps}"
                )
        if self.raw is not None and cfg.mode == "raw":
            saved_before = self.raw.next_index()
        self._controller = EpisodeController(cfg.episode, saved_before=saved_before)
        self._streams = self.contract.streams
        expected = {}
        for topic, st in self._streams.items():
            if st.msgtype in LATCHED_TYPES:  # published on change: no rate to expect
                expected[topic] = 0.0
            elif st.msgtype in IMAGE_TYPES:
                expected[topic] = float(self.contract.fps)
            else:
                expected[topic] = float(st.rate or self.contract.fps)
        self.audit_specs = [
            AuditSpec(
                name=topic,
                topic=topic,
                expected_rate_hz=expected[topic],
                stale_after_s=(st.max_staleness if st.max_staleness else 1e9)
                if st.msgtype not in LATCHED_TYPES
                else 1e9,
            )
            for topic, st in self._streams.items()
        ]
        self._audit = RateAudit(self.audit_specs, window_s=cfg.audit_window_s, tolerance=cfg.rate_tolerance)
        self._audit_lock = threading.Lock()
        self._queue: collections.deque = collections.deque()
        self._queue_bytes = 0
        self._qlock = threading.Lock()
        self._wake = threading.Event()
        self._cmds: collections.deque = collections.deque()
        self._latest_raw: dict[str, bytes] = {}
        self._first_message_wall: float | None = None  # wall time of the first message of any stream
        self._ingest_dropped: dict[str, int] = dict.fromkeys(self._streams, 0)
        self._last_drop_warn = 0.0
        self._rejected: dict[str, int] = {}
        self._task_override: str | None = None
        self._episode: _Episode | None = None
        self._timeline = {t: st.timeline for t, st in self.contract.streams.items()}
        self._required_topics = {t for t, st in self.contract.streams.items() if st.required}
        self._ack_topics = {
            t
            for t, st in self.contract.streams.items()
            if st.required and st.msgtype not in LATCHED_TYPES and st.timeline != RECEIVE
        }
        if self._sim is not None:
            # lockstep: the sim steps on only once the recorder has its step's episode info too
            self._ack_topics.add(self._info_topic)
            self._held_topics = {
                t
                for t, st in self.contract.streams.items()
                if st.timeline != RECEIVE and st.msgtype not in LATCHED_TYPES
            }
        self._stamp_only = (
            {t for t, st in self.contract.streams.items() if st.msgtype in IMAGE_TYPES}
            if cfg.mode == "raw"
            else set()
        )
        self._episode_seq = 0
        self._outcomes: dict[int, EpisodeOutcome] = {}
        self._outcome_futures: dict[int, concurrent.futures.Future] = {}
        self._health: list[StreamHealth] = []
        self._last_audit = 0.0
        self._thread: threading.Thread | None = None
        self._stop = False
        self._stop_request: tuple[int, int] | None = None  # (node clock, episode seq) when close() was called
        # a save the disk cannot hold: recording stops there (every later save would fail the same way)
        self.fatal: str | None = None
        self._disk_full_error: str | None = None
        self._non_finite_refusals = 0  # episodes refused in a row for NaN/inf (a session stops at 3)
        self.done = threading.Event()  # session finished (exit_when_done) or finalized
        self.latencies_ns: collections.deque = collections.deque(maxlen=100000)  # tick -> add_frame returned
        self._snapshot = Snapshot(dataset_root=str(self.root))
        self._snap_lock = threading.Lock()
        self._open_writer_if_resuming()
        self._controller.state = State.IDLE
        self._update_snapshot()

    # ------------------------------------------------------------------ setup
    def _open_writer_if_resuming(self) -> None:
        if self.kind != "resume":
            return
        try:
            self.writer = DatasetWriter.resume(
                self.root,
                encoder_queue_size=self.cfg.encoder_queue_size,
                crf=self.cfg.crf,
                preset=_preset(self.cfg.preset),
                lerobot_version=self.cfg.lerobot_version,
                depth_preset=self.cfg.depth_preset or None,
            )
        except DatasetError as exc:  # a damaged or locked dataset: the reason, in the node's words
            raise RecorderError(f"resume:=true: {exc}") from None
        if self.writer.dropped_partial_episode:
            self.log.warning(f"{self.root}: dropped a partial episode left by an earlier crash")
        self._controller.saved_before = self.writer.total_episodes
        self.log.info(f"resuming {self.root}: {self.writer.total_episodes} episode(s) already recorded")

    def _resolve(self) -> Contract:
        """Resolve the contract from the latest message of each topic; create/check the dataset."""
        if self._resolved is not None:
            return self._resolved
        firsts = {}
        missing = []
        for topic, st in self._streams.items():
            data = self._latest_raw.get(topic)
            if data is None:
                if st.required:
                    missing.append(topic)
                continue
            firsts[topic] = self._decode(topic, data)
        needs = [s.topic for srcs in self.contract.vectors.values() for s in srcs if s.joints is None] + [
            s.topic for s in self.contract.images.values() if s.height is None
        ]
        missing += [t for t in needs if t not in firsts and t not in missing]
        if missing:
            self._fail_if_sources_silent(missing)
            raise NoMessageYetError(missing)
        try:
            resolved = self.contract.resolve(firsts)
        except ValueError as exc:
            raise EpisodeError(str(exc)) from None
        if self.cfg.mode != "raw":
            features = resolved.features()
            if self.writer is None:
                self.writer = DatasetWriter.create(
                    self.root,
                    resolved.fps,
                    features,
                    robot_type=resolved.robot_type,
                    vcodec=self.cfg.vcodec,
                    crf=self.cfg.crf,
                    preset=_preset(self.cfg.preset),
                    encoder_queue_size=self.cfg.encoder_queue_size,
                    lerobot_version=self.cfg.lerobot_version,
                    depth_preset=self.cfg.depth_preset or None,
                )
                self.log.info(
                    f"created dataset {self.root} ({resolved.fps} fps, features {sorted(features)})"
                )
            else:
                have = {k: (tuple(v["shape"]), v.get("names")) for k, v in self.writer.features.items()}
                for k, v in features.items():
                    got = have.get(k)
                    if (
                        got is None
                        or got[0] != tuple(v["shape"])
                        or (v["dtype"] != "video" and list(got[1] or []) != list(v["names"] or []))
                    ):
                        raise EpisodeError(
                            f"feature {k} of the contract ({tuple(v['shape'])}, {v.get('names')}) does not "
                            f"match the dataset being resumed ({got}); use a new dataset_root"
                        )
                    unit = (v.get("info") or {}).get("depth_unit")
                    had = (self.writer.features[k].get("info") or {}).get("depth_unit")
                    if unit != had and (unit or had):
                        raise EpisodeError(
                            f"depth camera {k}: the topic's depth is in {unit}, the dataset being resumed "
                            f"holds it in {had}; use a new dataset_root"
                        )
                extra = set(have) - set(features) - set(dsfmt.DEFAULT_FEATURES)
                if extra:
                    raise EpisodeError(
                        f"the dataset being resumed has features {sorted(extra)} the contract lacks"
                    )
        self._resolved = resolved
        return resolved

    def _fail_if_sources_silent(self, missing: list[str]) -> None:
        """Topics still silent source_timeout_s after the first message of another: their source is
        not running (a camera left out of the sim's cameras, a wrong topic). Waiting on would never end."""
        first = self._first_message_wall
        if first is None or time.monotonic() - first < self.cfg.source_timeout_s:
            return
        features = {s.topic: k for k, srcs in self.contract.vectors.items() for s in srcs}
        features.update({s.topic: k for k, s in self.contract.images.items()})
        named = ", ".join(f"{t} ({features[t]})" if t in features else t for t in sorted(missing))
        publishing = sorted(t for t in self._latest_raw if t in self._streams)
        raise RecorderError(
            f"no message on {named} in {time.monotonic() - first:.0f} s while {', '.join(publishing)} publish: "
            f"the contract ({self.contract.source}) needs it. Is its source running (for the sim: is that "
            "camera in cameras:=...)? To record without it, list the features to keep in the recorder's "
            "streams parameter"
        )

    # ------------------------------------------------------------------ thread API
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="recorder-worker", daemon=True)
        self._thread.start()

    def ingest(self, topic: str, data: bytes, receive_ns: int) -> None:
        """From a subscription callback: queue the serialized message; never blocks on I/O."""
        now = self._mono()
        if topic in self._streams:  # (the sim's episode info is not a recorded stream)
            with self._audit_lock:
                self._audit.note(topic, now)
        n = len(data)
        with self._qlock:
            self._queue.append((topic, data, receive_ns))
            self._queue_bytes += n
            limit = self.cfg.max_ingest_mb * 1024 * 1024
            while self._queue_bytes > limit and len(self._queue) > 1:
                t, d, _ = self._queue.popleft()
                self._queue_bytes -= len(d)
                self._ingest_dropped[t] = self._ingest_dropped.get(t, 0) + 1
        self._wake.set()

    def request(self, command: str, **kwargs) -> concurrent.futures.Future:
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._cmds.append((command, kwargs, fut))
        self._wake.set()
        return fut

    def outcome_future(self, seq: int) -> concurrent.futures.Future:
        with self._snap_lock:
            fut = self._outcome_futures.setdefault(seq, concurrent.futures.Future())
            if seq in self._outcomes and not fut.done():
                fut.set_result(self._outcomes[seq])
            return fut

    def snapshot(self) -> Snapshot:
        with self._snap_lock:
            snap = Snapshot(**self._snapshot.__dict__)
        with self._qlock:
            snap.ingest_backlog = len(self._queue)
            snap.ingest_dropped = sum(self._ingest_dropped.values())
        if self.writer is not None:
            try:
                snap.encoder_backlog = self.writer.backlog() + snap.ingest_backlog
            except Exception:
                snap.encoder_backlog = snap.ingest_backlog
        else:
            ep = self._episode
            snap.encoder_backlog = snap.ingest_backlog + (ep.bag.backlog() if ep and ep.bag else 0)
        return snap

    def close(self, save_pending: bool = True, timeout: float = 120.0) -> None:
        """Stop the worker: a recording episode is saved (or discarded), the dataset finalized."""
        if self._thread is None:
            return
        # what the worker records from here on is after the stop request: it must not be saved
        self._stop_request = (self._clock(), self._episode_seq)
        fut = self.request("shutdown", save=save_pending)
        try:
            fut.result(timeout)
        except Exception as exc:
            self.log.error(f"closing the recorder: {exc}")
        self._stop = True
        self._wake.set()
        self._thread.join(timeout=10)
        self._thread = None

    # ------------------------------------------------------------------ worker
    def _run(self) -> None:
        while not self._stop:
            self._wake.wait(0.01)
            self._wake.clear()
            try:
                self._step()
            except Exception as exc:
                self.log.error(f"recorder worker: {exc!r}")
                self._fail_episode(str(exc))

    def _step(self) -> None:
        # messages first, so a command sees everything that arrived before it
        self._drain()
        while self._cmds:
            cmd, kw, fut = self._cmds.popleft()
            try:
                result = self._command(cmd, **kw)
            except RecorderError as exc:  # as raised (NoMessageYetError keeps its type)
                fut.set_exception(exc)
            except (EpisodeError, DatasetError, RawBagError) as exc:
                fut.set_exception(RecorderError(str(exc)))
            except Exception as exc:
                fut.set_exception(RecorderError(f"{cmd} failed: {exc!r}"))
            else:
                fut.set_result(result)
            self._update_snapshot()
        if self._episode is not None and self._episode.settled(self._mono(), self._required_topics):
            self._complete_closing()
        if self._sim is not None:
            self._release()
            if self._episode is not None and self._episode.t_begin_ns is None:
                self._controller.restart_phase(self._mono())  # the cap counts from the sim's reset
        if self._controller.state not in (State.FINALIZED, State.ERROR, State.UNCONFIGURED):
            self._apply(self._controller.tick(self._mono()))
        now = self._mono()
        if now - self._last_audit >= 0.1:
            self._last_audit = now
            self._run_audit(now)
            self._update_snapshot()

    def _drain(self, budget_s: float | None = 0.05) -> None:
        """Push queued messages into the episode's aligner (and raw bag), writing settled frames."""
        t_end = self._mono() + budget_s if budget_s is not None else float("inf")
        while True:
            with self._qlock:
                if not self._queue:
                    break
                topic, data, recv = self._queue.popleft()
                self._queue_bytes -= len(data)
            if self._first_message_wall is None and topic in self._streams:
                self._first_message_wall = time.monotonic()
            self._latest_raw[topic] = data
            if topic in self._ack_topics:
                try:
                    self._taken[topic] = max(self._taken.get(topic, -1), cdr_header_stamp(data))
                except ValueError:
                    pass
            held_by_sim = self._sim is not None and self._route_sim(topic, data, recv)
            if not held_by_sim and not self._take(topic, data, recv):
                return
            if self._mono() > t_end:
                break
        self._acknowledge()
        dropped = sum(self._ingest_dropped.values())
        if dropped and self._mono() - self._last_drop_warn > 2.0:
            self._last_drop_warn = self._mono()
            self.log.warning(
                f"backpressure: {dropped} message(s) dropped from the ingest queue so far "
                f"(> {self.cfg.max_ingest_mb:g} MB waiting): {dict((k, v) for k, v in self._ingest_dropped.items() if v)}"
            )

    def _take(self, topic: str, data: bytes, recv: int) -> bool:
        """One sample into the episode being recorded (if any); False when the episode failed."""
        ep = self._episode
        if ep is None or ep.t_begin_ns is None:
            return True
        try:
            if topic in self._stamp_only:
                # raw mode: an image's pixels are not needed, only its header stamp
                value, stamp, r = None, cdr_header_stamp(data), recv
            else:
                msg = self._decode(topic, data)
                value, stamp, r = self._resolved.extract(topic, msg, None, recv)
            # the episode is [start, stop] on each stream's own timeline: samples taken
            # before the start request or after the stop request are not part of it
            t = r if self._timeline[topic] == RECEIVE or stamp is None else stamp
            if t < ep.t_begin_ns:
                return True
            if ep.t_stop_ns is not None and t > ep.t_stop_ns:
                ep.passed_stop.add(topic)  # this stream has nothing more for the episode
                return True
            ep.aligner.push(topic, value, stamp_ns=stamp, receive_ns=r)
        except NonFiniteSampleError as exc:
            if self.cfg.non_finite == "drop":
                self._bad_message(topic, exc)
                return True
            self._non_finite_refusals += 1
            self._fail_episode(
                f"{exc}: episode {ep.index} is not saved (non_finite:=drop records without such messages)"
            )
            return False
        except ValueError as exc:
            self._bad_message(topic, exc)
            return True
        if ep.bag is not None:
            ep.bag.put(topic, recv, data, stamp)
        # Settle ticks on the receive clock, message by message: exactly the rule bag import
        # applies to the same messages (log time = receive time), so both give the same frames.
        now_ns = recv
        if ep.t_stop_ns is not None:
            # once stopped, a sample received late must not settle ticks past the stop: the
            # episode ends there (the rest is settled by finish() from the data it has)
            now_ns = min(now_ns, ep.t_stop_ns + ep.aligner.latency_margin_ns)
        error = self._write_frames(ep, ep.aligner.pop_ready(now_ns=now_ns))
        if error:
            self._fail_episode(error)
            return False
        return True

    # ------------------------------------------------------------------ sim episode boundaries
    def _route_sim(self, topic: str, data: bytes, recv: int) -> bool:
        """Sim boundaries: take in episode info, hold stamped samples until it places them (True)."""
        if topic == self._info_topic:
            try:
                msg = self._decode(topic, data)
            except ValueError as exc:
                self._bad_message(topic, exc)
                return True
            stamp = stamp_to_ns(msg.header.stamp)
            events = self._sim.update(
                stamp, msg.episode_index, msg.step, msg.terminated or msg.truncated, msg.seed
            )
            for kind, t in events:
                if kind == BEGIN:
                    with self._audit_lock:  # the reset's pause is nobody's fault: rates count afresh
                        self._audit.reset(self._mono())
                    self._open_at_reset(t)
                elif kind == END:
                    self._stop_at_done(t, msg)
            self._release()
            return True
        if topic not in self._held_topics:
            return False
        try:
            stamp = cdr_header_stamp(data)
        except ValueError:
            return False
        self._held.append((topic, data, recv, stamp))
        if stamp <= self._sim.newest_ns:
            self._release()
        return True

    def _release(self) -> None:
        """Place every held sample the sim's episode info covers: into the episode, kept, or dropped."""
        if self._releasing or self._sim is None or not self._held:
            return
        self._releasing = True
        try:
            keep = []
            for item in self._held:
                topic, data, recv, stamp = item
                ep = self._episode
                if stamp > self._sim.newest_ns:
                    keep.append(item)  # its sim episode is not known yet
                    continue
                if ep is not None and ep.t_begin_ns is not None:
                    if ep.t_stop_ns is not None and stamp > ep.t_stop_ns:
                        # past the episode that is closing: the next one may begin with it
                        ep.passed_stop.add(topic)
                        keep.append(item)
                        continue
                    if stamp >= ep.t_begin_ns:
                        self._placed_ns = max(self._placed_ns, stamp)
                        self._take(topic, data, recv)
                        continue
                elif ep is None and self._keep_for_next(stamp):
                    keep.append(item)  # an episode about to begin starts with the sim's current one
                    continue
                self._placed_ns = max(self._placed_ns, stamp)  # not part of any recorded episode
            self._held = keep
        finally:
            self._releasing = False

    def _keep_for_next(self, stamp: int) -> bool:
        """No episode: keep a sample the next episode begins with (the sim's current one, from its reset).

        Between two episodes of a session (saving) the sim's current episode began after the stop;
        before a session (idle) only its reset tick is kept: the lockstep sim waits there for the
        recorder (no acknowledgement while idle), and a sim that ran on is joined at its next reset.
        """
        start = self._sim.start_ns
        if start is None or stamp < start:
            return False
        if self._controller.state == State.SAVING:
            return True
        return self._controller.state == State.IDLE and self._sim.at_start

    def _open_at_reset(self, t_ns: int) -> None:
        """The sim reset at ``t_ns``: an episode waiting for it begins there."""
        ep = self._episode
        if ep is not None and ep.t_begin_ns is None and t_ns > self._placed_ns:
            self._open_window(ep, t_ns)

    def _stop_at_done(self, t_ns: int, info) -> None:
        """The sim episode ended with its step at ``t_ns``: the episode recording it ends there, inclusive."""
        ep = self._episode
        c = self._controller
        if ep is None or ep.t_begin_ns is None or ep.t_stop_ns is not None or c.state != State.RECORDING:
            return
        if t_ns < ep.t_begin_ns:
            return
        ep.sim_done_ns = t_ns
        # the aligner's grid (exact 1/fps) runs a few ns ahead of the sim's (whole-ns periods): the done
        # step's tick lies just past its stamp; half a period takes it and nothing after it
        ep.end_ns = t_ns + int(_NS / (2 * self.contract.fps))
        outcome = "success" if info.is_success else ("truncated" if info.truncated else "terminated")
        self.log.info(
            f"sim episode {info.episode_index} (seed {info.seed}) ended after {info.step} steps ({outcome})"
        )
        self._apply(c.stop(self._mono()))

    def _open_window(self, ep: _Episode, t_begin_ns: int) -> None:
        """The episode's data window opens at ``t_begin_ns``; its duration counts from now."""
        ep.t_begin_ns = t_begin_ns
        if self._sim is not None:
            ep.sim_seed = self._sim.seed  # the window opens at this sim episode's reset
        self._controller.restart_phase(self._mono())
        # the arbiter's mode published before the start is still in force (it changes on transitions only)
        for topic, st in self._resolved.streams.items():
            data = self._latest_raw.get(topic)
            if st.msgtype == CONTROL_STATUS and data is not None:
                value, stamp, _ = self._resolved.extract(topic, self._decode(topic, data), None, t_begin_ns)
                ep.aligner.push(topic, value, stamp_ns=stamp, receive_ns=t_begin_ns)
        with self._audit_lock:
            self._audit.reset(self._mono())

    def _acknowledge(self) -> None:
        """Report the newest stamp every required stamped stream has been taken in up to (on_taken)."""
        if self._on_taken is None or not self._ack_topics or not self._ack_topics <= self._taken.keys():
            return
        if self._sim is not None and self._controller.state == State.IDLE:
            return  # sim boundaries: the sim waits at its reset until an episode can begin with it
        taken = min(self._taken[t] for t in self._ack_topics)
        if taken > self._acked_ns:
            self._acked_ns = taken
            self._on_taken(taken)

    def _bad_message(self, topic: str, exc: Exception) -> None:
        """A message that does not fit the contract is skipped (its ticks show up as drops) and reported."""
        n = self._rejected.get(topic, 0) + 1
        self._rejected[topic] = n
        if n == 1 or n % 100 == 0:
            self.log.error(f"rejected {n} message(s) on {topic}: {exc}")

    def _write_frames(self, ep: _Episode, frames) -> str | None:
        """Hand aligned frames to the writer; returns an error text when the episode cannot go on."""
        for fr in frames:
            try:
                if self._resolved.paused(fr.values):
                    ep.paused += 1
                    continue  # the control arbiter holds the robot: a pause is not part of the episode
                if self.writer is not None and self.cfg.mode != "raw":
                    frame, task = self._resolved.make_frame(fr.values)
                    self.writer.add_frame(frame, task=self._task_override or task)
                    self.latencies_ns.append(self._clock() - fr.time_ns)
                ep.frames += 1
            except (DatasetError, ValueError) as exc:
                if is_disk_full(exc):
                    self._disk_full_error = str(exc)
                return f"frame {fr.index}: {exc}"
        return None

    def _fail_episode(self, message: str) -> None:
        """An error during an episode: stop it; the partial episode is dropped, earlier ones are intact."""
        self.log.error(message)
        if self._controller.state in (State.RECORDING, State.SAVING):
            self._controller.state = State.SAVING
            self._apply(self._finish_episode(save=False, error=message))

    def _run_audit(self, now: float) -> None:
        dropped = {}
        if self._episode is not None:
            dropped = {n: s.dropped_ticks for n, s in self._episode.aligner.stats.streams.items()}
        with self._audit_lock:
            health, changed = self._audit.audit(now, dropped)
        self._health = health
        # between the sim's done step and its next episode the sim is resetting: silence is expected
        resetting = self._sim is not None and self._sim.done
        if self._controller.state == State.RECORDING and not resetting:
            for h in changed:
                if h.healthy:
                    self.log.info(f"{h.describe()} (recovered)")
                else:
                    self.log.warning(f"episode {self._controller.episode_index}: {h.describe()}")

    # ------------------------------------------------------------------ commands and effects
    def _command(self, cmd: str, **kw):
        c = self._controller
        now = self._mono()
        if cmd == "start":
            # task: the request's, else the node's parameter, else the contract's (topic or fixed text)
            override = kw.get("task", "") or self.cfg.episode.task
            fallback = self.contract.task_text or f"(from {self.contract.task_topic})"
            plan = c.make_plan(
                override or fallback, kw.get("episode_time_s", 0.0), kw.get("reset_time_s", -1.0)
            )
            if c.state in (State.FINALIZED,):
                raise RecorderError(
                    "the dataset was finalized; reconfigure the node (resume:=true) to append"
                )
            if c.state in (State.RECORDING, State.SAVING):
                raise EpisodeError(f"episode {c.episode_index} is already being recorded")
            self._resolve()
            self._task_override = override or None
            self._apply(c.start(now, plan, session=bool(kw.get("session", False))))
            return {"episode_index": c.episode_index, "seq": self._episode_seq}
        if cmd == "stop":
            self._apply(c.stop(now))
            return {"episode_index": c.episode_index, "message": c.message}
        if cmd == "discard":
            seq = self._episode_seq
            self._apply(c.discard(now))
            return {"episode_index": c.episode_index, "seq": seq}
        if cmd == "finalize":
            self._apply(c.finalize(now))
            return {"message": c.message, "episodes": c.episodes_recorded}
        if cmd == "shutdown":
            c.session = False  # a session ends here: no save or discard below begins another episode
            began_after_stop = self._stop_request is not None and self._episode_seq > self._stop_request[1]
            if c.state == State.RECORDING and (not kw.get("save", True) or began_after_stop):
                # an episode a session began after the stop request (its predecessor's save was under
                # way) holds only what was recorded after the request: none of it is kept
                self._apply(c.discard(now))
            elif c.state == State.RECORDING and self._episode is not None:
                self._episode.cut_short = True  # saved as lerobot-record does on Ctrl-C, and said so
            self._complete_closing(wait=True)
            if c.state not in (State.FINALIZED, State.UNCONFIGURED):
                self._apply(c.finalize(now))
                self._complete_closing(wait=True)
            self._close_writer()
            return {"message": c.message}
        raise RecorderError(f"unknown command {cmd!r}")

    def _apply(self, effects) -> None:
        pending = list(effects)
        while pending:
            eff = pending.pop(0)
            if eff == Effect.BEGIN_EPISODE:
                self._begin_episode()
            elif eff == Effect.SAVE_EPISODE:
                # samples stamped before the stop may still be in flight: take them for one
                # latency margin, then save (the episode is SAVING meanwhile)
                # (until every required stream delivered a sample past the stop, at most 1 s more)
                if pending:
                    raise RuntimeError(f"effects after a save are not supported: {pending}")
                ep = self._episode
                if ep is None:  # its start failed: no data to wait for
                    pending += self._finish_episode(save=True)
                else:
                    ep.t_stop_ns = ep.sim_done_ns if ep.sim_done_ns is not None else self._clock()
                    if self._stop_request is not None:  # the episode ends where the stop was requested
                        ep.t_stop_ns = min(ep.t_stop_ns, max(self._stop_request[0], ep.t_begin_ns or 0))
                    ep.closing_until = self._mono() + self.cfg.latency_margin_s + 1.0
            elif eff == Effect.DISCARD_EPISODE:
                self._finish_episode(save=False, discarded=True)
            elif eff == Effect.FINALIZE:
                self._close_writer()
                self.done.set()
            elif eff == Effect.SESSION_DONE:
                self.log.info(self._controller.message)
                self.done.set()
            self._update_snapshot()
            self._on_change()

    def _complete_closing(self, wait: bool = False) -> None:
        """Save the episode whose stop is pending (waiting out the latency margin first if asked)."""
        ep = self._episode
        if ep is None or ep.closing_until is None:
            return
        # bounded in wall time too: on a sim clock that stopped (the sim is gone) _mono never gets there
        wall_end = time.monotonic() + self.cfg.latency_margin_s + 1.0
        while (
            wait
            and self._episode is ep
            and not ep.settled(self._mono(), self._required_topics)
            and time.monotonic() < wall_end
        ):
            self._drain()
            time.sleep(0.005)
        self._drain(budget_s=None)
        if self._episode is ep:  # not failed meanwhile
            self._apply(self._finish_episode(save=True))

    def _begin_episode(self) -> None:
        resolved = self._resolve()
        self._episode_seq += 1
        self.latencies_ns.clear()
        aligner = Aligner(
            resolved.fps,
            resolved.stream_specs(),
            latency_margin_s=self.cfg.latency_margin_s,
            history_s=self.cfg.history_s,
        )
        ep = self._episode = _Episode(self._controller.episode_index, aligner, None)
        if self.raw is not None:
            ep.bag = self.raw.begin(ep.index, {t: s.msgtype for t, s in resolved.streams.items()})
        plan = self._controller.plan
        if self._sim is None:
            # the episode's duration counts from here, where its data window opens (resolving the
            # contract or opening a raw bag before this must not eat into episode_time_s)
            self._open_window(ep, self._clock())
            what = f"{plan.episode_time_s:g} s"
        elif self._sim.start_ns is not None and self._sim.start_ns > self._placed_ns:
            self._open_window(ep, self._sim.start_ns)  # the sim's current episode, from its reset
            what = f"sim episode {self._sim.episode_index}, at most {plan.episode_time_s:g} s"
        else:
            what = f"from the sim's next reset on {self._info_topic}, at most {plan.episode_time_s:g} s"
        self.log.info(f"recording episode {self._controller.episode_index} ({what}, task {plan.task!r})")

    def _finish_episode(self, save: bool, discarded: bool = False, error: str | None = None) -> list[Effect]:
        c = self._controller
        ep, self._episode = self._episode, None
        bag = ep.bag if ep is not None else None
        t0 = c.phase_start or self._mono()
        duration = max(0.0, self._mono() - t0)
        if ep is not None and save and error is None:
            error = self._write_frames(ep, ep.aligner.finish(self._end_of(ep)))
            if error:
                save = False
        stats = ep.aligner.stats if ep is not None else None
        streams = self._final_health(stats)
        dropped = stats.ticks_dropped if stats else 0
        frames = ep.frames if ep is not None else 0
        index = c.episode_index
        raw_path = ""
        bag_latencies = bag.latencies_ns if bag is not None else None
        code, message = RESULT_SAVED, ""
        ok = False
        empty = False
        try:
            if save and frames > 0:
                if self.writer is not None and self.cfg.mode != "raw":
                    summary = self.writer.save_episode()
                    message = f"episode {index} saved: {summary['length']} frames"
                    if ep.sim_seed is not None and ep.sim_seed >= 0:
                        record_seed(self.root, index, ep.sim_seed)
                        message += f" of sim seed {ep.sim_seed}"
                else:
                    message = f"episode {index} recorded: {frames} frames (raw)"
                if ep is not None and ep.cut_short:
                    message += f", cut short by the shutdown {duration:.1f} s into it"
                if bag is not None:
                    raw_path = str(self.raw.commit(bag, ep.index))
                    bag = None
                    message += f", raw bag {raw_path}"
                ok = True
            elif save:
                code, empty = RESULT_EMPTY, True
                message = (
                    f"episode {index}: nothing recorded: the control arbiter held the robot (paused) in all "
                    f"{ep.paused} aligned ticks (is the policy, or the operator, driving?)"
                    if ep is not None and ep.paused
                    else f"episode {index}: no complete tick was recorded (is every required stream publishing?)"
                )
            else:
                code = RESULT_ERROR if error else RESULT_DISCARDED
                message = f"episode {index} {'failed: ' + error if error else 'discarded'}"
        except (DatasetError, RawBagError, OSError) as exc:
            code, message = RESULT_ERROR, f"episode {index}: saving failed: {exc}"
            error = message
            if is_disk_full(exc):
                self._disk_full_error = str(exc)
        finally:
            if not ok:
                if self.writer is not None and self.cfg.mode != "raw":
                    try:
                        self.writer.discard_episode()
                    except Exception as exc:
                        self.log.error(f"discarding episode {index}: {exc}")
                if bag is not None:
                    self.raw.discard(bag)
        if stats is not None:
            message += f" ({stats.summary()})"
            if stats.first_tick_ns is not None and ep.t_stop_ns is not None:
                # where the recorded ticks sit in the requested window: a source that starts late or
                # goes quiet before the stop shortens the episode here, not as dropped ticks
                message += (
                    f" [ticks {(stats.first_tick_ns - ep.t_begin_ns) / 1e9:.3f} s after start to "
                    f"{(ep.t_stop_ns - stats.last_tick_ns) / 1e9:.3f} s before stop; "
                    f"start-stop {(ep.t_stop_ns - ep.t_begin_ns) / 1e9:.3f} s]"
                )
        lat = self.latency_summary(bag_latencies)
        if lat:
            message += f" [latency {lat}]"
        (self.log.error if code == RESULT_ERROR else self.log.info)(message)
        outcome = EpisodeOutcome(
            seq=self._episode_seq,
            result_code=code,
            message=message,
            episode_index=index,
            frames=frames,
            dropped_ticks=dropped,
            duration_s=duration,
            streams=streams,
            raw_bag=raw_path,
        )
        with self._snap_lock:
            self._outcomes[outcome.seq] = outcome
            fut = self._outcome_futures.get(outcome.seq)
        if fut is not None and not fut.done():
            fut.set_result(outcome)
        self._last_outcome = outcome
        if self._disk_full_error is not None and self.fatal is None:
            self._stop_on_full_disk(index)
            return []
        self._non_finite_refusals = 0 if ok else self._non_finite_refusals
        if self._non_finite_refusals >= NON_FINITE_REFUSALS_TO_STOP and self.fatal is None:
            saved = c.saved_before + c.episodes_recorded
            self._stop_session(
                f"recording stopped: {self._non_finite_refusals} episodes in a row were refused for NaN or inf "
                f"values ({error}); the source keeps sending them. The {saved} episode(s) saved before are "
                "intact. Fix the source, or record without such messages with non_finite:=drop"
            )
            return []
        if discarded:
            return []
        if c.state == State.SAVING:
            return c.saved(self._mono(), ok=ok, empty=empty)
        return []

    def _stop_on_full_disk(self, index: int) -> None:
        """The disk is full: stop recording (each further episode would be recorded and thrown away)."""
        c = self._controller
        saved = c.saved_before + c.episodes_recorded
        err = self._disk_full_error
        if "was not saved" not in err:  # an encoder's error: say what it means for the dataset
            err = (
                f"disk full ({err}); episode {index} was not saved, the {saved} episode(s) saved "
                "before it are intact"
            )
        self._stop_session(f"recording stopped: {err}. Free space, then record more with resume:=true")

    def _stop_session(self, reason: str) -> None:
        """A fault every further episode would meet: stop recording and close the dataset (what is on
        disk stays as it was); the node exits non-zero with exit_when_done."""
        c = self._controller
        self.fatal = reason
        self.log.error(self.fatal)
        c.fail(self.fatal)
        try:
            self._close_writer()
        except Exception as exc:
            self.log.error(f"closing the dataset: {exc}")
        self._update_snapshot()
        self.done.set()

    @staticmethod
    def _end_of(ep: _Episode) -> int | None:
        """The last time a saved episode's ticks reach: the sim's done step when the sim ended it, else
        the aligner's default end (its newest common sample + its end slack), never past the stop."""
        if ep.end_ns is not None:
            return ep.end_ns
        covered = ep.aligner.covered_ns
        if covered is None or ep.t_stop_ns is None:
            return None
        return min(covered + ep.aligner.end_slack_ns, ep.t_stop_ns)

    def _final_health(self, stats) -> list[StreamHealth]:
        out = []
        for spec in self.audit_specs:
            s = stats.streams.get(spec.name) if stats is not None else None
            h = next((x for x in self._health if x.name == spec.name), None)
            out.append(
                StreamHealth(
                    name=spec.name,
                    topic=spec.topic,
                    expected_rate_hz=spec.expected_rate_hz,
                    measured_rate_hz=(s.rate_hz or 0.0) if s is not None else 0.0,
                    received=s.received if s is not None else 0,
                    dropped_ticks=s.dropped_ticks if s is not None else 0,
                    age_s=h.age_s if h else -1.0,
                    stale=h.stale if h else True,
                    rate_ok=(spec.expected_rate_hz <= 0)
                    or (
                        s is not None
                        and (s.rate_hz or 0.0) >= spec.expected_rate_hz * self.cfg.rate_tolerance
                    ),
                    judged=True,
                )
            )
        return out

    def _close_writer(self) -> None:
        if self.writer is not None:
            try:
                self.writer.finalize(on_pending="discard")
            finally:
                made_empty = self.kind == "create" and self.writer.total_episodes == 0
                self.writer = None
            if made_empty:
                self._remove_what_was_made()

    def _remove_what_was_made(self) -> None:
        """A new dataset that never saved an episode: remove it (it would only block the retry,
        which must then pass resume:=true into an empty dataset). The folder was new or empty when
        this recorder took it (check_dataset_root), so only what it wrote goes; parent folders it
        made go too when they are empty."""
        if self._root_existed:  # an empty folder given by the user: it stays, empty again
            for child in self.root.iterdir() if self.root.is_dir() else ():
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        else:
            shutil.rmtree(self.root, ignore_errors=True)
        for parent in self._made_parents:
            try:
                parent.rmdir()
            except OSError:
                break
        self.log.info(f"no episode was saved: removed the empty dataset {self.root} it had created")

    # ------------------------------------------------------------------ status
    def _update_snapshot(self) -> None:
        c = self._controller
        ep = self._episode
        aligner = ep.aligner if ep is not None else None
        dropped_per = {}
        if aligner is not None:
            dropped_per = {n: s.dropped_ticks for n, s in aligner.stats.streams.items()}
        streams = []
        for h in self._health:
            h2 = StreamHealth(**h.__dict__)
            h2.dropped_ticks = dropped_per.get(h.name, 0)
            streams.append(h2)
        total = c.saved_before + c.episodes_recorded
        if self.writer is not None:
            total = self.writer.total_episodes
        with self._snap_lock:
            self._snapshot = Snapshot(
                state=int(c.state),
                message=c.message,
                dataset_root=str(self.root) if self.cfg.mode != "raw" else str(self.cfg.raw_root),
                task=c.plan.task if c.plan else c.config.task,
                episode_index=c.episode_index,
                episodes_recorded=c.episodes_recorded,
                total_episodes=total,
                frames=ep.frames if ep is not None and c.state in (State.RECORDING, State.SAVING) else 0,
                elapsed_s=c.elapsed(self._mono()),
                episode_time_s=c.plan.episode_time_s if c.plan else c.config.episode_time_s,
                dropped_ticks=aligner.stats.ticks_dropped if aligner is not None else 0,
                streams=streams,
                episode_seq=self._episode_seq,
                session=c.session,
            )

    def latency_summary(self, bag_latencies=None) -> str:
        """Stamp -> handed to the video encoders (dataset) and stamp -> written to the mcap (raw)."""
        parts = []
        for label, values in (("stamp->writer", self.latencies_ns), ("stamp->mcap", bag_latencies)):
            if values:
                arr = np.asarray(values, dtype=np.float64) / 1e6
                parts.append(
                    f"{label} p50 {np.percentile(arr, 50):.1f} ms p99 {np.percentile(arr, 99):.1f} ms "
                    f"max {arr.max():.1f} ms"
                )
        return "; ".join(parts)
