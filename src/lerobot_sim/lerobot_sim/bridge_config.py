"""The sim bridges' parameters and their config (ROS-free): what ``SimBridgeNode`` declares and reads."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

MODES = ("lockstep", "realtime")


@dataclass(frozen=True)
class BridgeConfig:
    env_id: str
    env_kwargs: dict[str, Any]
    mode: str
    fps: float  # 0 = the env's own rate
    seed: int  # -1 = unseeded; episode i is reset with seed + i
    auto_reset: bool
    reset_delay_s: float
    continue_after_done: bool
    command_timeout_s: float
    publish_clock: bool
    frame_id: str
    state_names: tuple[str, ...]
    single_camera_name: str
    robot_description_file: str
    idle_republish_s: float
    required_consumers: tuple[str, ...] = ()
    jpeg_quality: int = 90


def common_parameters(default_env_id: str, default_state_names: Sequence[str]) -> list[tuple[str, Any, str]]:
    """(name, default, description) of every bridge's parameters (a subclass declares its own too)."""
    return [
        ("env_id", default_env_id, "gymnasium id of the environment, e.g. gym_pusht/PushT-v0"),
        ("env_kwargs", "{}", "JSON object of keyword arguments for gymnasium.make"),
        ("mode", "realtime", "lockstep: one control step per command, publishes /clock; realtime"),
        ("fps", 0.0, "control rate in Hz (0 = the environment's own render_fps)"),
        ("seed", -1, "seed of the first episode; episode i uses seed + i (-1 = unseeded)"),
        ("auto_reset", True, "start a new episode when one ends (realtime: after reset_delay_s)"),
        ("reset_delay_s", 1.0, "realtime: seconds to hold a finished episode before auto reset"),
        (
            "continue_after_done",
            False,
            "auto_reset false: the sim goes on after an episode ends (cube lifted, or its step limit), "
            "following commands and publishing, as a robot would (replay and teleop targets); false = it "
            "waits, publishing nothing, for a reset on sim/reset",
        ),
        ("command_timeout_s", 0.5, "realtime: commands older than this are stale; hold position"),
        ("publish_clock", True, "lockstep: publish /clock with the simulation time"),
        ("frame_id", "base_link", "frame_id of joint_states"),
        ("state_names", list(default_state_names) or [""], "names of agent_pos entries"),
        ("single_camera_name", "image", "camera name for envs whose pixels is a single image"),
        ("robot_description_file", "", "URDF file published on robot_description (empty = none)"),
        (
            "idle_republish_s",
            1.0,
            "lockstep: republish the last observation when no command came "
            "for this long, so late subscribers get a first observation (0 = never)",
        ),
        (
            "required_consumers",
            [""],
            "lockstep: node names that must acknowledge each tick on sim/tick_ack before the sim steps "
            "past it (e.g. [recorder]); the sim stops when one of them leaves the graph",
        ),
        (
            "jpeg_quality",
            90,
            "JPEG quality (1-100) of cameras/<name>/image_raw/compressed, which is built only while "
            "someone subscribes to it (a policy on another host: docs/remote_inference.md)",
        ),
        ("autostart", False, "configure and activate right after start"),
    ]


def read_bridge_config(value: Callable[[str], Any]) -> BridgeConfig:
    """The config from ``value(name)`` (a declared parameter's value); ValueError naming a bad one."""
    mode = value("mode")
    if mode not in MODES:
        raise ValueError(f"parameter mode={mode!r} must be one of {MODES}")
    try:
        kwargs = json.loads(value("env_kwargs") or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"parameter env_kwargs is not valid JSON: {exc}") from exc
    if not isinstance(kwargs, dict):
        raise ValueError("parameter env_kwargs must be a JSON object")
    if not value("env_id"):
        raise ValueError("parameter env_id is empty")
    if not 1 <= int(value("jpeg_quality")) <= 100:
        raise ValueError(f"parameter jpeg_quality={value('jpeg_quality')} must be in 1..100")
    return BridgeConfig(
        env_id=value("env_id"),
        env_kwargs=kwargs,
        mode=mode,
        fps=float(value("fps")),
        seed=int(value("seed")),
        auto_reset=bool(value("auto_reset")),
        reset_delay_s=float(value("reset_delay_s")),
        continue_after_done=bool(value("continue_after_done")),
        command_timeout_s=float(value("command_timeout_s")),
        publish_clock=bool(value("publish_clock")),
        frame_id=value("frame_id"),
        state_names=tuple(n for n in value("state_names") if n),
        single_camera_name=value("single_camera_name"),
        robot_description_file=value("robot_description_file"),
        idle_republish_s=float(value("idle_republish_s")),
        required_consumers=tuple(n for n in value("required_consumers") if n),
        jpeg_quality=int(value("jpeg_quality")),
    )
