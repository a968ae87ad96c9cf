"""Teleop recording in one command: `lerobot-launch so101_teleop_record_demo` (emulated leader and
follower, two synthetic cameras, recorder, key control) records N episodes, finalizes and exits 0;
the dataset loads with our reader and, where the reference venv exists, with LeRobot 0.4.4."""

import importlib.util
import os
import subprocess
import textwrap

import numpy as np
import pytest

from lerobot_core.ament import find_executable, share_path
from lerobot_dataset import DatasetReader

pytestmark = pytest.mark.ros
# check_with_lerobot.py: its accelerate stub and PyAV fallback decoder for LeRobot 0.4.4 here
FIXTURES = share_path("lerobot_dataset") / "test" / "fixtures"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("teleop_record")
    root = tmp / "ds"
    launcher = find_executable("lerobot_bringup", "lerobot-launch")
    out = subprocess.run(
        [
            str(launcher),
            "so101_teleop_record_demo",
            f"leader_port:={tmp / 'leader'}",
            f"follower_port:={tmp / 'follower'}",
            f"dataset_root:={root}",
            "num_episodes:=2",
            "episode_time_s:=2.0",
            "reset_time_s:=0.5",
            "camera_width:=96",
            "camera_height:=64",
            "repo_id:=someone/teleop_demo",
            "push_to_hub:=true",  # no network: huggingface_hub's offline error, the dataset stays
        ],
        env=dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", HF_HUB_OFFLINE="1"),
        stdin=subprocess.DEVNULL,  # no terminal: key control exits, recording goes on
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-5000:]
    return root, out.stdout + out.stderr


def test_records_a_dataset_in_one_command(recorded):
    root, log = recorded
    assert "died" not in log, log[-3000:]  # key control without a terminal exits cleanly, too
    r = DatasetReader(root)
    assert r.num_episodes == 2, log[-3000:]
    assert set(r.camera_keys) == {"observation.images.front", "observation.images.wrist"}
    assert r.features["observation.images.wrist"]["shape"] == (64, 96, 3)
    assert r.tasks == ["Move the arm with the leader"]
    assert r.features["action"]["names"][0] == "shoulder_pan.pos"
    if importlib.util.find_spec("huggingface_hub") is not None:
        assert "push to someone/teleop_demo failed: OfflineModeIsEnabled" in log, log[-3000:]
        assert f"retry with: lerobot-ros-dataset-push {root} someone/teleop_demo" in log
    for ep in range(2):
        cols = r.episode(ep)
        n = len(cols["index"])
        assert 45 <= n <= 61, f"episode {ep}: {n} frames for 2 s at 30 fps"
        action, state = cols["action"], cols["observation.state"]
        # the virtual hand moves the leader (the action) and the follower (the state) goes with it
        assert np.ptp(action, axis=0).max() > 0.05
        assert np.abs(action - state).max() < 0.5
        frames = r.video_frames("observation.images.wrist", ep)
        assert frames.shape == (n, 64, 96, 3) and frames.std() > 1.0


def test_lerobot_loads_the_recording(recorded, lerobot_python):
    root, _ = recorded
    script = textwrap.dedent(
        f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("chk", {str(FIXTURES / "check_with_lerobot.py")!r})
        chk = importlib.util.module_from_spec(spec); spec.loader.exec_module(chk)
        chk._stub_accelerate()
        from lerobot.datasets import lerobot_dataset as ld
        ds = chk._open(ld, "lerobot_ros/teleop_demo", {str(root)!r})  # LeRobot 0.4.4 or 0.6.1
        chk._use_pyav_if_lerobot_backend_fails(ld, ds)  # a decoder that runs here
        item = ds[len(ds) - 1]
        print(ds.num_episodes, len(ds), sorted(ds.meta.video_keys), tuple(item["observation.images.front"].shape),
              int(item["episode_index"]), item["task"])
        """
    )
    out = subprocess.run([str(lerobot_python), "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    r = DatasetReader(root)
    want = (
        f"2 {r.num_frames} ['observation.images.front', 'observation.images.wrist'] (3, 64, 96) 1 "
        "Move the arm with the leader"
    )
    assert out.stdout.strip().splitlines()[-1] == want
