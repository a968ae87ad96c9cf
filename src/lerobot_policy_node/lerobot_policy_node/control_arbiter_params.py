"""The control arbiter's parameters: declared with descriptions and ranges, read once into a frozen
config, checked; and the safety limits they give."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np

from lerobot_core.control_mode import ControlMode
from lerobot_core.robots import SO_JOINTS, get_robot_spec
from lerobot_core.ros.params import declare
from lerobot_core.safety import SafetyLimits

SO101_JOINTS = list(SO_JOINTS)  # a parameter default must be a list
INITIAL_MODES = {"policy": ControlMode.POLICY, "human": ControlMode.HUMAN, "hold": ControlMode.HOLD}


@dataclass(frozen=True)
class ControlArbiterConfig:
    joint_names: list[str]
    robot: str
    rate_hz: float
    max_step_rad: float
    source_timeout_s: float
    initial_mode: str
    reset_policy_on_resume: bool
    recorder: str
    mirror_leader: bool
    mirror_tolerance_rad: float
    alignment_timeout_s: float
    pedal_device: str
    pedal_keys: list[str]
    control_priority: int
    autostart: bool = False


def read_parameters(node) -> ControlArbiterConfig:
    """Declare the node's parameters (descriptions, ranges) and read them once; a bad value is a
    ValueError naming the parameter."""
    p = partial(declare, node)

    cfg = ControlArbiterConfig(
        joint_names=p("joint_names", SO101_JOINTS, "the robot's joints, as the sources name them"),
        robot=p(
            "robot",
            "so101_follower",
            "robot type for joint limits (lerobot_core.robots); empty = none",
        ),
        rate_hz=p(
            "rate_hz", 30.0, "control rate: commands to the robot per second [Hz]", range=(1.0, 1000.0)
        ),
        max_step_rad=p(
            "max_step_rad",
            0.05,
            "max change of any joint command per control step [rad]",
            range=(1e-6, 10.0),
        ),
        source_timeout_s=p(
            "source_timeout_s",
            0.5,
            "a driving source silent for longer -> hold; also how fresh a source must be to take over [s]",
            range=(0.001, 60.0),
        ),
        initial_mode=p(
            "initial_mode",
            "policy",
            f"who drives once it first publishes ({' | '.join(INITIAL_MODES)}; hold = wait for an input)",
        ),
        reset_policy_on_resume=p(
            "reset_policy_on_resume", True, "call policy/reset when control returns to the policy"
        ),
        recorder=p("recorder", "recorder", "recorder namespace for save / rerecord / stop"),
        mirror_leader=p(
            "mirror_leader",
            False,
            "leader arm with active motors: mirrors the follower while paused (leader/torque_enable)",
        ),
        mirror_tolerance_rad=p(
            "mirror_tolerance_rad",
            math.radians(2.0),
            "takeover waits until the leader is this close to the follower on every joint [rad]",
            range=(1e-4, 1.0),
        ),
        alignment_timeout_s=p(
            "alignment_timeout_s",
            5.0,
            "a waiting takeover is dropped after this [s]",
            range=(0.1, 60.0),
        ),
        pedal_device=p(
            "pedal_device", "", "foot pedal evdev path (/dev/input/by-id/...-event-kbd); empty = none"
        ),
        pedal_keys=p(
            "pedal_keys",
            ["KEY_A:pause", "KEY_B:takeover", "KEY_C:resume"],
            "pedal key -> command: 'KEY_NAME:command' or 'code:command'",
        ),
        control_priority=p(
            "control_priority",
            50,
            "SCHED_FIFO priority (1-99) of every thread of the arbiter (its executor and the DDS "
            "threads) where permitted (CAP_SYS_NICE or an rtprio limit; else normal scheduling with "
            "a warning); 0 = normal scheduling",
            range=(0, 99),
        ),
        autostart=p("autostart", False, "configure and activate right after start"),
    )
    if cfg.initial_mode not in INITIAL_MODES:
        raise ValueError(
            f"parameter initial_mode={cfg.initial_mode!r}: use one of {', '.join(INITIAL_MODES)}"
        )
    return cfg


def safety_limits(cfg: ControlArbiterConfig) -> SafetyLimits:
    """The robot's joint limits (none for an unknown joint) and the per-step bound."""
    names, n = cfg.joint_names, len(cfg.joint_names)
    lower = upper = None
    if cfg.robot:
        spec = get_robot_spec(cfg.robot)
        lower = [spec.limits[j].lower if j in spec.limits else -np.inf for j in names]
        upper = [spec.limits[j].upper if j in spec.limits else np.inf for j in names]
    return SafetyLimits.build(n, lower, upper, cfg.max_step_rad)
