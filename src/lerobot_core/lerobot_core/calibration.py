"""LeRobot calibration files (ROS-free): the reader the bus driver and the policy node share.

File format (what LeRobot writes with draccus, one entry per motor)::

    {"shoulder_pan": {"id": 1, "drive_mode": 0, "homing_offset": -1406, "range_min": 721, "range_max": 3395}, ...}

Location: ``$HF_LEROBOT_CALIBRATION/<robots|teleoperators>/<type name>/<robot id>.json`` where
``HF_LEROBOT_CALIBRATION`` defaults to ``$HF_LEROBOT_HOME/calibration`` and ``HF_LEROBOT_HOME``
to ``$HF_HOME/lerobot`` (``HF_HOME`` defaults to ``~/.cache/huggingface``). The type folder is
the LeRobot class name (``so_follower``, ``so_leader``, ``koch_follower``...); older releases
used ``so101_follower`` etc., which :func:`find_calibration_file` also searches.

:func:`radian_ranges` gives each motor's calibrated range in radians (zero at mid-range, as the
driver publishes joint states), the range LeRobot's normalized units span: with it, a value in radians
converts to LeRobot's units with :mod:`lerobot_core.units` exactly as the driver converts ticks.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional, Union

from lerobot_core import units
from lerobot_core.robots import RobotSpec

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


def radian_ranges(cal: dict[str, MotorCalibration], resolution: int = 4096) -> dict[str, tuple[float, float]]:
    """Each motor's calibrated ``[range_min, range_max]`` in radians from mid-range (the driver's zero).

    A drive-mode inversion negates both the radians and the normalized value, so the range holds either
    way."""
    return {
        name: (
            units.ticks_to_radians(c.range_min, c.range_min, c.range_max, resolution),
            units.ticks_to_radians(c.range_max, c.range_min, c.range_max, resolution),
        )
        for name, c in cal.items()
    }
