"""robot_description_publisher: the URDF as std_msgs/String on `robot_description` (transient local).

What robot_state_publisher does for the description, without it: late subscribers (rviz, the
recorder, ros2_control's controller_manager) get the latest description. The URDF is parsed once
so a broken file fails at start with a message naming the file and the element.
"""

from __future__ import annotations

from dataclasses import dataclass

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from lerobot_bringup.shutdown import spin_until_shutdown
from lerobot_drivers.kinematics import UrdfError, parse_urdf

# transient local depth 1: the description is state, delivered to late joiners
DESCRIPTION_QOS = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)


@dataclass(frozen=True)
class RobotDescriptionConfig:
    urdf_path: str


class RobotDescriptionNode(Node):
    def __init__(self) -> None:
        super().__init__("robot_description_publisher")
        self.declare_parameter(
            "urdf_path",
            "",
            ParameterDescriptor(
                description="URDF file, e.g. <lerobot_bringup share>/urdf/so101.urdf", read_only=True
            ),
        )
        self.cfg = RobotDescriptionConfig(self.get_parameter("urdf_path").value)
        self.pub = self.create_publisher(String, "robot_description", DESCRIPTION_QOS)
        self.model = None
        if not self.cfg.urdf_path:
            raise UrdfError("parameter urdf_path is empty: set it to a URDF file")
        with open(self.cfg.urdf_path) as f:
            text = f.read()
        self.model = parse_urdf(text, is_text=True, where=self.cfg.urdf_path)
        self.pub.publish(String(data=text))
        self.get_logger().info(
            f"published {self.cfg.urdf_path} ({self.model.name}, {len(self.model.movable_joints)} movable joints) "
            f"on {self.pub.topic_name}"
        )


def main(args=None) -> int:
    rclpy.init(args=args)
    try:
        node = RobotDescriptionNode()
    except (UrdfError, OSError) as exc:
        print(f"robot_description_publisher: {exc}", flush=True)
        rclpy.try_shutdown()
        return 2
    return spin_until_shutdown(node)


if __name__ == "__main__":
    raise SystemExit(main())
