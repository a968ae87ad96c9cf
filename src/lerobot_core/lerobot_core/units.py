"""The one conversion between radians, degrees and LeRobot's normalized joint units (ROS-free).

ROS publishes joint positions in radians (REP-103). LeRobot stores them in one of three modes,
given a calibration range ``[lo, hi]`` (servo ticks for a driver, radians for a recorded topic):

* ``RANGE_M100_100``: ``(value - lo) / (hi - lo) * 200 - 100`` (lo -> -100, hi -> +100);
* ``RANGE_0_100``: ``(value - lo) / (hi - lo) * 100`` (the gripper);
* ``DEGREES``: degrees from the middle of the range (``use_degrees=True``).

The driver (ticks), the recorder's topic contract (radians, per value as ``scale, offset``) and the
simulator (its virtual calibration is the joint limits) all use these functions.
"""

from __future__ import annotations

import math

RANGE_M100_100 = "range_m100_100"
RANGE_0_100 = "range_0_100"
DEGREES = "degrees"
NORM_MODES = (RANGE_M100_100, RANGE_0_100, DEGREES)

DEGREES_PER_RADIAN = 180.0 / math.pi  # the factors of math.degrees / math.radians, for arrays too
RADIANS_PER_DEGREE = math.pi / 180.0

_SPAN = {RANGE_M100_100: 200.0, RANGE_0_100: 100.0}
_SHIFT = {RANGE_M100_100: 100.0, RANGE_0_100: 0.0}  # normalized = fraction * span - shift


def _span(mode: str) -> float:
    try:
        return _SPAN[mode]
    except KeyError:
        raise ValueError(f"unknown range mode {mode!r}; expected {RANGE_M100_100} or {RANGE_0_100}") from None


def normalize(value: float, lo: float, hi: float, mode: str) -> float:
    """A value in the calibration range ``[lo, hi]`` -> LeRobot's ``mode`` units (no clamping)."""
    return ((value - lo) / (hi - lo)) * _span(mode) - _SHIFT[mode]


def unnormalize(value: float, lo: float, hi: float, mode: str) -> float:
    """LeRobot's ``mode`` units -> a value in the calibration range (inverse of :func:`normalize`)."""
    return ((value + _SHIFT[mode]) / _span(mode)) * (hi - lo) + lo


def normalize_affine(lo: float, hi: float, mode: str) -> tuple[float, float]:
    """``(scale, offset)`` with ``normalized = value * scale + offset`` (vectorised use; a
    velocity takes the scale only)."""
    scale = _span(mode) / (hi - lo)
    return scale, -lo * scale - _SHIFT[mode]


def radians_to_degrees(value: float) -> float:
    return value * DEGREES_PER_RADIAN


def degrees_to_radians(value: float) -> float:
    return value * RADIANS_PER_DEGREE


def ticks_to_degrees(raw: float, lo: float, hi: float, resolution: int) -> float:
    """Encoder ticks -> LeRobot's DEGREES: degrees from the middle of ``[lo, hi]``."""
    return (raw - (lo + hi) / 2) * 360 / (resolution - 1)


def degrees_to_ticks(value: float, lo: float, hi: float, resolution: int) -> float:
    """Inverse of :func:`ticks_to_degrees` (not rounded)."""
    return (value * (resolution - 1) / 360) + (lo + hi) / 2


def ticks_to_radians(raw: float, lo: float, hi: float, resolution: int) -> float:
    """Encoder ticks -> radians from the middle of ``[lo, hi]`` (the driver's joint_states zero)."""
    return ticks_to_degrees(raw, lo, hi, resolution) * RADIANS_PER_DEGREE


def radians_to_ticks(value: float, lo: float, hi: float, resolution: int) -> float:
    """Inverse of :func:`ticks_to_radians` (not rounded)."""
    return degrees_to_ticks(value * DEGREES_PER_RADIAN, lo, hi, resolution)
