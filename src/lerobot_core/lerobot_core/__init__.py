"""What the lerobot_ros packages share. ROS-free at this level: nothing here imports rclpy.

rclpy helpers (node main, parameters, QoS, the pytest plugin) live in :mod:`lerobot_core.ros`.
"""
