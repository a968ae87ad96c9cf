"""The policy node running the diffusion fixture (n_obs_steps 2) on the emulated arm, over loopback DDS."""

import json
import shutil

import numpy as np
import pytest

from .conftest import DIFFUSION_SMALL

pytestmark = pytest.mark.ros

rclpy = pytest.importorskip("rclpy")

from sensor_msgs.msg import JointState  # noqa: E402

from lerobot_core.ros.testing import MessageCollector, RosProcess, wait_until  # noqa: E402
from lerobot_msgs.msg import ActionChunk, PolicyStatus  # noqa: E402

from .test_policy_node_ros import (  # noqa: E402
    MAX_STEP,
    SO101_LIMIT,
    STATUS_QOS,
    EmulatedRobot,
    policy_params,
    positions,
)


def test_diffusion_drives_emulated_arm(ros_node, tmp_path):
    # The fixture's weights with 10 DDIM steps instead of 100 DDPM steps: the inference thread is
    # niced, and on a loaded machine 100 steps took 2.5-3.6 s there, longer than the 8-action chunk
    # lasts at any useful rate (the node then rightly skips every action and holds).
    ckpt = tmp_path / "diffusion_ddim"
    shutil.copytree(DIFFUSION_SMALL, ckpt)
    cfg = json.loads((ckpt / "config.json").read_text())
    cfg.update(noise_scheduler_type="DDIM", num_inference_steps=10)
    (ckpt / "config.json").write_text(json.dumps(cfg))
    cmds = MessageCollector(ros_node, JointState, "joint_commands")
    chunks = MessageCollector(ros_node, ActionChunk, "policy/action_chunk")
    status = MessageCollector(ros_node, PolicyStatus, "policy/status", qos=STATUS_QOS)
    states = MessageCollector(ros_node, JointState, "joint_states")
    params = policy_params(policy_path=str(ckpt), torch_threads=2, fps=10.0, max_observation_age_s=0.5)
    with EmulatedRobot(), RosProcess("lerobot_policy_node", "policy", parameters=params) as node:
        got = chunks.wait(4, timeout=60)
        assert all(c.policy_type == "diffusion" and len(c.trajectory.points) == 8 for c in got)
        assert wait_until(lambda: any(s.state == PolicyStatus.STATE_RUNNING for s in status.messages), 20), [
            (c.actions_skipped, round(c.inference_latency_s, 3)) for c in chunks.messages
        ]
        cmds.wait(40, timeout=30)
        assert min(c.actions_skipped for c in chunks.messages) < 8
        out = node.output()
    assert "n_obs_steps 2" in out, out
    p = positions(cmds.messages, JointState)
    assert np.all(np.isfinite(p)) and np.all(np.abs(p) <= SO101_LIMIT)
    assert np.abs(np.diff(p, axis=0)).max() <= MAX_STEP + 1e-9
    js = positions(states.messages, JointState)
    assert np.abs(js[-1] - js[0]).max() > 0.05, out
