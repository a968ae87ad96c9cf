"""Calibration procedure against a live bus, and the ``lerobot-ros-calibrate`` command (ROS-free).

The procedure is LeRobot's: torque off, position mode, the user puts the arm in the middle of
its range -> homing offsets that make that pose read half a turn (2047), then the user moves
every joint through its range while min/max are recorded (full-turn joints get 0..4095), the
limits are written to the servos and the JSON is saved where LeRobot looks for it.
Prompts exist only in this command, never in nodes.

    lerobot-ros-calibrate --robot so101_follower --port /dev/ttyACM0 --id my_follower
"""

from __future__ import annotations

import argparse
import select
import sys
import time
from collections.abc import Callable, Iterable
from typing import Optional

from lerobot_core import cli
from lerobot_core.calibration import CalibrationError, MotorCalibration, calibration_path, save_calibration
from lerobot_core.robots import RobotSpec, get_robot_spec
from lerobot_drivers.bus import BusError, MotorBus, get_family


def bus_for_spec(spec: RobotSpec, port: str, baudrate: int = 1_000_000, timeout_s: float = 0.02) -> MotorBus:
    protocol = get_family(spec.bus).protocol_of(spec.motors[0].model)
    return MotorBus(port, spec.bus, {m.id: m.model for m in spec.motors}, baudrate, timeout_s, protocol)


def reset_calibration(bus: MotorBus, spec: RobotSpec) -> None:
    for m in spec.motors:
        res = bus.resolution(m.id)
        if bus.family.has_homing_offset:
            bus.write(m.id, "Homing_Offset", 0)
        bus.write(m.id, "Min_Position_Limit", 0)
        bus.write(m.id, "Max_Position_Limit", res - 1)


def set_half_turn_homings(bus: MotorBus, spec: RobotSpec) -> dict[str, int]:
    """Make the present pose read (resolution-1)//2; returns the homing offsets written."""
    reset_calibration(bus, spec)
    positions = (
        bus.sync_read("Present_Position", spec.motor_ids)
        if bus.family.supports_sync_read
        else {m.id: bus.read(m.id, "Present_Position") for m in spec.motors}
    )
    offsets = {}
    for m in spec.motors:
        half = int((bus.resolution(m.id) - 1) / 2)
        # Present = Actual + homing_sign * Homing_Offset, and Actual = the position read (offset 0)
        offsets[m.name] = bus.family.homing_sign * (half - positions[m.id])
        if bus.family.has_homing_offset:
            bus.write(m.id, "Homing_Offset", offsets[m.name])
    return offsets


def record_ranges(
    bus: MotorBus,
    spec: RobotSpec,
    should_stop: Callable[[], bool],
    on_sample: Optional[Callable[[dict[str, tuple[int, int, int]]], None]] = None,
    period_s: float = 0.02,
) -> tuple[dict[str, int], dict[str, int]]:
    names = [m.name for m in spec.motors if m.name not in spec.full_turn_motors]
    ids = [spec.motor(n).id for n in names]
    first = bus.sync_read("Present_Position", ids)
    mins = {n: first[spec.motor(n).id] for n in names}
    maxes = dict(mins)
    while True:
        pos = bus.sync_read("Present_Position", ids)
        for n in names:
            v = pos[spec.motor(n).id]
            mins[n] = min(mins[n], v)
            maxes[n] = max(maxes[n], v)
        if on_sample:
            on_sample({n: (mins[n], pos[spec.motor(n).id], maxes[n]) for n in names})
        if should_stop():
            break
        time.sleep(period_s)
    flat = [n for n in names if mins[n] == maxes[n]]
    if flat:
        raise RuntimeError(
            f"joint(s) {', '.join(flat)} did not move while recording: move each through its range"
        )
    for n in spec.full_turn_motors:
        mins[n] = 0
        maxes[n] = bus.resolution(spec.motor(n).id) - 1
    return mins, maxes


def write_calibration(bus: MotorBus, spec: RobotSpec, cal: dict[str, MotorCalibration]) -> None:
    """Put a calibration into the servos (torque must be off: EEPROM registers)."""
    for m in spec.motors:
        c = cal[m.name]
        if bus.family.stores_drive_mode:
            bus.write(m.id, "Drive_Mode", c.drive_mode)
        if bus.family.has_homing_offset:
            bus.write(m.id, "Homing_Offset", c.homing_offset)
        bus.write(m.id, "Min_Position_Limit", c.range_min)
        bus.write(m.id, "Max_Position_Limit", c.range_max)


def read_calibration(bus: MotorBus, spec: RobotSpec) -> dict[str, MotorCalibration]:
    out = {}
    for m in spec.motors:
        offset = 0
        if bus.family.has_homing_offset:
            offset = bus.read(m.id, "Homing_Offset")
        drive = bus.read(m.id, "Drive_Mode") if bus.family.stores_drive_mode else 0
        out[m.name] = MotorCalibration(
            m.id, drive, offset, bus.read(m.id, "Min_Position_Limit"), bus.read(m.id, "Max_Position_Limit")
        )
    return out


