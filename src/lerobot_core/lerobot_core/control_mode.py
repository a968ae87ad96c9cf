"""Who drives the robot in human-in-the-loop collection: the Python side of lerobot_msgs/ControlStatus's
MODE_* constants (the .msg is the interface; test_control_mode.py checks these values against it)."""

from __future__ import annotations

import enum


class ControlMode(enum.IntEnum):
    POLICY = 0  # the policy's commands go to the robot
    HUMAN = 1  # the human's (leader-arm teleop) commands go to the robot: an intervention
    HOLD = 2  # paused: the follower holds its pose, nothing is recorded
