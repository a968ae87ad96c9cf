"""Servo ticks <-> LeRobot units <-> radians for one robot's motors (:class:`Normalizer`).

The calibration files themselves (format, location, reading, writing) are
:mod:`lerobot_core.calibration`; every formula is :mod:`lerobot_core.units`.
What this module adds is the bus side: LeRobot's clamp of raw ticks to the calibrated range before
RANGE_M100_100 / RANGE_0_100 (not for DEGREES), the drive-mode inversion on buses that do not keep
the drive mode in the servo (Feetech), and ``int()`` truncation on the way back to ticks, as LeRobot
does. ROS JointState positions are radians: LeRobot's DEGREES value in radians, zero at mid-range
(the URDF's zero pose).
"""

from __future__ import annotations

from typing import Optional

from lerobot_core import units
from lerobot_core.calibration import MotorCalibration, check_against_spec
from lerobot_core.robots import DEGREES, RANGE_0_100, RANGE_M100_100, RobotSpec
from lerobot_drivers.bus import get_family


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

    def to_radians(self, name: str, raw: float) -> float:
        c = self.calibration[name]
        rad = units.ticks_to_radians(raw, c.range_min, c.range_max, self.resolutions[name])
        return -rad if self._inverted(name) else rad

    def from_radians(self, name: str, rad: float) -> int:
        """Radians -> raw goal ticks, clamped to the calibrated range (never outside it)."""
        c = self.calibration[name]
        rad = -rad if self._inverted(name) else rad
        raw = round(units.radians_to_ticks(rad, c.range_min, c.range_max, self.resolutions[name]))
        return int(min(c.range_max, max(c.range_min, raw)))

    def velocity_to_rad_s(self, name: str, raw_velocity: float, unit_rad_s: float) -> float:
        v = raw_velocity * unit_rad_s
        return -v if self._inverted(name) else v
