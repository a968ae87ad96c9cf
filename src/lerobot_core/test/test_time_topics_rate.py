"""Time stamps, topic names and the rate meter (ROS-free)."""

from dataclasses import dataclass

import pytest

from lerobot_core import topics
from lerobot_core.rate import RateMeter
from lerobot_core.time import NS_PER_S, ns_to_stamp, seconds_to_stamp, stamp_to_ns


@dataclass
class Stamp:  # the fields of builtin_interfaces/Time and Duration
    sec: int
    nanosec: int


@pytest.mark.parametrize(
    ("ns", "sec", "nanosec"),
    [(0, 0, 0), (1_500_000_001, 1, 500_000_001), (-1, -1, 999_999_999), (7 * NS_PER_S, 7, 0)],
)
def test_ns_and_stamps_round_trip(ns, sec, nanosec):
    assert ns_to_stamp(ns, Stamp) == Stamp(sec, nanosec)
    assert stamp_to_ns(Stamp(sec, nanosec)) == ns


def test_seconds_to_stamp_truncates_to_the_nanosecond():
    assert seconds_to_stamp(12.25, Stamp) == Stamp(12, 250_000_000)
    assert seconds_to_stamp(1.0, Stamp) == Stamp(1, 0)


def test_topic_names():
    assert topics.camera_topic("front") == "cameras/front/image_raw"
    assert topics.camera_info_topic("front") == "cameras/front/camera_info"
    assert topics.compressed_camera_topic("wrist") == "cameras/wrist/image_raw/compressed"
    assert topics.camera_name("observation.images.wrist") == "wrist"
    assert topics.camera_name("observation.image") == "image"
    assert topics.image_feature("front") == "observation.images.front"


def test_rate_meter_window_gap_and_restart():
    m = RateMeter(window_s=1.0)
    assert m.rate(0.0) == 0.0 and m.last is None
    for k in range(11):
        m.tick(k * 0.1)
    assert m.count == 11 and m.rate(1.0) == pytest.approx(10.0)
    m.tick(1.5)  # a 0.5 s gap
    assert m.max_gap == pytest.approx(0.5)
    assert m.in_window(1.5) == 7  # 0.5 .. 1.0 and 1.5
    m.tick(1.2)  # late arrival: the latest time stays 1.5
    assert m.last == 1.5
    m.restart(3.0)
    assert m.count == 0 and m.max_gap == 0.0 and m.in_window(3.0) == 0 and m.last == 1.5


def test_seconds_to_duration_rounds_to_the_nanosecond():
    from lerobot_core.time import seconds_to_duration

    assert seconds_to_duration(1 / 30, Stamp) == Stamp(0, 33_333_333)
    assert seconds_to_duration(29 / 30, Stamp) == Stamp(0, 966_666_667)  # truncation would say ...666
    assert seconds_to_duration(2.5, Stamp) == Stamp(2, 500_000_000)