def calibrate(
    bus: MotorBus,
    spec: RobotSpec,
    wait_for_middle: Callable[[], None],
    should_stop: Callable[[], bool],
    drive_modes: Optional[dict[str, int]] = None,
    on_sample=None,
) -> dict[str, MotorCalibration]:
    """The whole procedure; the two callables are the user interaction (prompt or test script)."""
    bus.disable_torque()
    drive_modes = drive_modes or {}
    for m in spec.motors:
        bus.write(m.id, "Operating_Mode", bus.family.calibration_operating_mode)  # as LeRobot
        if bus.family.stores_drive_mode:
            bus.write(m.id, "Drive_Mode", drive_modes.get(m.name, 0))
    wait_for_middle()
    offsets = set_half_turn_homings(bus, spec)
    mins, maxes = record_ranges(bus, spec, should_stop, on_sample)
    cal = {
        m.name: MotorCalibration(
            m.id, drive_modes.get(m.name, 0), offsets[m.name], mins[m.name], maxes[m.name]
        )
        for m in spec.motors
    }
    write_calibration(bus, spec, cal)
    return cal


def _enter_pressed() -> bool:
    return bool(select.select([sys.stdin], [], [], 0)[0]) and bool(sys.stdin.readline() is not None)


def main(argv: Optional[Iterable[str]] = None) -> int:
    p = argparse.ArgumentParser(
        prog="lerobot-ros-calibrate",
        description="Calibrate a LeRobot arm and write LeRobot's JSON.",
        formatter_class=cli.HelpFormatter,
    )
    p.add_argument(
        "--robot", required=True, help="LeRobot type, e.g. so101_follower, so101_leader, koch_follower"
    )
    p.add_argument("--port", required=True, help="serial port of the arm's bus")
    p.add_argument("--id", required=True, help="robot id (the JSON file name, as LeRobot's --robot.id)")
    p.add_argument("--calibration-dir", default=None, help="folder instead of LeRobot's default location")
    p.add_argument("--baudrate", type=cli.positive_int, default=1_000_000, help="bus baud rate")
    p.add_argument(
        "--timeout-ms", type=cli.positive_float, default=50.0, help="reply timeout per transaction [ms]"
    )
    p.add_argument(
        "--record-seconds",
        type=cli.positive_float,
        default=None,
        help="record ranges for N s instead of until ENTER",
    )
    p.add_argument(
        "--yes", action="store_true", help="do not wait for ENTER before homing (arm already centred)"
    )
    p.add_argument(
        "--write-only", metavar="JSON", default=None, help="write an existing calibration file to the servos"
    )
    args = p.parse_args(list(argv) if argv is not None else None)

    try:
        spec = get_robot_spec(args.robot)
    except KeyError as exc:
        p.error(f"--robot: {exc.args[0]}")
    if spec.is_bimanual:
        p.error("calibrate each arm of a bimanual robot separately (ids <id>_right and <id>_left)")
    out_path = calibration_path(spec, args.id, args.calibration_dir)
    try:
        return _run(args, spec, out_path)
    except BusError as exc:  # the port, a servo that does not answer, a wrong model: no traceback
        print(f"lerobot-ros-calibrate: error: --port {args.port}: {exc}", file=sys.stderr)
        return 2
    except (CalibrationError, RuntimeError, OSError) as exc:
        print(f"lerobot-ros-calibrate: error: {exc}", file=sys.stderr)
        return 2


def _run(args, spec: RobotSpec, out_path) -> int:
    bus = bus_for_spec(spec, args.port, args.baudrate, args.timeout_ms / 1000.0)
    with bus:
        bus.verify_models()
        if args.write_only:
            from lerobot_core.calibration import load_calibration

            bus.disable_torque()
            write_calibration(bus, spec, load_calibration(args.write_only, spec))
            print(f"wrote {args.write_only} to the servos of {args.robot} on {args.port}")
            return 0

        def wait_middle():
            if not args.yes:
                input(f"Move {args.robot} to the middle of its range of motion and press ENTER...")

        if args.record_seconds is not None:
            end = time.monotonic() + args.record_seconds

            def stop():
                return time.monotonic() >= end
        else:
            print("Move every joint (except full-turn ones) through its whole range; press ENTER to stop.")
            stop = _enter_pressed

        def show(sample):
            line = "  ".join(f"{n}:{lo}/{v}/{hi}" for n, (lo, v, hi) in sample.items())
            print("\r" + line[:200], end="", flush=True)

        cal = calibrate(bus, spec, wait_middle, stop, on_sample=show if sys.stdout.isatty() else None)
    print()
    save_calibration(out_path, cal)
    print(f"calibration saved to {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
