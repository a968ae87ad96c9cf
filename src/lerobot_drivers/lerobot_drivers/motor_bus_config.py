"""The motor bus node's ROS-free parts: its parameters, where its calibration comes from, its bus status.

The node (motor_bus_node.py) declares ``PARAMETERS`` and builds ``MotorBusConfig`` from them; the
rules here are tested without ROS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from lerobot_core.calibration import (
    CalibrationError,
    calibration_path,
    find_calibration_file,
    load_calibration,
)
from lerobot_core.robots import RobotSpec

SAFE_STATES = ("hold", "torque_off")


@dataclass(frozen=True)
class MotorBusConfig:
    robot: str
    port: str
    baudrate: int
    robot_id: str
    calibration_file: str
    calibration_dir: str
    read_only: bool
    use_degrees: bool
    rate_hz: float
    timeout_ms: float
    joint_prefix: str
    safe_state: str
    command_timeout_s: float
    max_step_rad: float
    connect_timeout_s: float
    reconnect_period_s: float
    diagnostics_period_s: float
    publish_lerobot_units: bool
    autostart: bool


# name -> (default, description, declare's keyword arguments); read only unless said otherwise
PARAMETERS: dict[str, tuple[Any, str, dict]] = {
    "robot": ("so101_follower", "LeRobot robot type (so101_follower, so101_leader, koch_follower...)", {}),
    "port": ("/dev/ttyACM0", "serial port of the bus (a /dev/serial/by-id path is stable)", {}),
    "baudrate": (1_000_000, "bus baud rate [bit/s]", {"range": (9600, 4_000_000)}),
    "robot_id": ("", "LeRobot robot id: calibration from LeRobot's location; empty = servos' EEPROM", {}),
    "calibration_file": ("", "explicit calibration JSON path (overrides robot_id)", {}),
    "calibration_dir": ("", "folder holding <robot_id>.json (LeRobot's calibration_dir)", {}),
    "read_only": (False, "leader arm: torque off, no commands, states only", {}),
    "use_degrees": (False, "LeRobot units in DEGREES instead of RANGE_M100_100 for body joints", {}),
    "rate_hz": (100.0, "bus read/write cycle and joint_states rate [Hz]", {"range": (1.0, 1000.0)}),
    "timeout_ms": (20.0, "per-transaction reply timeout [ms]", {"range": (1.0, 1000.0)}),
    "joint_prefix": ("", "prefix added to joint names (bimanual: right_ / left_)", {}),
    "safe_state": ("hold", "on deactivate/shutdown/command timeout: hold | torque_off", {}),
    "command_timeout_s": (
        0.5,
        "no command for this long -> safe state [s]; 0 = never",
        {"read_only": False, "range": (0.0, 60.0)},
    ),
    "max_step_rad": (
        0.35,
        "max goal distance from present position per cycle [rad]; 0 = off",
        {"read_only": False, "range": (0.0, 6.3)},
    ),
    "connect_timeout_s": (5.0, "retry opening the bus this long in configure [s]", {"range": (0.0, 120.0)}),
    "reconnect_period_s": (0.5, "retry period after the bus vanished [s]", {"range": (0.05, 60.0)}),
    "diagnostics_period_s": (
        1.0,
        "diagnostics + temperature/voltage read period [s]",
        {"range": (0.1, 60.0)},
    ),
    "publish_lerobot_units": (True, "also publish joint_states_lerobot (LeRobot units in position)", {}),
    "autostart": (False, "configure and activate right after start", {}),
}
assert list(PARAMETERS) == [f.name for f in fields(MotorBusConfig)]


def read_config(declare: Callable[..., Any]) -> MotorBusConfig:
    """The config from ``declare(name, default, description, **kwargs)`` (the node's parameters)."""
    cfg = MotorBusConfig(**{name: declare(name, d, text, **kw) for name, (d, text, kw) in PARAMETERS.items()})
    if cfg.safe_state not in SAFE_STATES:
        raise ValueError(f"parameter safe_state={cfg.safe_state!r}: use one of {SAFE_STATES}")
    return cfg


def load_bus_calibration(cfg: MotorBusConfig, spec: RobotSpec):
    """(calibration or None for the servos' EEPROM, where it came from); CalibrationError if missing."""
    if cfg.calibration_file:
        return load_calibration(cfg.calibration_file, spec), cfg.calibration_file
    if cfg.robot_id:
        path = find_calibration_file(spec, cfg.robot_id, cfg.calibration_dir or None)
        if path is None:
            expected = calibration_path(spec, cfg.robot_id, cfg.calibration_dir or None)
            raise CalibrationError(
                f"no calibration for {cfg.robot} id {cfg.robot_id!r} at {expected}: run "
                f"`lerobot-ros-calibrate --robot {cfg.robot} --port {cfg.port} --id {cfg.robot_id}`"
            )
        return load_calibration(path, spec), str(path)
    return None, "servo EEPROM"


def bus_status(connected: bool, last_error: str, error_age_s: float, diagnostics_period_s: float):
    """(level: "ok" | "warn" | "error", message) of the bus for /diagnostics.

    Errors that stopped five diagnostics periods ago were recovered from: OK, still reported.
    """
    if not connected:
        return "error", (f"disconnected: {last_error}" if last_error else "not connected")
    if last_error and error_age_s < 5 * diagnostics_period_s:
        return "warn", f"connected; last error: {last_error}"
    if last_error:
        return "ok", f"connected; recovered, last error {error_age_s:.0f} s ago: {last_error}"
    return "ok", "connected"


def bus_values(robot: str, loop_hz: float, counts: dict, torque_on: bool, bus_stats=None) -> dict[str, str]:
    """The bus's /diagnostics key-values: the node's counters and the bus's transaction errors."""
    values = {
        "robot": robot,
        "loop_rate_hz": f"{loop_hz:.1f}",
        "cycles": str(counts["cycles"]),
        "bus_errors": str(counts["bus_errors"]),
        "reconnects": str(counts["reconnects"]),
        "rejected_commands": str(counts["rejected_commands"]),
        "clamped_commands": str(counts["clamped"]),  # outside the joint limits
        "step_limited_commands": str(counts["step_limited"]),  # beyond max_step_rad
        "torque": "on" if torque_on else "off",
    }
    if bus_stats is not None:
        values.update(timeouts=str(bus_stats.timeouts), corrupt_packets=str(bus_stats.corrupt_packets))
    return values
