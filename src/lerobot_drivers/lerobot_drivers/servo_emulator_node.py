"""servo_emulator: the pty servo-bus emulator as a graph member (demos and tests without hardware).

It owns no ROS topics; being a node lets profiles/launch files start it next to the drivers with
ordinary parameters. The driver opens `link` (a stable symlink to the emulator's pty).
"""

from __future__ import annotations

from dataclasses import dataclass

import rclpy
from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor
from rclpy.node import Node

from lerobot_bringup.shutdown import spin_until_shutdown
from lerobot_drivers.servo_emulator import emulator_for_robot


@dataclass(frozen=True)
class ServoEmulatorConfig:
    robot: str
    link: str
    tau_s: float
    wire_time: bool
    hand_motion_ticks: float


class ServoEmulatorNode(Node):
    def __init__(self) -> None:
        super().__init__("servo_emulator")
        ro = {"read_only": True}
        self.declare_parameter(
            "robot", "so101_follower", ParameterDescriptor(description="LeRobot robot type to emulate", **ro)
        )
        self.declare_parameter(
            "link",
            "/tmp/lerobot_ros_so101_follower",
            ParameterDescriptor(description="symlink path to the pty", **ro),
        )
        self.declare_parameter(
            "tau_s",
            0.05,
            ParameterDescriptor(
                description="first-order position time constant [s]",
                floating_point_range=[FloatingPointRange(from_value=0.001, to_value=10.0)],
                **ro,
            ),
        )
        self.declare_parameter(
            "wire_time",
            True,
            ParameterDescriptor(description="delay replies by their wire time at the baud rate", **ro),
        )
        self.declare_parameter(
            "hand_motion_ticks",
            0.0,
            ParameterDescriptor(
                description="amplitude of a sinusoidal 'hand' moving the arm while torque is off [ticks]",
                **ro,
            ),
        )
        g = self.get_parameter
        self.cfg = ServoEmulatorConfig(
            g("robot").value,
            g("link").value,
            float(g("tau_s").value),
            bool(g("wire_time").value),
            float(g("hand_motion_ticks").value),
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
    rclpy.init(args=args)
    node = ServoEmulatorNode()
    return spin_until_shutdown(node)


if __name__ == "__main__":
    raise SystemExit(main())
