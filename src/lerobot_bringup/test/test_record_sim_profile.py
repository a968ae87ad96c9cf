"""`lerobot-launch record_sim_so101` (the README's main job, end to end): sim in lockstep, scripted expert and recorder with
episode_boundaries sim. One dataset episode is one sim episode; num_episodes counts demonstrations."""

import re

import numpy as np
import pytest

from lerobot_dataset import DatasetReader
from lerobot_recorder.sim_seeds import read_seeds
from lerobot_sim.envs.so101_cube import HOME_POSE

from .conftest import dropped_ticks, launch_profile, sim_episodes

pytestmark = pytest.mark.ros


def test_record_sim_so101_records_one_sim_episode_per_dataset_episode(tmp_path):
    """record_sim_so101 (lockstep, episode_boundaries sim): each dataset episode is one whole sim
    episode, from the sim's first episode (seed 0) on: its reset frame (the home pose), every step up
    to the one the sim reported done (its length = steps + 1), no frame of the next one, 0 drops."""
    args = [f"dataset_root:={tmp_path / 'sim_ds'}", "num_episodes:=3", "image_width:=64", "image_height:=48"]
    log = launch_profile("record_sim_so101", *args, timeout=400)
    ended = sim_episodes(log)
    saved = [int(m.group(1)) for m in re.finditer(r"episode \d+ saved: \d+ frames[^(]*\((\d+) frames, ", log)]
    dropped = dropped_ticks(log)
    assert [seed for seed, _ in ended] == [0, 1, 2], log[-4000:]  # from the sim's first episode on
    assert dropped == [0, 0, 0], log[-4000:]
    r = DatasetReader(tmp_path / "sim_ds")
    assert r.num_episodes == 3
    assert set(r.camera_keys) == {"observation.images.front", "observation.images.wrist"}
    frame = r[0]
    assert frame["observation.state"].shape == (6,) and frame["action"].shape == (6,)
    assert r.tasks == ["Pick up the cube and lift it"]
    for i, (_seed, steps) in enumerate(ended):
        state = np.asarray(r.episode(i)["observation.state"], dtype=np.float64)
        assert len(state) == steps + 1 == saved[i], (i, len(state), steps)
        at_home = np.all(np.abs(state - HOME_POSE) < 1e-4, axis=1)
        assert at_home[0], f"episode {i} does not begin at the reset pose: {state[0]}"
        assert not at_home[1:].any(), f"episode {i} holds a reset frame at {np.flatnonzero(at_home[1:]) + 1}"
    assert read_seeds(tmp_path / "sim_ds") == {0: 0, 1: 1, 2: 2}  # each saved episode's sim seed

    # appending records new demonstrations: the resumed run starts at the first seed not used (before:
    # at seed 0 again, so the appended episode was bit-identical to episode 0)
    log = launch_profile(
        "record_sim_so101", *args[:1], "num_episodes:=1", "resume:=true", *args[2:], timeout=400
    )
    assert re.search(r"sim episode \d+ \(seed 3\) ended after", log), log[-4000:]
    r = DatasetReader(tmp_path / "sim_ds")
    assert r.num_episodes == 4 and read_seeds(tmp_path / "sim_ds") == {0: 0, 1: 1, 2: 2, 3: 3}
    new = np.asarray(r.episode(3)["observation.state"], dtype=np.float64)
    for i in range(3):
        old = np.asarray(r.episode(i)["observation.state"], dtype=np.float64)
        assert old.shape != new.shape or not np.array_equal(old, new), f"episode 3 repeats episode {i}"
