"""`lerobot-launch hil_sim_so101`: a policy (the small ACT test checkpoint, which cannot do the task)
drives the simulated SO-101, the scripted corrective human takes over and hands back, the recorder
writes the episodes with complementary_info.is_intervention, and the graph exits by itself."""

import re

import numpy as np
import pytest

from lerobot_core.ament import share_path
from lerobot_dataset import DatasetReader
from lerobot_recorder.sim_seeds import read_seeds
from lerobot_sim.envs.so101_cube import HOME_POSE

from .conftest import launch_profile

pytestmark = pytest.mark.ros

ACT_SMALL = share_path("lerobot_runtime") / "test" / "fixtures" / "act_small" / "pretrained_model"


def test_hil_sim_profile_records_interventions_and_exits(tmp_path):
    log = launch_profile(
        "hil_sim_so101",
        f"policy_path:={ACT_SMALL}",
        f"dataset_root:={tmp_path / 'hil'}",
        "num_episodes:=2",
        "image_width:=64",
        "image_height:=48",
    )
    for transition in (
        "HOLD -> POLICY",
        "POLICY -> HOLD (pause)",
        "HOLD -> HUMAN (takeover)",
        "HUMAN -> POLICY (resume)",
    ):
        assert transition in log, log[-4000:]
    r = DatasetReader(tmp_path / "hil")
    assert r.num_episodes == 2
    # one recorded episode = one sim episode, never across a reset (before: episode 0 spanned sim
    # episodes 0 and 1): each saved episode names its sim seed, the seeds differ, and the arm never
    # returns to the reset pose
    saved = [
        (int(m.group(1)), int(m.group(2)))
        for m in re.finditer(r"episode \d+ saved: (\d+) frames of sim seed (\d+)", log)
    ]
    assert len(saved) == 2 and saved[0][1] != saved[1][1], log[-4000:]
    assert read_seeds(tmp_path / "hil") == {0: saved[0][1], 1: saved[1][1]}
    for i, (frames, _seed) in enumerate(saved):
        # the recorder's 30 fps grid spans one sim episode's window, from its reset to its done step
        # (300 steps at most; longer than 10 s when a busy machine makes the realtime sim skip
        # periods), or to the profile's 20 s cap
        assert frames <= 20 * 30 + 1, (i, frames)
        state = np.asarray(r.episode(i)["observation.state"], dtype=np.float64)
        at_home = np.all(np.abs(state - HOME_POSE) < 1e-4, axis=1)
        # the arm may rest at home for the first frames (nobody commands yet); a reset is a return
        # to it after it has left
        back = np.flatnonzero(at_home[1:] & ~at_home[:-1]) + 1
        assert back.size == 0, f"episode {i} crosses a sim reset at frame(s) {back.tolist()}"


def _declared(cls):
    import rclpy

    from lerobot_core.ros.params import declared_defaults

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    try:
        node = cls(context=ctx)
        out = declared_defaults(node)
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)
    return {k: v for k, v in out.items() if k != "start_type_description_service"}


def test_hil_nodes_config_defaults_and_profile_parameters():
    import yaml

    from lerobot_bringup.profile import load_profile
    from lerobot_policy_node.control_arbiter_node import ControlArbiterNode
    from lerobot_sim.corrective_human_node import CorrectiveHumanNode

    declared = {
        "control_arbiter": _declared(ControlArbiterNode),
        "corrective_human": _declared(CorrectiveHumanNode),
    }
    for pkg, exe in (("lerobot_policy_node", "control_arbiter"), ("lerobot_sim", "corrective_human")):
        params = yaml.safe_load((share_path(pkg) / "config" / f"{exe}.yaml").read_text())[exe][
            "ros__parameters"
        ]
        assert params == declared[exe], exe
    for name in ("hil", "hil_sim_so101"):
        profile = load_profile(
            share_path("lerobot_bringup") / "profiles" / f"{name}.yaml", share_lookup=lambda p: f"/{p}"
        )
        for node in profile.nodes:
            if node.executable in declared:
                unknown = set(node.parameters) - set(declared[node.executable])
                assert not unknown, f"{name}: {node.name} sets undeclared parameter(s) {sorted(unknown)}"
        # one per-step filter on the path policy -> arbiter -> robot: the arbiter's (docs/policy.md)
        steps = {node.executable: node.parameters.get("max_step_rad") for node in profile.nodes}
        assert float(steps["policy"]) == 0.0 and float(steps["control_arbiter"]) > 0.0, (name, steps)
