"""LeRobot teleoperator plugin for ROS 2: ``--teleop.type=ros`` reads a leader arm's joint topic (the
contract's ``action`` source, or ``--teleop.topic``). LeRobot imports this package by its distribution
name; the config imports without rclpy."""

from .config_ros import RosTeleoperatorConfig
from .ros_teleoperator import RosTeleoperator

__all__ = ["RosTeleoperatorConfig", "RosTeleoperator"]
