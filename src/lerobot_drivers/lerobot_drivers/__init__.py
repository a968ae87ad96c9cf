"""Feetech and Dynamixel motor bus nodes, camera nodes and leader-arm teleop for LeRobot robots, reusing LeRobot calibration files."""
