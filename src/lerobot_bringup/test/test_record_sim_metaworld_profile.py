"""`lerobot-launch record_sim_metaworld`: a Meta-World task on the gym bridge (lockstep), its scripted policy
(scripted_expert metaworld_task) and the recorder, into a LeRobot dataset: the demos of the Meta-World
closed loop (scripts/closed_loop.py --env metaworld)."""

import numpy as np
import pytest

pytest.importorskip(
    "metaworld", reason="metaworld is installed by ./setup.sh; this venv was set up without it"
)

from lerobot_dataset import DatasetReader
from lerobot_recorder.sim_seeds import read_seeds
from lerobot_sim.envs.metaworld import MetaWorldEnv, MetaWorldExpert

from .conftest import dropped_ticks, launch_profile, sim_episodes

pytestmark = pytest.mark.ros


def test_record_sim_metaworld_records_aligned_expert_demos(tmp_path):
    """Two reach-v3 demos: one dataset episode per sim episode (seeds 0, 1), state features only, each
    episode from the reset observation of its seed to the step the sim reported done, 0 dropped ticks, and
    every frame's action is the expert's answer to that frame's observation (not the previous one's)."""
    root = tmp_path / "mw_ds"
    log = launch_profile("record_sim_metaworld", f"dataset_root:={root}", "num_episodes:=2", "task:=reach-v3")
    ended, dropped = sim_episodes(log), dropped_ticks(log)
    assert [seed for seed, _ in ended] == [0, 1], log[-4000:]
    assert dropped == [0, 0], log[-4000:]
    r = DatasetReader(root)
    assert r.num_episodes == 2 and r.fps == 80 and not r.camera_keys
    frame = r[0]
    assert frame["observation.state"].shape == (4,)
    assert frame["observation.environment_state"].shape == (39,)
    assert frame["action"].shape == (4,)
    assert read_seeds(root) == {0: 0, 1: 1}
    expert = MetaWorldExpert("reach-v3")
    sim = MetaWorldEnv(task="reach-v3", obs_type="state")
    try:
        for i, (seed, steps) in enumerate(ended):
            ep = r.episode(i)
            env_state = np.asarray(ep["observation.environment_state"], dtype=np.float64)
            assert len(env_state) == steps + 1, (i, len(env_state), steps)
            reset_obs, _ = sim.reset(seed=seed)
            np.testing.assert_allclose(env_state[0], reset_obs["environment_state"], atol=1e-6)
            np.testing.assert_allclose(ep["observation.state"], env_state[:, :4], atol=1e-6)
            expected = np.stack(
                [expert.select_action({"observation.environment_state": s}) for s in env_state]
            )
            np.testing.assert_allclose(np.asarray(ep["action"], dtype=np.float64), expected, atol=1e-5)
    finally:
        sim.close()
