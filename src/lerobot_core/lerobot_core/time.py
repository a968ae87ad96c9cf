"""Time as integer nanoseconds <-> builtin_interfaces stamps, duck-typed (no rclpy import).

A stamp is anything with ``sec`` and ``nanosec`` (rclpy's builtin_interfaces Time / Duration, a
rosbags message); to build one, pass its type (``ns_to_stamp(ns, Time)``).
"""

from __future__ import annotations

NS_PER_S = 1_000_000_000


def stamp_to_ns(stamp) -> int:
    """builtin_interfaces/Time (anything with ``sec`` and ``nanosec``) as integer nanoseconds."""
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def ns_to_stamp(ns: int, stamp_type):
    """Integer nanoseconds -> ``stamp_type(sec=..., nanosec=...)`` (nanosec always in [0, 1e9))."""
    sec, nanosec = divmod(int(ns), NS_PER_S)
    return stamp_type(sec=sec, nanosec=nanosec)


def seconds_to_stamp(t: float, stamp_type):
    """Float seconds (e.g. ``time.time()`` of a capture) -> a stamp, truncated to the nanosecond."""
    sec = int(t)
    return stamp_type(sec=sec, nanosec=int((t - sec) * 1e9))


def seconds_to_duration(seconds: float, duration_type):
    """A span in float seconds (e.g. ``k / fps`` into a chunk) -> a Duration, rounded to the nanosecond
    (1/30 s is 33_333_333 ns, never 33_333_332 from float truncation)."""
    return ns_to_stamp(round(seconds * NS_PER_S), duration_type)
