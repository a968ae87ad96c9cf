"""servo_emulator: the pty servo-bus emulator as a graph member (demos and tests without hardware).

It owns no ROS topics; being a node lets profiles/launch files start it next to the drivers with
ordinary parameters. The driver opens `link` (a stable symlink to the emulator's pty).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from rclpy.node import Node

from lerobot_core.ros.node import run_node
from lerobot_core.ros.params import declare
from lerobot_drivers.servo_emulator import emulator_for_robot


@dataclass(frozen=True)
class ServoEmulatorConfig:
    robot: str
    link: str
    tau_s: float
    wire_time: bool
    hand_motion_ticks: float


class ServoEmulatorNode(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("servo_emulator", **kwargs)
        p = partial(declare, self)
        self.cfg = ServoEmulatorConfig(
            robot=p("robot", "so101_follower", "LeRobot robot type to emulate"),
            link=p("link", "/tmp/lerobot_ros_so101_follower", "symlink path to the pty"),
            tau_s=p("tau_s", 0.05, "first-order position time constant [s]", range=(0.001, 10.0)),
            wire_time=p("wire_time", True, "delay replies by their wire time at the baud rate"),
            hand_motion_ticks=p(
                "hand_motion_ticks",
                0.0,
                "amplitude of a sinusoidal 'hand' moving the arm while torque is off [ticks]",
            ),
        )
        self.emu = emulator_for_robot(
            self.cfg.robot, self.cfg.link, self.cfg.wire_time, self.cfg.tau_s, self.cfg.hand_motion_ticks
        ).start()
        self.get_logger().info(
            f"emulating {self.cfg.robot} ({self.emu.family}) on {self.emu.port} -> {self.emu.slave_name}"
        )

    def destroy_node(self):
        self.emu.stop()
        return super().destroy_node()


def main(args=None) -> int:
    return run_node(ServoEmulatorNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
