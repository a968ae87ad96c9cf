"""The one unit conversion: exact values for every mode, inverses, and the affine form."""

import math

import numpy as np
import pytest

from lerobot_core import units
from lerobot_core.units import DEGREES, RANGE_0_100, RANGE_M100_100


@pytest.mark.parametrize(
    ("value", "lo", "hi", "mode", "expected"),
    [
        (1000, 1000, 3000, RANGE_M100_100, -100.0),
        (2000, 1000, 3000, RANGE_M100_100, 0.0),
        (2500, 1000, 3000, RANGE_M100_100, 50.0),
        (3000, 1000, 3000, RANGE_M100_100, 100.0),
        (1000, 1000, 3000, RANGE_0_100, 0.0),
        (2500, 1000, 3000, RANGE_0_100, 75.0),
        (0.5, -1.0, 1.0, RANGE_M100_100, 50.0),  # radians work the same way
        (0.5, 0.0, 2.0, RANGE_0_100, 25.0),
        (4000, 1000, 3000, RANGE_M100_100, 200.0),  # no clamping: the caller decides
    ],
)
def test_normalize_exact(value, lo, hi, mode, expected):
    assert units.normalize(value, lo, hi, mode) == expected
    assert units.unnormalize(expected, lo, hi, mode) == value


@pytest.mark.parametrize(("lo", "hi", "mode"), [(-1.0, 1.0, RANGE_M100_100), (0.0, 2.0, RANGE_0_100)])
def test_affine_form_matches(lo, hi, mode):
    scale, offset = units.normalize_affine(lo, hi, mode)
    values = np.array([lo, (lo + hi) / 2, hi, 0.5])
    assert (values * scale + offset).tolist() == [units.normalize(v, lo, hi, mode) for v in values]


def test_affine_exact_values():
    assert units.normalize_affine(-1.0, 1.0, RANGE_M100_100) == (100.0, 0.0)
    assert units.normalize_affine(0.0, 2.0, RANGE_0_100) == (50.0, 0.0)
    assert units.normalize_affine(1000, 3000, RANGE_M100_100) == (0.1, -200.0)


def test_degrees_and_radians():
    assert units.radians_to_degrees(math.pi / 2) == 90.0
    assert units.radians_to_degrees(math.pi) == 180.0
    assert units.degrees_to_radians(180.0) == math.pi
    for deg in (-110.0, 97.0, 160.0, -10.0):
        assert units.degrees_to_radians(deg) == math.radians(deg)
    assert units.radians_to_degrees(np.array([0.0, math.pi])).tolist() == [0.0, 180.0]


def test_ticks_and_degrees():
    # LeRobot's DEGREES: degrees from mid-range, 4095 ticks a turn
    assert units.ticks_to_degrees(2047.5, 0, 4095, 4096) == 0.0
    assert units.ticks_to_degrees(4095, 0, 4095, 4096) == 180.0
    assert units.ticks_to_degrees(1000, 1000, 3000, 4096) == -1000 * 360 / 4095
    assert units.degrees_to_ticks(180.0, 0, 4095, 4096) == 4095.0
    assert units.degrees_to_ticks(0.0, 1000, 3000, 4096) == 2000.0


def test_unknown_mode_is_named():
    with pytest.raises(ValueError, match="unknown range mode 'degrees'"):
        units.normalize(1.0, 0.0, 2.0, DEGREES)
