"""The recorder node's parameters: their declaration (names, defaults, descriptions, ranges) and the
checked configuration read from them (:class:`RecorderNodeConfig`)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from lerobot_core.contract import find_contract
from lerobot_core.ros.params import declare
from lerobot_dataset import DatasetError
from lerobot_dataset.depth import X265_PRESETS, check_lerobot_version
from lerobot_recorder.episode_control import EpisodeConfig, check_episode_boundaries
from lerobot_recorder.live_recorder import MODES, LiveConfig, RecorderError


@dataclass(frozen=True)
class RecorderNodeConfig:
    contract: str
    live: LiveConfig
    auto_record: bool
    exit_when_done: bool
    status_rate_hz: float
    tick_ack: bool = False


def declare_parameters(node) -> None:
    """Declare every parameter of the recorder node on `node` (with its description and range)."""
    p = partial(declare, node)

    p("autostart", False, "configure and activate right after start")
    p("contract", "", "mapping contract YAML, or the name of a shipped one (so101_one_camera)")
    p("dataset_root", "", "dataset folder: new/empty, or an existing dataset with resume:=true")
    p("resume", False, "append to the existing dataset in dataset_root")
    p("mode", "dataset", "dataset | raw (mcap bags only) | both")
    p("raw_dir", "", "folder of per-episode raw mcap bags (default: <dataset_root>_raw)")
    p("task", "", "task text of each episode (overrides the contract's fixed task when set)")
    p("episode_time_s", 60.0, "episode length [s] (> 0); with episode_boundaries sim: the longest one")
    p(
        "episode_boundaries",
        "time",
        "time: an episode lasts episode_time_s | sim: an episode is one simulation episode, from the "
        "sim's reset to the step it reports done (success or truncation), read on episode_info_topic",
        read_only=True,
    )
    p(
        "episode_info_topic",
        "sim/episode_info",
        "episode_boundaries sim: the sim's lerobot_msgs/EpisodeInfo topic",
    )
    p("reset_time_s", 60.0, "reset period after each episode [s]; 0 = none")
    p("num_episodes", 50, "episodes a session records (auto_record)", range=(1, 1_000_000))
    p("auto_record", False, "on activate, record num_episodes episodes like lerobot-record")
    p("exit_when_done", False, "exit (code 0) once the session is recorded and the dataset finalized")
    p("streams", [""], "record only these features / topics of the contract ([''] = all)")
    p("non_finite", "refuse", "a message holding NaN or inf: refuse (fail the episode) | drop (skip it)")
    p("vcodec", "libsvtav1", "video codec (libsvtav1, libx264, h264, ...)")
    p("crf", 30, "video quality (lower = better, bigger)", range=(0, 63))
    p(
        "lerobot_version",
        "0.6",
        "LeRobot version the dataset is for: 0.6 (default) or 0.4.4; depth cameras need 0.6",
    )
    p(
        "depth_preset",
        "",
        "libx265 preset of depth cameras ('' = its default, as LeRobot 0.6; ultrafast ~5x faster, "
        "same depth: the encoding is lossless)",
    )
    p(
        "preset",
        "",
        "encoder preset: svt-av1 0-13, x264 ultrafast..veryslow; '' = LeRobot 0.4.4's quality (svt-av1 10)",
    )
    p(
        "encoder_queue_size",
        30,
        "frames each camera encoder may queue before backpressure",
        range=(1, 10000),
    )
    p("latency_margin_s", 0.1, "ticks older than now - margin are settled [s]", range=(0.0, 10.0))
    p("rate_tolerance", 0.9, "a stream is below rate under tolerance x expected rate", range=(0.01, 1.0))
    p(
        "max_ingest_mb",
        512.0,
        "queued message bytes before the oldest are dropped (reported)",
        range=(1.0, 1e6),
    )
    p("status_rate_hz", 1.0, "periodic recorder/status rate [Hz]", range=(0.1, 50.0))
    p(
        "tick_ack",
        False,
        "lockstep: acknowledge on sim/tick_ack each sim tick taken in (a sim listing this node in "
        "required_consumers then waits for the recorder; use with use_sim_time:=true)",
    )
    p("repo_id", "", "Hugging Face Hub dataset id <user or org>/<name> (for push_to_hub)")
    p(
        "push_to_hub",
        False,
        "exit_when_done: push the finalized dataset to repo_id (lerobot-ros-dataset-push)",
    )
    p("private", False, "push_to_hub: create the Hub repo private")


def read_config(node) -> RecorderNodeConfig:
    """The parameters of `node` as a checked configuration; RecorderError names a bad parameter."""
    g = node.get_parameter
    contract = find_contract(str(g("contract").value))  # a path, or a shipped contract's name
    if not contract:
        raise RecorderError("parameter 'contract' is empty: give the mapping contract YAML")
    root = str(g("dataset_root").value)
    mode = str(g("mode").value)
    if mode not in MODES:
        raise RecorderError(f"parameter 'mode' must be one of {MODES}, got {mode!r}")
    if not root and not (mode == "raw" and g("raw_dir").value):
        raise RecorderError("parameter 'dataset_root' is empty: give the dataset folder")
    streams = tuple(s for s in g("streams").value if s)
    try:
        check_lerobot_version(str(g("lerobot_version").value))
    except DatasetError as exc:
        raise RecorderError(f"parameter 'lerobot_version': {exc}") from None
    if str(g("depth_preset").value) not in ("", *X265_PRESETS):
        raise RecorderError(
            f"parameter 'depth_preset' must be '' or one of {', '.join(X265_PRESETS)}, "
            f"got {g('depth_preset').value!r}"
        )
    boundaries = check_episode_boundaries(str(g("episode_boundaries").value))
    info_topic = node.resolve_topic_name(str(g("episode_info_topic").value))
    episode = EpisodeConfig(
        episode_time_s=float(g("episode_time_s").value),
        reset_time_s=float(g("reset_time_s").value),
        num_episodes=int(g("num_episodes").value),
        task=str(g("task").value),
    )
    live = LiveConfig(
        dataset_root=root or str(g("raw_dir").value),
        mode=mode,
        raw_dir=str(g("raw_dir").value),
        resume=bool(g("resume").value),
        vcodec=str(g("vcodec").value),
        crf=int(g("crf").value),
        preset=str(g("preset").value),
        lerobot_version=str(g("lerobot_version").value),
        depth_preset=str(g("depth_preset").value),
        encoder_queue_size=int(g("encoder_queue_size").value),
        episode=episode,
        latency_margin_s=float(g("latency_margin_s").value),
        rate_tolerance=float(g("rate_tolerance").value),
        max_ingest_mb=float(g("max_ingest_mb").value),
        streams=streams,
        episode_boundaries=boundaries,
        episode_info_topic=info_topic,
        non_finite=str(g("non_finite").value),
    )
    return RecorderNodeConfig(
        contract=contract,
        live=live,
        auto_record=bool(g("auto_record").value),
        exit_when_done=bool(g("exit_when_done").value),
        status_rate_hz=float(g("status_rate_hz").value),
        tick_ack=bool(g("tick_ack").value),
    )
