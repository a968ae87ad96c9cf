"""A joint-state source with no hardware: smooth sinusoids on named joints at a fixed rate.

The walking skeleton's source, and a stand-in robot for wiring up graphs (recorder, rviz) before a
driver or the simulation is there. Positions in radians (REP-103).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import rclpy
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState

from lerobot_bringup.shutdown import spin_until_shutdown
from lerobot_core.robots import SO_JOINTS

SO101_JOINTS = list(SO_JOINTS)  # a parameter default must be a list


@dataclass(frozen=True)
class SyntheticJointsConfig:
    joint_names: tuple[str, ...]
    rate_hz: float
    amplitude_rad: float
    period_s: float
    count: int  # 0 = forever


def joint_positions(t: float, n: int, amplitude: float, period: float) -> list[float]:
    """Joint i follows amplitude * sin(2*pi*t/period + i*pi/n): distinct, smooth, bounded."""
    return [amplitude * math.sin(2.0 * math.pi * t / period + i * math.pi / n) for i in range(n)]


class SyntheticJointsNode(Node):
    def __init__(self) -> None:
        super().__init__("synthetic_joints")
        self.declare_parameter(
            "joint_names",
            SO101_JOINTS,
            ParameterDescriptor(description="joint names, in publish order", read_only=True),
        )
        self.declare_parameter(
            "rate_hz",
            50.0,
            ParameterDescriptor(
                description="publish rate [Hz]",
                floating_point_range=[FloatingPointRange(from_value=0.1, to_value=2000.0)],
                read_only=True,
            ),
        )
        self.declare_parameter("amplitude_rad", 0.5, ParameterDescriptor(description="sine amplitude [rad]"))
        self.declare_parameter("period_s", 4.0, ParameterDescriptor(description="sine period [s]"))
        self.declare_parameter(
            "count",
            0,
            ParameterDescriptor(
                description="messages to publish before exiting; 0 = forever",
                integer_range=[IntegerRange(from_value=0, to_value=2**31 - 1, step=1)],
            ),
        )
        self.cfg = SyntheticJointsConfig(
            joint_names=tuple(self.get_parameter("joint_names").value),
            rate_hz=float(self.get_parameter("rate_hz").value),
            amplitude_rad=float(self.get_parameter("amplitude_rad").value),
            period_s=float(self.get_parameter("period_s").value),
            count=int(self.get_parameter("count").value),
        )
        # commands and states: reliable, shallow; a late subscriber does not need history
        self.pub = self.create_publisher(
            JointState, "joint_states", QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        )
        self.sent = 0
        self.t0 = self.get_clock().now()
        self.timer = self.create_timer(1.0 / self.cfg.rate_hz, self._tick)
        self.get_logger().info(
            f"publishing {len(self.cfg.joint_names)} joints on {self.pub.topic_name} at {self.cfg.rate_hz:g} Hz"
        )

    def _tick(self) -> None:
        now = self.get_clock().now()
        t = (now - self.t0).nanoseconds * 1e-9
        msg = JointState()
        msg.header.stamp = now.to_msg()
        msg.name = list(self.cfg.joint_names)
        msg.position = joint_positions(t, len(msg.name), self.cfg.amplitude_rad, self.cfg.period_s)
        w = 2.0 * math.pi / self.cfg.period_s
        msg.velocity = [
            self.cfg.amplitude_rad * w * math.cos(w * t + i * math.pi / len(msg.name))
            for i in range(len(msg.name))
        ]
        self.pub.publish(msg)
        self.sent += 1
        if self.cfg.count and self.sent >= self.cfg.count:
            self.get_logger().info(f"published {self.sent} messages, done")
            self.timer.cancel()
            raise SystemExit(0)


def main(args=None) -> int:
    rclpy.init(args=args)
    try:
        return spin_until_shutdown(SyntheticJointsNode())
    except SystemExit as e:  # raised by the timer after `count` messages, once cleaned up
        return int(e.code or 0)


if __name__ == "__main__":
    raise SystemExit(main())
