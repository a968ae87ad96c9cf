"""A joint-state source with no hardware: smooth sinusoids on named joints at a fixed rate.

The walking skeleton's source, and a stand-in robot for wiring up graphs (recorder, rviz) before a
driver or the simulation is there. Positions in radians (REP-103).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

from rclpy.node import Node
from sensor_msgs.msg import JointState

from lerobot_core.robots import SO_JOINTS
from lerobot_core.ros import qos
from lerobot_core.ros.node import run_node
from lerobot_core.ros.params import declare

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
    def __init__(self, **kwargs) -> None:
        super().__init__("synthetic_joints", **kwargs)
        p = partial(declare, self)
        self.cfg = SyntheticJointsConfig(
            joint_names=tuple(p("joint_names", SO101_JOINTS, "joint names, in publish order")),
            rate_hz=p("rate_hz", 50.0, "publish rate [Hz]", range=(0.1, 2000.0)),
            amplitude_rad=p("amplitude_rad", 0.5, "sine amplitude [rad]", read_only=False),
            period_s=p("period_s", 4.0, "sine period [s]", read_only=False),
            count=p(
                "count",
                0,
                "messages to publish before exiting; 0 = forever",
                read_only=False,
                range=(0, 2**31 - 1),
            ),
        )
        # commands and states: reliable, shallow; a late subscriber does not need history
        self.pub = self.create_publisher(JointState, "joint_states", qos.RELIABLE)
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
    return run_node(SyntheticJointsNode, args)  # the timer's SystemExit after `count` messages: exit 0


if __name__ == "__main__":
    raise SystemExit(main())
