"""One rosbag2 -> episodes of a LeRobotDataset v3: the checks before anything is written (readable,
every contract topic present with a supported type, first messages decodable, clocks), and the
conversion of one bag (:func:`import_one`) through the alignment core into a
:class:`~lerobot_dataset.DatasetWriter`. Used by the serial import
(:mod:`~lerobot_recorder.bag_import`) and by its parallel workers
(:mod:`~lerobot_recorder.bag_import_parallel`). ROS-free: uses ``rosbags`` only.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rosbags.rosbag2 import Reader

from lerobot_core.alignment import HEADER, Aligner, AlignmentStats
from lerobot_core.contract import Contract, ContractError, NonFiniteSampleError
from lerobot_core.time import NS_PER_S as _NS
from lerobot_core.time import stamp_to_ns

from . import bag_read
from .bag_io import deserialize

NON_FINITE_CHOICES = ("refuse", "drop")


class BagImportError(RuntimeError):
    """A bag that cannot be imported; the message names the bag (and topic when it applies)."""


@dataclass
class BagPlan:
    path: Path
    connections: dict  # contract topic -> rosbags Connection
    split_connection: object | None
    first_messages: dict
    total_messages: int
    duration_s: float
    clock_offset_ns: int = 0  # bag log time - header stamps (non-zero for sim-time stamps)


@dataclass
class EpisodeSummary:
    bag: str
    episode_index: int
    frames: int
    stats: AlignmentStats


@dataclass
class ImportSummary:
    output: Path
    episodes: list[EpisodeSummary] = field(default_factory=list)
    skipped_segments: int = 0
    non_finite: dict[str, int] = field(default_factory=dict)  # --non-finite drop: messages dropped per topic
    bag_seconds: float = 0.0
    wall_seconds: float = 0.0
    video_settings: str = ""  # every encoder setting, printed in the report

    @property
    def frames(self) -> int:
        return sum(e.frames for e in self.episodes)

    @property
    def dropped_ticks(self) -> int:
        return sum(e.stats.ticks_dropped for e in self.episodes)

    def stream_rates(self) -> dict[str, tuple[int, float | None]]:
        """Per stream: messages used and the measured rate over all episodes."""
        out: dict[str, tuple[int, float | None]] = {}
        spans: dict[str, float] = {}
        counts: dict[str, int] = {}
        for ep in self.episodes:
            for name, s in ep.stats.streams.items():
                counts[name] = counts.get(name, 0) + s.received
                if s.received >= 2 and s.last_ns is not None and s.first_ns is not None:
                    spans[name] = spans.get(name, 0.0) + (s.last_ns - s.first_ns) / _NS
                    counts[name + "#intervals"] = counts.get(name + "#intervals", 0) + s.received - 1
        for name in [n for n in counts if not n.endswith("#intervals")]:
            span = spans.get(name, 0.0)
            intervals = counts.get(name + "#intervals", 0)
            out[name] = (counts[name], intervals / span if span > 0 else None)
        return out

    def late_samples(self) -> dict[str, int]:
        """Per stream: samples the aligner could not use because their time was at or before a tick it
        had already written (they came late, or went backwards in time)."""
        out: dict[str, int] = {}
        for ep in self.episodes:
            for name, s in ep.stats.streams.items():
                out[name] = out.get(name, 0) + s.late
        return out

    def report(self) -> str:
        lines = [
            f"imported {len(self.episodes)} episode(s), {self.frames} frames, {self.dropped_ticks} dropped ticks "
            f"into {self.output}",
        ]
        if self.video_settings:
            lines.append(f"  video: {self.video_settings}")
        if self.wall_seconds > 0 and self.bag_seconds > 0:
            lines.append(
                f"  {self.bag_seconds:.1f} s of recording in {self.wall_seconds:.1f} s "
                f"({self.bag_seconds / self.wall_seconds:.1f}x real time)"
            )
        for ep in self.episodes:
            drops = ""
            if ep.stats.ticks_dropped:
                per = {n: dict(s.drop_reasons) for n, s in ep.stats.streams.items() if s.dropped_ticks}
                drops = f", dropped {ep.stats.ticks_dropped} {per}"
            lines.append(f"  episode {ep.episode_index}: {ep.frames} frames from {ep.bag}{drops}")
        if self.skipped_segments:
            lines.append(f"  {self.skipped_segments} segment(s) without a single complete tick were skipped")
        if self.non_finite:
            lines.append(
                f"  dropped {sum(self.non_finite.values())} message(s) holding NaN or inf (--non-finite drop): "
                + ", ".join(f"{t}: {n}" for t, n in sorted(self.non_finite.items()))
            )
        lines.append("  streams:")
        late = self.late_samples()
        for name, (count, rate) in self.stream_rates().items():
            rate_text = f"{rate:.2f} Hz" if rate is not None else "rate n/a"
            extra = ""
            if late.get(name):
                extra = (
                    f", {late[name]} late or backwards (stamped at or before a frame already written: "
                    "not used; raise --latency-margin if the stream lags)"
                )
            lines.append(f"    {name}: {count} msgs, {rate_text}{extra}")
        return "\n".join(lines)


# ---------------------------------------------------------------------- progress bar
class ProgressBar:
    """A one-line progress bar on stderr (no tqdm): redraws at most every ``interval`` s."""

    def __init__(self, total: int, stream=None, width: int = 30, interval: float = 0.2, enabled: bool = True):
        self.total = max(int(total), 1)
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.interval = interval
        self.enabled = enabled
        self.done = 0
        self.label = ""
        self._t0 = time.monotonic()
        self._last = 0.0

    def update(self, n: int = 1, label: str | None = None) -> None:
        self.done += n
        if label is not None:
            self.label = label
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last >= self.interval or self.done >= self.total:
            self._last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        frac = min(self.done / self.total, 1.0)
        filled = int(round(frac * self.width))
        elapsed = now - self._t0
        eta = elapsed / frac - elapsed if frac > 0 else 0.0
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(
            f"\r{self.label[:40]:<40} [{bar}] {frac * 100:5.1f}% {self.done}/{self.total} msgs "
            f"{elapsed:5.1f}s eta {eta:5.1f}s"
        )
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()


# ---------------------------------------------------------------------- inspection
def _find_connection(reader, topic: str):
    candidates = [topic] if topic.startswith("/") else [topic, "/" + topic]
    for name in candidates:
        for conn in reader.connections:
            if conn.topic == name:
                return conn
    return None


def open_bag(path: Path) -> Reader:
    if not path.exists():
        raise BagImportError(f"{path}: no such bag directory")
    if not path.is_dir():
        raise BagImportError(f"{path}: expected a rosbag2 directory (with metadata.yaml), got a file")
    if not (path / "metadata.yaml").is_file():
        data = sorted(p.name for p in path.iterdir() if p.suffix in (".mcap", ".db3"))
        if data:  # a recorder killed before it wrote the metadata leaves the data files alone
            raise BagImportError(
                f"{path}: no metadata.yaml beside {', '.join(data)} (the recording was not closed cleanly?): "
                f"`ros2 bag reindex {path}` rebuilds it from the data files"
            )
        raise BagImportError(f"{path}: not a rosbag2 directory (no metadata.yaml and no .mcap or .db3 file)")
    try:
        reader = Reader(path)
        reader.open()
    except Exception as exc:  # rosbags raises several types for unreadable bags
        raise BagImportError(f"{path}: cannot open the bag (corrupt or not a rosbag2?): {exc}") from None
    return reader


def inspect_bag(
    path: str | os.PathLike, contract: Contract, split_topic: str | None = None
) -> tuple[BagPlan, Contract]:
    """Validate one bag against the contract; returns its plan and the contract resolved on it."""
    path = Path(path)
    reader = open_bag(path)
    try:
        connections = {}
        for topic, stream in contract.streams.items():
            conn = _find_connection(reader, topic)
            if conn is None:
                if not stream.required or topic == contract.task_topic and contract.task_text:
                    continue
                present = ", ".join(sorted(f"{c.topic} ({c.msgtype})" for c in reader.connections)) or "none"
                raise BagImportError(f"{path}: topic {topic} is not in the bag (topics: {present})")
            try:
                contract.check_msgtype(topic, conn.msgtype)
            except ValueError as exc:
                raise BagImportError(f"{path}: {exc}") from None
            connections[topic] = conn
        split_conn = None
        if split_topic:
            split_conn = _find_connection(reader, split_topic)
            if split_conn is None:
                raise BagImportError(f"{path}: split topic {split_topic} is not in the bag")
        first: dict = {}
        first_log: dict = {}
        for topic, conn in connections.items():
            try:
                for _, log_time, raw in bag_read.messages(reader, [conn]):
                    first[topic] = deserialize(raw, conn.msgtype)
                    first_log[topic] = log_time
                    break
            except Exception as exc:
                raise BagImportError(f"{path}: topic {topic}: cannot read messages: {exc}") from None
            if topic not in first:
                if contract.streams[topic].required:
                    raise BagImportError(f"{path}: topic {topic} has no messages")
                continue
            stream = contract.streams[topic]
            header = getattr(first[topic], "header", None)
            if (
                stream.timeline == HEADER
                and header is not None
                and header.stamp.sec == 0
                and header.stamp.nanosec == 0
            ):
                raise BagImportError(
                    f"{path}: topic {topic}: header stamps are zero (never set by the publisher); "
                    "set 'timeline: receive' for it in the contract"
                )
        try:
            resolved = contract.resolve(first)
        except (ValueError, ContractError) as exc:
            raise BagImportError(f"{path}: {exc}") from None
        total = sum(c.msgcount for c in connections.values()) + (split_conn.msgcount if split_conn else 0)
        duration = (reader.end_time - reader.start_time) / _NS if reader.message_count else 0.0
        offset = _clock_offset(path, contract, first, first_log)
        plan = BagPlan(path, connections, split_conn, first, total, duration, offset)
        return plan, resolved
    finally:
        reader.close()


_SAME_CLOCK_NS = 10 * _NS  # header stamps further than this from the log time are on another clock


def _clock_offset(path: Path, contract: Contract, first: dict, first_log: dict) -> int:
    """Offset between the bag's log time and the header stamps (sim time vs wall time).

    The import uses log time as its clock; with stamps on another clock (a simulation's /clock
    recorded by a wall-clock rosbag2) it shifts that clock by the offset. Streams on the receive
    timeline cannot be aligned with such stamps: that is an error naming the topics.
    """
    offsets = {}
    for topic, msg in first.items():
        if contract.streams[topic].timeline == HEADER and getattr(msg, "header", None) is not None:
            offsets[topic] = first_log[topic] - stamp_to_ns(msg.header.stamp)
    far = {t: o for t, o in offsets.items() if abs(o) > _SAME_CLOCK_NS}
    if not far:
        return 0
    spread = max(offsets.values()) - min(offsets.values())
    if spread > _SAME_CLOCK_NS:
        detail = ", ".join(f"{t}: {o / _NS:+.1f} s" for t, o in offsets.items())
        raise BagImportError(
            f"{path}: header stamps of different topics are on different clocks (log time - stamp: {detail})"
        )
    receive = [
        t
        for t in first
        if contract.streams[t].timeline != HEADER and not contract.streams[t].msgtype.endswith("String")
    ]
    if receive:
        topic, off = next(iter(far.items()))
        raise BagImportError(
            f"{path}: topic {topic} is stamped {off / _NS:.1f} s away from the bag's log time (sim time?), "
            f"but {', '.join(receive)} use the receive timeline: the two cannot be aligned; give those topics "
            "header stamps or set every topic to 'timeline: receive'"
        )
    # log - stamp = clock offset + transport delay: the smallest is the best estimate of the offset
    return int(min(offsets.values()))


def check_same_features(reference: dict, other: dict, where: str) -> None:
    if reference == other:
        return
    diffs = []
    for key in sorted(set(reference) | set(other)):
        a, b = reference.get(key), other.get(key)
        if a != b:
            diffs.append(
                f"{key}: {_describe(a)} vs {_describe(b)}"
                if a and b
                else f"{key} only in {'first' if a else 'this'}"
            )
    raise BagImportError(f"{where}: features differ from the dataset's: " + "; ".join(diffs))


def _describe(ft: dict | None) -> str:
    if not ft:
        return "-"
    text = f"{ft['dtype']}{tuple(ft['shape'])} {ft.get('names') if ft['dtype'] != 'video' else ''}".strip()
    return f"{text} depth in {ft['depth_unit']}" if ft.get("depth_unit") else text


# ---------------------------------------------------------------------- import
def check_bags(
    bags: Sequence[str | os.PathLike], contract: Contract, split_topic: str | None = None
) -> tuple[list[BagPlan], Contract]:
    """Validate every bag against the contract (nothing is written); the plans and resolved contract."""
    if not bags:
        raise BagImportError("no bags given")
    plans: list[BagPlan] = []
    resolved: Contract | None = None
    for bag in bags:
        plan, res = inspect_bag(bag, contract, split_topic)
        if resolved is None:
            resolved = res
        else:
            check_same_features(resolved.features(), res.features(), str(plan.path))
        plans.append(plan)
    return plans, resolved


def describe_plan(plans: list[BagPlan], contract: Contract) -> str:
    """What an import would do, for --check."""
    lines = [f"{len(plans)} bag(s) fit the contract ({contract.source}), {contract.fps} fps; features:"]
    for key, ft in contract.features().items():
        names = "" if ft["dtype"] == "video" else f" {ft['names']}"
        lines.append(f"  {key}: {ft['dtype']} {tuple(ft['shape'])}{names}")
    for plan in plans:
        topics = ", ".join(f"{t} ({c.msgcount})" for t, c in plan.connections.items())
        shift = f", stamps {plan.clock_offset_ns / _NS:+.1f} s from log time" if plan.clock_offset_ns else ""
        lines.append(f"  {plan.path}: {plan.duration_s:.1f} s{shift}: {topics}")
    return "\n".join(lines)


# What the dataset writer advises in its own (Python API) words, and what a user of this command does.
_API_ADVICE = (
    (
        r"free space and call save_episode\(\) again, or discard_episode\(\)",
        "free space, then import the bags not imported (listed below) again with --resume",
    ),
    (r"DatasetWriter\.resume\(\) completes it", "`lerobot-dataset-info {root} --repair` completes it"),
    (r"use DatasetWriter\.resume\(\) to append", "pass --resume to append"),
    (
        r"discard_episode\(\), free space, record again",
        "free space, then import the bags not imported again with --resume",
    ),
    (r"\(discard_episode\(\) to drop it\)", "(the episode was not saved)"),
    (r"; (call )?discard_episode\(\)", "; the episode was not saved"),
    (r"save_episode\(\): ", ""),
)


def in_cli_words(message: str, root: Path) -> str:
    """A DatasetWriter message with its Python-API advice replaced by what the command's user does."""
    import re

    for pattern, words in _API_ADVICE:
        message = re.sub(pattern, words.format(root=root), message)
    return message


