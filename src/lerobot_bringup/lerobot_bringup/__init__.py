"""Launch files, robot profiles, the profile runner, URDF, rviz and ros2_control configs of the lerobot_ros stack."""
