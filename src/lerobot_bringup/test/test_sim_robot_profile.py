"""`lerobot-launch sim_so101_robot`: the simulated SO-101 as a stand-in for the real follower. Its sim
episode ends after 300 steps (10 s); a robot has no episodes, so the sim goes on: it keeps publishing
its pose and following commands (before: it published nothing more, and a replay after 10 s said
"no joint_states ... is the robot or the sim running?")."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from lerobot_core.ros.testing import MessageCollector, wait_until

pytestmark = pytest.mark.ros


def test_the_robot_stand_in_keeps_publishing_and_following_commands_after_its_episode_ends(ros_node):
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from sensor_msgs.msg import JointState

    from lerobot_msgs.msg import EpisodeInfo

    best_effort = QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT)
    infos = MessageCollector(ros_node, EpisodeInfo, "/sim/episode_info", qos=best_effort)
    states = MessageCollector(ros_node, JointState, "/joint_states", qos=best_effort)
    commands = ros_node.create_publisher(JointState, "/joint_commands", 10)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lerobot_bringup.runner",
            "sim_so101_robot",
            "image_width:=32",
            "image_height:=24",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env=dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl")),
    )
    try:
        # the sim's episode reaches its 300-step limit (10 s at 30 Hz)
        assert wait_until(lambda: any(m.truncated for m in infos.messages), timeout=90), (
            f"{len(infos.messages)} episode infos, none truncated"
        )
        ended = time.monotonic()
        n = len(states.messages)
        assert wait_until(lambda: len(states.messages) >= n + 30, timeout=10), "joint_states stopped"
        # and a command still moves the arm
        start = np.array(states.messages[-1].position)
        target = start.copy()
        target[0] += 0.3  # shoulder_pan
        msg = JointState(name=list(states.messages[-1].name), position=target.tolist())

        def moved():
            commands.publish(msg)
            return abs(states.messages[-1].position[0] - target[0]) < 0.05

        assert wait_until(moved, timeout=15, interval=0.05), (start, states.messages[-1].position)
        assert time.monotonic() - ended > 1.0
        assert infos.messages[-1].truncated and infos.messages[-1].step > 300  # still the ended episode
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out[-3000:]
