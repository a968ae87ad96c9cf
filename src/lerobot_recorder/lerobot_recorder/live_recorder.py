"""The recorder node's engine, ROS-free: messages in, episodes out, all work on one worker thread.

The node's subscription callbacks only call :meth:`LiveRecorder.ingest` (serialized bytes + receive
time: an append to a queue and a counter). The worker thread does everything that takes time:
deserializing, the alignment core (one fresh :class:`~lerobot_core.alignment.Aligner` per
episode, exactly as bag import does per bag), image conversion, ``DatasetWriter.add_frame`` (whose
encoders run on their own threads), saving, and handing the raw bytes to the raw-bag writer
thread. Services and the action call :meth:`request` and wait on the returned future.

Backpressure is visible, never silent: when the video encoders fall behind, ``add_frame`` blocks
the worker, the ingest queue (:mod:`~lerobot_recorder.ingest_queue`) grows and its size is reported
(``ingest_backlog``, ``encoder_backlog``); only when the queue exceeds ``max_ingest_mb`` are the
oldest messages dropped, counted per stream and reported in the status and the log.

The parts: the vocabulary (:mod:`~lerobot_recorder.live_types`), sim episode boundaries
(:mod:`~lerobot_recorder.sim_routing`), commands and their effects
(:mod:`~lerobot_recorder.episode_commands`); this module is the worker that composes them.

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
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from lerobot_core.alignment import RECEIVE
from lerobot_core.contract import CONTROL_STATUS, IMAGE_TYPES, LATCHED_TYPES, Contract, NonFiniteSampleError
from lerobot_dataset import DatasetError, DatasetWriter
from lerobot_dataset import format as dsfmt
from lerobot_dataset.storage import is_disk_full

from .episode_commands import EpisodeCommands
from .episode_control import (
    EpisodeController,
    EpisodeError,
    State,
    check_episode_boundaries,
)
from .ingest_queue import IngestQueue
from .live_types import (
    MODES,
    NON_FINITE_CHOICES,
    EpisodeOutcome,
    LiveConfig,
    NoMessageYetError,
    RecorderError,
    Snapshot,
    _Episode,
    _preset,
    audit_specs,
    cdr_header_stamp,
    check_dataset_root,
    select_streams,
)
from .rate_audit import RateAudit, StreamHealth
from .raw_bag import RawBagError, RawRecording
from .sim_routing import SimEpisodeRouting


class LiveRecorder(SimEpisodeRouting, EpisodeCommands):
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
        self._taken: dict[str, int] = {}
        self._acked_ns = -1
        check_episode_boundaries(cfg.episode_boundaries)
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
        self.audit_specs = audit_specs(self.contract)
        self._audit = RateAudit(self.audit_specs, window_s=cfg.audit_window_s, tolerance=cfg.rate_tolerance)
        self._audit_lock = threading.Lock()
        self._ingest = IngestQueue(cfg.max_ingest_mb, self._streams)
        self._wake = threading.Event()
        self._cmds: collections.deque = collections.deque()
        self._latest_raw: dict[str, bytes] = {}
        self._first_message_wall: float | None = None  # wall time of the first message of any stream
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
        self._init_sim_routing()
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
        self._ingest.put(topic, data, receive_ns)
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
        snap.ingest_backlog, snap.ingest_dropped = self._ingest.backlog()
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
            item = self._ingest.pop()
            if item is None:
                break
            topic, data, recv = item
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
        report = self._ingest.drop_report()
        if report and self._mono() - self._last_drop_warn > 2.0:
            self._last_drop_warn = self._mono()
            self.log.warning(report)

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
