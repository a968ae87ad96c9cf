"""LeRobot robot plugin for ROS 2: ``--robot.type=ros --robot.contract=PATH`` (and presets
``ros_so101``, ``ros_so101_sim``, ``ros_arm``). LeRobot imports this package by its distribution name.

The config classes import without rclpy; making the robot without rclpy raises an ImportError that says
how to get it.
"""

from .config_ros import RosArmConfig, RosRobotConfig, RosSO101Config, RosSO101SimConfig
from .ros_robot import (
    ActionRejectedError,
    RosArm,
    RosRobot,
    RosSO101,
    RosSO101Sim,
    StaleObservationError,
)

__all__ = [
    "RosRobotConfig",
    "RosSO101SimConfig",
    "RosSO101Config",
    "RosArmConfig",
    "RosRobot",
    "RosSO101Sim",
    "RosSO101",
    "RosArm",
    "StaleObservationError",
    "ActionRejectedError",
]
