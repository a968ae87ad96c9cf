"""rclpy helpers shared by every node of the stack (the only part of lerobot_core that imports rclpy)."""
