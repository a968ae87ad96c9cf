"""robot_description_publisher: the URDF as std_msgs/String on `robot_description` (transient local).

What robot_state_publisher does for the description, without it: late subscribers (rviz, the
recorder, ros2_control's controller_manager) get the latest description. The URDF is parsed once
so a broken file fails at start with a message naming the file and the element.
"""

from __future__ import annotations

from dataclasses import dataclass

from rclpy.node import Node
from std_msgs.msg import String

from lerobot_core.ros import qos
from lerobot_core.ros.node import run_node
from lerobot_core.ros.params import declare
from lerobot_drivers.kinematics import UrdfError, parse_urdf

# transient local depth 1: the description is state, delivered to late joiners
DESCRIPTION_QOS = qos.LATCHED


@dataclass(frozen=True)
class RobotDescriptionConfig:
    urdf_path: str


class RobotDescriptionNode(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("robot_description_publisher", **kwargs)
        self.cfg = RobotDescriptionConfig(
            declare(self, "urdf_path", "", "URDF file, e.g. <lerobot_bringup share>/urdf/so101.urdf")
        )
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
    return run_node(
        RobotDescriptionNode, args, errors=(UrdfError, OSError), error_prefix="robot_description_publisher"
    )


if __name__ == "__main__":
    raise SystemExit(main())
