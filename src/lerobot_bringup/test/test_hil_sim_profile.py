"""`lerobot-launch hil_sim_so101`: a policy (the small ACT test checkpoint, which cannot do the task)
drives the simulated SO-101, the scripted corrective human takes over and hands back, the recorder
writes the episodes with complementary_info.is_intervention, and the graph exits by itself."""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from lerobot_recorder.dataset import DatasetReader

pytestmark = pytest.mark.ros

ACT_SMALL = (
    Path(__file__).resolve().parents[2]
    / "lerobot_policy_node"
    / "test"
    / "fixtures"
    / "act_small"
    / "pretrained_model"
)


def test_hil_sim_profile_records_interventions_and_exits(tmp_path):
    from lerobot_core.ament import find_executable

    launcher = find_executable("lerobot_bringup", "lerobot-launch")
    env = dict(
        os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl")
    )
    out = subprocess.run(
        [
            str(launcher),
            "hil_sim_so101",
            f"policy_path:={ACT_SMALL}",
            f"dataset_root:={tmp_path / 'hil'}",
            "num_episodes:=2",
            "image_width:=64",
            "image_height:=48",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-4000:]
    for transition in (
        "HOLD -> POLICY",
        "POLICY -> HOLD (pause)",
        "HOLD -> HUMAN (takeover)",
        "HUMAN -> POLICY (resume)",
    ):
        assert transition in log, log[-4000:]
    r = DatasetReader(tmp_path / "hil")
    assert r.num_episodes == 2
    flags = np.concatenate(
        [np.asarray(r.episode(i)["complementary_info.is_intervention"]).reshape(-1) for i in range(2)]
    )
    modes = np.concatenate(
        [np.asarray(r.episode(i)["complementary_info.control_mode"]).reshape(-1) for i in range(2)]
    )
    assert flags.any() and not flags.all(), "both the policy and the human drove recorded frames"
    assert set(modes.tolist()) <= {0, 1}  # no frame from a pause
    assert list(flags) == [m == 1 for m in modes]
