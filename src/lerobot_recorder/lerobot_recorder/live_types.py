"""The live recorder's vocabulary, ROS-free: its configuration (:class:`LiveConfig`), errors, the
outcome of an episode, the status snapshot, the episode being recorded, and the checks made before
recording (the dataset folder, the streams asked for)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from lerobot_core.alignment import Aligner
from lerobot_core.contract import IMAGE_TYPES, LATCHED_TYPES, Contract
from lerobot_dataset import format as dsfmt

from .episode_control import EpisodeConfig, State
from .rate_audit import AuditSpec, StreamHealth
from .raw_bag import ThreadedBagWriter

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


def audit_specs(contract: Contract) -> list[AuditSpec]:
    """What the rate audit expects of each stream: the contract's rate (images: its fps; latched
    streams, published on change: none) and its staleness bound."""
    expected = {}
    for topic, st in contract.streams.items():
        if st.msgtype in LATCHED_TYPES:  # published on change: no rate to expect
            expected[topic] = 0.0
        elif st.msgtype in IMAGE_TYPES:
            expected[topic] = float(contract.fps)
        else:
            expected[topic] = float(st.rate or contract.fps)
    return [
        AuditSpec(
            name=topic,
            topic=topic,
            expected_rate_hz=expected[topic],
            stale_after_s=(st.max_staleness if st.max_staleness else 1e9)
            if st.msgtype not in LATCHED_TYPES
            else 1e9,
        )
        for topic, st in contract.streams.items()
    ]
