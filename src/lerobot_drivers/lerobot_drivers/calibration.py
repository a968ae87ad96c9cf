"""LeRobot calibration files and normalisation (ROS-free).

File format (what LeRobot writes with draccus, one entry per motor)::

    {"shoulder_pan": {"id": 1, "drive_mode": 0, "homing_offset": -1406, "range_min": 721, "range_max": 3395}, ...}

Location: ``$HF_LEROBOT_CALIBRATION/<robots|teleoperators>/<type name>/<robot id>.json`` where
``HF_LEROBOT_CALIBRATION`` defaults to ``$HF_LEROBOT_HOME/calibration`` and ``HF_LEROBOT_HOME``
to ``$HF_HOME/lerobot`` (``HF_HOME`` defaults to ``~/.cache/huggingface``). The type folder is
the LeRobot class name (``so_follower``, ``so_leader``, ``koch_follower``...); older releases
used ``so101_follower`` etc., which :func:`find_calibration_file` also searches.

Normalisation is LeRobot's, value for value (the formulas are :mod:`lerobot_core.units`):

* RANGE_M100_100: clamp raw to [min, max], ``(raw - min) / (max - min) * 200 - 100``, negated when
  the bus applies drive modes (Feetech) and ``drive_mode`` is 1;
* RANGE_0_100: ``(raw - min) / (max - min) * 100`` (``100 - x`` with drive mode);
* DEGREES: ``(raw - mid) * 360 / (resolution - 1)``, ``mid = (min + max) / 2`` (no clamp, no drive mode).

The inverse truncates with ``int()`` as LeRobot does. ROS JointState positions are radians:
LeRobot's DEGREES value converted to radians (zero at mid-range, as the URDF's zero pose), negated
for an inverted drive mode on Feetech buses.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional, Union

from lerobot_core import units
from lerobot_core.robots import DEGREES, RANGE_0_100, RANGE_M100_100, RobotSpec
from lerobot_drivers.bus import get_family

FIELDS = ("id", "drive_mode", "homing_offset", "range_min", "range_max")


class CalibrationError(ValueError):
    """A calibration file is missing, malformed or does not match the robot."""


@dataclass(frozen=True)
class MotorCalibration:
    id: int
    drive_mode: int
    homing_offset: int
    range_min: int
    range_max: int


def hf_lerobot_home() -> Path:
    hf_home = os.environ.get("HF_HOME")
    if not hf_home:
        xdg = os.environ.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache"))
        hf_home = os.path.join(xdg, "huggingface")
    return Path(os.environ.get("HF_LEROBOT_HOME", os.path.join(hf_home, "lerobot"))).expanduser()


def default_calibration_root() -> Path:
    return Path(os.environ.get("HF_LEROBOT_CALIBRATION", str(hf_lerobot_home() / "calibration"))).expanduser()


def calibration_path(spec: RobotSpec, robot_id: str, calibration_dir: Union[str, Path, None] = None) -> Path:
    """Where LeRobot reads/writes this robot's file (``calibration_dir`` as LeRobot's config field)."""
    if calibration_dir:
        return Path(calibration_dir).expanduser() / f"{robot_id}.json"
    return default_calibration_root() / spec.calibration_kind / spec.calibration_name / f"{robot_id}.json"


def find_calibration_file(
    spec: RobotSpec, robot_id: str, calibration_dir: Union[str, Path, None] = None
) -> Optional[Path]:
    """The existing file for this robot id, also looking in older LeRobot folder names."""
    first = calibration_path(spec, robot_id, calibration_dir)
    if first.is_file():
        return first
    if not calibration_dir:
        root = default_calibration_root() / spec.calibration_kind
        for legacy in spec.legacy_calibration_names:
            candidate = root / legacy / f"{robot_id}.json"
            if candidate.is_file():
                return candidate
    return None


def load_calibration(path: Union[str, Path], spec: Optional[RobotSpec] = None) -> dict[str, MotorCalibration]:
    """Read and validate a LeRobot calibration JSON; errors name the file and the motor."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise CalibrationError(
            f"calibration file {path} does not exist: run lerobot-ros-calibrate (or lerobot-calibrate)"
        ) from None
    except OSError as exc:
        raise CalibrationError(f"cannot read calibration file {path}: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CalibrationError(
            f"calibration file {path} is not valid JSON (line {exc.lineno}): {exc.msg}"
        ) from None
    if not isinstance(data, dict):
        raise CalibrationError(
            f"calibration file {path}: expected an object of motors, got {type(data).__name__}"
        )
    out: dict[str, MotorCalibration] = {}
    for motor, entry in data.items():
        where = f"calibration file {path}, motor {motor!r}"
        if not isinstance(entry, dict):
            raise CalibrationError(f"{where}: expected an object with {', '.join(FIELDS)}")
        missing = [f for f in FIELDS if f not in entry]
        if missing:
            raise CalibrationError(f"{where}: missing field(s) {', '.join(missing)}")
        values = {}
        for f in FIELDS:
            v = entry[f]
            if isinstance(v, bool) or not isinstance(v, int):
                if isinstance(v, float) and v.is_integer():
                    v = int(v)
                else:
                    raise CalibrationError(f"{where}: field {f!r} must be an integer, got {v!r}")
            values[f] = v
        if values["drive_mode"] not in (0, 1):
            raise CalibrationError(f"{where}: drive_mode must be 0 or 1, got {values['drive_mode']}")
        if values["range_min"] >= values["range_max"]:
            raise CalibrationError(
                f"{where}: range_min ({values['range_min']}) must be below range_max ({values['range_max']}); "
                "recalibrate this joint through its full range"
            )
        out[motor] = MotorCalibration(**values)
    if spec is not None:
        check_against_spec(out, spec, path)
    return out