def import_one(
    plan, contract, writer, summary, bar, label, latency_margin_s, log, non_finite="refuse"
) -> None:
    from lerobot_dataset import DatasetError

    aligner = Aligner(
        contract.fps,
        contract.stream_specs(),
        latency_margin_s=latency_margin_s,
        history_s=max(10.0, 4 * latency_margin_s),
    )
    topic_of = {conn.id: topic for topic, conn in plan.connections.items()}
    split_id = plan.split_connection.id if plan.split_connection is not None else None
    conns = list(plan.connections.values()) + (
        [plan.split_connection] if plan.split_connection is not None else []
    )
    current_topic = None

    def write(frames) -> None:
        for f in frames:
            frame, task = contract.make_frame(f.values)
            writer.add_frame(frame, task=task)

    def close_episode(end_ns: int | None) -> None:
        write(aligner.finish(end_ns))
        stats = aligner.stats
        if writer.episode_frames == 0:
            summary.skipped_segments += 1
            return
        ep = writer.total_episodes
        writer.save_episode()
        summary.episodes.append(EpisodeSummary(str(plan.path), ep, stats.ticks_emitted, stats))
        if log:
            log(f"{plan.path}: episode {ep}: {stats.summary()}")

    reader = open_bag(plan.path)
    try:
        try:
            for conn, log_time, raw in bag_read.messages(reader, conns):
                bar.update(1, label)
                # the clock of the streams: log time, shifted when the stamps are on another clock
                now = log_time - plan.clock_offset_ns
                if conn.id == split_id:
                    current_topic = plan.split_connection.topic
                    close_episode(now - 1)  # the marker's instant belongs to the next episode
                    aligner.restart(start_ns=now)
                    continue
                current_topic = topic_of[conn.id]
                try:
                    msg = deserialize(raw, conn.msgtype)
                except Exception as exc:  # a corrupt payload (rosbags raises several types)
                    raise BagImportError(
                        f"{plan.path}: topic {current_topic}: cannot read the bag at log time {log_time} "
                        f"({type(exc).__name__}: {exc})"
                    ) from None
                try:
                    sample = contract.extract(current_topic, msg, conn.msgtype, now)
                except NonFiniteSampleError as exc:
                    if non_finite == "drop":
                        summary.non_finite[current_topic] = summary.non_finite.get(current_topic, 0) + 1
                        continue
                    raise BagImportError(
                        f"{plan.path}: {exc}, at log time {log_time}: episode {writer.total_episodes} is not "
                        "imported (--non-finite drop imports it without such messages)"
                    ) from None
                aligner.push(current_topic, *sample)
                current_topic = None  # a frame assembled below may fail on any topic: its error names it
                write(aligner.pop_ready(now_ns=now))
            current_topic = None
            close_episode(None)
        except DatasetError as exc:
            raise BagImportError(
                f"{plan.path}: writing episode {writer.total_episodes} failed: {in_cli_words(str(exc), writer.root)}"
            ) from None
        except (ValueError, KeyError) as exc:
            text = str(exc).strip("'\"")
            named = text.startswith("topic ") or (current_topic is not None and current_topic in text)
            where = f"topic {current_topic}: " if current_topic and not named else ""
            raise BagImportError(f"{plan.path}: {where}{text}") from None
        except BagImportError:
            raise
        except Exception as exc:  # corrupt data inside the bag (rosbags / CDR errors)
            where = f"topic {current_topic}: " if current_topic else ""
            raise BagImportError(
                f"{plan.path}: {where}cannot read the bag ({type(exc).__name__}: {exc})"
            ) from None
    finally:
        reader.close()
