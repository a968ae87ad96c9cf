"""A policy type this stack does not implement, served remotely: a random VQ-BeT that LeRobot itself saved
(lerobot_runtime's fixtures/make_vqbet_checkpoint.py) runs on the inference host's side in LeRobot's venv
(`deploy_remote_gpu python:=<venv>/bin/python`: the policy node through its lerobot backend), and the robot
host (`deploy_remote_robot sim:=true`, the workspace's Python, the checkpoint's config only) drives the
simulated SO-101 with its chunks, the front camera read by the inference host."""

import subprocess
import sys

import pytest

from lerobot_core.ament import share_path
from lerobot_core.ros.testing import MessageCollector, RosProcess, wait_until
from lerobot_core.ros.testing.pytest_plugin import ref_venv_python

pytestmark = pytest.mark.ros

MAKE_VQBET = share_path("lerobot_runtime") / "test" / "fixtures" / "make_vqbet_checkpoint.py"
# the side venv with this ROS distro's wheels for this Python: Kilted on 3.11 (LeRobot 0.4.4), Jazzy on 3.12
# (LeRobot 0.6.1); the workspace's message packages are built for this Python only
SIDE_VENV = {(3, 11): "0.4.4", (3, 12): "0.6.1"}


def launch(*args: str) -> RosProcess:
    """`lerobot-launch ARGS` (stopped with SIGINT, as Ctrl-C; killed with the test run)."""
    return RosProcess("lerobot_bringup", "lerobot-launch", args=list(args), ros_args=False)


def test_a_vqbet_served_from_lerobots_venv_drives_the_robot(tmp_path, ros_node):
    from sensor_msgs.msg import JointState

    from lerobot_msgs.msg import ActionChunk, PolicyStatus

    version = SIDE_VENV.get(sys.version_info[:2])
    assert version, f"no LeRobot side venv is built for Python {sys.version_info[:2]}"
    python = ref_venv_python(version)
    made = subprocess.run(
        [str(python), str(MAKE_VQBET), str(tmp_path)], capture_output=True, text=True, timeout=600
    )
    assert made.returncode == 0, made.stderr[-2000:]
    ckpt = tmp_path / "pretrained_model"
    chunks = MessageCollector(ros_node, ActionChunk, "/policy/remote_chunk")
    commands = MessageCollector(ros_node, JointState, "/joint_commands")
    status = MessageCollector(ros_node, PolicyStatus, "/policy/status")
    robot = launch(
        "deploy_remote_robot", "sim:=true", f"policy_path:={ckpt}", "cameras:=[front]", "image_width:=128",
        "image_height:=96",
    )  # fmt: skip
    gpu = launch("deploy_remote_gpu", f"policy_path:={ckpt}", f"python:={python}")
    try:
        with robot, gpu:
            driven = wait_until(
                lambda: any(m.steps >= 60 for m in status.messages) and len(chunks.messages) >= 5, timeout=180
            )
            logs = f"--- robot\n{robot.output()[-3000:]}\n--- inference\n{gpu.output()[-3000:]}"
            assert driven, logs
            # the inference host runs in the LeRobot venv: its policy node's process is that Python
            ps = subprocess.run(["ps", "-o", "args=", "--ppid", str(gpu.pid)], capture_output=True, text=True)
            assert ps.stdout.startswith(f"{python} "), ps.stdout
    finally:
        for c in (chunks, commands, status):
            c.close()
    chunk = chunks.messages[-1]
    assert chunk.policy_type == "vqbet", chunk.policy_type
    assert len(chunk.trajectory.points) >= 1 and len(chunk.trajectory.points[0].positions) == 6
    # the robot executes them: its commands move (a hold repeats one position)
    assert len(commands.messages) >= 60, len(commands.messages)
    assert len({tuple(round(p, 6) for p in m.position) for m in commands.messages}) > 5, logs
