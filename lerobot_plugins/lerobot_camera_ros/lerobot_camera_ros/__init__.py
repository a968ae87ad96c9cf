"""LeRobot camera plugin for ROS 2: ``{type: ros, topic: /cameras/front/image_raw, width, height, fps}``,
raw (sensor_msgs/Image) or compressed (sensor_msgs/CompressedImage, jpeg/png). LeRobot imports this
package by its distribution name; the config imports without rclpy."""

from .config_ros import RosCameraConfig
from .ros_camera import RosCamera

__all__ = ["RosCameraConfig", "RosCamera"]