def check_against_spec(
    cal: dict[str, MotorCalibration], spec: RobotSpec, path: Union[str, Path] = "<memory>"
):
    missing = [n for n in spec.joint_names if n not in cal]
    if missing:
        raise CalibrationError(
            f"calibration file {path} has no entry for motor(s) {', '.join(missing)} of {spec.name}"
        )
    for m in spec.motors:
        if cal[m.name].id != m.id:
            raise CalibrationError(
                f"calibration file {path}, motor {m.name!r}: id {cal[m.name].id} but {spec.name} uses id {m.id}"
            )


def save_calibration(path: Union[str, Path], cal: dict[str, MotorCalibration]) -> Path:
    """Write the file as LeRobot does (indent 4, motor order kept), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({name: asdict(c) for name, c in cal.items()}, indent=4))
    os.replace(tmp, path)
    return path


class Normalizer:
    """Raw servo ticks <-> LeRobot units <-> radians, for the motors of one spec."""

    def __init__(
        self,
        spec: RobotSpec,
        calibration: dict[str, MotorCalibration],
        resolutions: Optional[dict[str, int]] = None,
    ):
        check_against_spec(calibration, spec)
        self.spec = spec
        self.calibration = calibration
        # a family that keeps the drive mode in the servo inverts there, not here
        self.apply_drive_mode = not get_family(spec.bus).stores_drive_mode
        self.resolutions = resolutions or {m.name: 4096 for m in spec.motors}
        self._mode = {m.name: m.norm_mode for m in spec.motors}

    def _inverted(self, name: str) -> bool:
        return self.apply_drive_mode and bool(self.calibration[name].drive_mode)

    def normalize(self, name: str, raw: int) -> float:
        c = self.calibration[name]
        lo, hi = c.range_min, c.range_max
        mode = self._mode[name]
        if mode == DEGREES:
            return units.ticks_to_degrees(raw, lo, hi, self.resolutions[name])
        bounded = min(hi, max(lo, raw))
        if mode == RANGE_M100_100:
            norm = units.normalize(bounded, lo, hi, mode)
            return -norm if self._inverted(name) else norm
        if mode == RANGE_0_100:
            norm = units.normalize(bounded, lo, hi, mode)
            return 100 - norm if self._inverted(name) else norm
        raise ValueError(f"unknown normalisation mode {mode!r} for motor {name!r}")

    def unnormalize(self, name: str, value: float) -> int:
        c = self.calibration[name]
        lo, hi = c.range_min, c.range_max
        mode = self._mode[name]
        if mode == DEGREES:
            return int(units.degrees_to_ticks(value, lo, hi, self.resolutions[name]))
        if mode == RANGE_M100_100:
            value = -value if self._inverted(name) else value
            return int(units.unnormalize(min(100.0, max(-100.0, value)), lo, hi, mode))
        if mode == RANGE_0_100:
            value = 100 - value if self._inverted(name) else value
            return int(units.unnormalize(min(100.0, max(0.0, value)), lo, hi, mode))
        raise ValueError(f"unknown normalisation mode {mode!r} for motor {name!r}")

    def ticks_per_rad(self, name: str) -> float:
        return (self.resolutions[name] - 1) / (2 * math.pi)

    def to_radians(self, name: str, raw: float) -> float:
        c = self.calibration[name]
        rad = (raw - (c.range_min + c.range_max) / 2) / self.ticks_per_rad(name)
        return -rad if self._inverted(name) else rad

    def from_radians(self, name: str, rad: float) -> int:
        """Radians -> raw goal ticks, clamped to the calibrated range (never outside it)."""
        c = self.calibration[name]
        rad = -rad if self._inverted(name) else rad
        raw = round(rad * self.ticks_per_rad(name) + (c.range_min + c.range_max) / 2)
        return int(min(c.range_max, max(c.range_min, raw)))

    def velocity_to_rad_s(self, name: str, raw_velocity: float, unit_rad_s: float) -> float:
        v = raw_velocity * unit_rad_s
        return -v if self._inverted(name) else v


def identity_calibration(spec: RobotSpec, resolution: int = 4096) -> dict[str, MotorCalibration]:
    """A calibration with the full encoder range and no offset (servos as they leave the factory)."""
    return {m.name: MotorCalibration(m.id, 0, 0, 0, resolution - 1) for m in spec.motors}


def calibration_from_limits(
    spec: RobotSpec, resolution: int = 4096, center: int = 2047
) -> dict[str, MotorCalibration]:
    """A calibration whose range spans the spec's joint limits around ``center`` (emulators, demos).

    Mid-range sits at ``center`` so radians 0 = the URDF zero pose; full-turn motors keep 0..res-1.
    """
    out = {}
    tpr = (resolution - 1) / (2 * math.pi)
    for m in spec.motors:
        if m.name in spec.full_turn_motors:
            out[m.name] = MotorCalibration(m.id, 0, 0, 0, resolution - 1)
            continue
        lim = spec.limits[m.name]
        half = max(abs(lim.lower), abs(lim.upper))
        lo = int(round(center - half * tpr))
        hi = int(round(center + half * tpr))
        out[m.name] = MotorCalibration(m.id, 0, 0, max(0, lo), min(resolution - 1, hi))
    return out


def ids_by_name(spec: RobotSpec) -> dict[str, int]:
    return {m.name: m.id for m in spec.motors}


def names_by_id(spec: RobotSpec) -> dict[int, str]:
    return {m.id: m.name for m in spec.motors}


def iter_motor_names(spec: RobotSpec) -> Iterable[str]:
    return spec.joint_names
