"""The real LeRobot 0.4.4 loads every dataset shape we write, frame for frame.

Shapes: several data/video files per chunk (DatasetWriter with tiny file limits), a live recording
(the recorder's worker fed real CDR messages), a bag import resumed with a second bag, and a dataset
LeRobot itself wrote, resumed by our writer. LeRobot runs in its own venv (scripts/test.sh builds it
with scripts/make-lerobot-ref-venv.sh when missing). Without that venv these tests FAIL with the
reason: a compat check that silently skips is a check CI never runs.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin, Writer

from lerobot_core.contract import Contract
from lerobot_recorder import bag_io
from lerobot_recorder.bag_import import import_bags
from lerobot_recorder.dataset import DatasetWriter
from lerobot_recorder.episode_control import EpisodeConfig
from lerobot_recorder.live_recorder import RESULT_SAVED, LiveConfig, LiveRecorder

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CHECK = FIXTURES / "check_with_lerobot.py"
JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
CAM = "/cameras/front/image_raw"
NS = 1_000_000_000
H, W = 48, 64


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _frame(k: int, ep: int) -> np.ndarray:
    """A camera frame whose content says which frame it is (coarse blocks survive lossy AV1)."""
    img = np.full((H, W, 3), (20 + 6 * k % 200, 60 + 40 * ep, 120), np.uint8)
    img[:, (k * 4) % W : (k * 4) % W + 8] = 230
    return img


# ----------------------------------------------------------------------------- shape builders
def _bag(path: Path, t0: int, seconds: float, ep: int) -> Path:
    events = []
    for i in range(int(seconds * 100)):
        t = t0 + i * 10_000_000
        q = np.sin(np.arange(6) + i / 30.0) + ep
        events.append((t + 1_000_000, "/joint_states", bag_io.joint_state(t, JOINTS, q)))
        events.append((t + 2_000_000, "/leader/joint_states", bag_io.joint_state(t, JOINTS, -q)))
    for i in range(int(seconds * 15)):
        t = t0 + i * NS // 15
        events.append((t + 5_000_000, CAM, bag_io.image(t, _frame(i, ep))))
    conns = {}
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        for log_time, topic, msg in sorted(events, key=lambda e: e[0]):
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msg.__msgtype__, typestore=bag_io.typestore())
            writer.write(conns[topic], log_time, bag_io.serialize(msg))
    return path


def make_bag_import_resumed(root: Path, work: Path) -> None:
    contract = Contract.from_flags(
        15, state="/joint_states", action="/leader/joint_states", images={"front": CAM}, task="pick"
    )
    t0 = 1_700_000_000 * NS
    import_bags([_bag(work / "a", t0, 1.0, 0)], contract, root, progress=False)
    import_bags([_bag(work / "b", t0 + 60 * NS, 0.8, 1)], contract, root, resume=True, progress=False)


def make_lerobot_written_resumed(root: Path, work: Path) -> None:
    shutil.copytree(FIXTURES / "lerobot_v30_small", root)
    fx = _load("make_lerobot_fixture", FIXTURES / "make_lerobot_fixture.py")
    w = DatasetWriter.resume(root)
    for i in range(5):
        s = fx.expected_state(3, i)
        w.add_frame(
            {"observation.state": s, "action": -s, "observation.images.front": fx.expected_frame(3, i)},
            task="new task",
        )
    w.save_episode()
    w.finalize()


def make_live_recording(root: Path, work: Path) -> None:
    contract = Contract.from_dict(
        {
            "fps": 10,
            "robot_type": "so101_follower",
            "task": "live task",
            "features": {
                "observation.state": {"topic": "/joint_states", "joints": JOINTS, "policy": "interpolate"},
                "observation.images.front": {"topic": CAM, "policy": "nearest", "tolerance": 0.02},
            },
        }
    )
    clock = [5 * NS]
    cfg = LiveConfig(
        dataset_root=str(root),
        episode=EpisodeConfig(episode_time_s=1000.0, reset_time_s=0.0, num_episodes=2, task=""),
    )
    types = {"/joint_states": "sensor_msgs/msg/JointState", CAM: "sensor_msgs/msg/Image"}
    rec = LiveRecorder(
        cfg, contract, decode=lambda topic, raw: bag_io.deserialize(raw, types[topic]), clock=lambda: clock[0]
    )
    rec.start()
    k = 0

    def feed(seconds: float, ep: int) -> None:
        nonlocal k
        for _ in range(int(seconds * 100)):
            t = clock[0] = clock[0] + 10_000_000
            rec.ingest(
                "/joint_states", bag_io.serialize(bag_io.joint_state(t, JOINTS, np.full(6, k * 0.001))), t
            )
            if k % 10 == 0:
                rec.ingest(CAM, bag_io.serialize(bag_io.image(t, _frame(k // 10, ep))), t)
            k += 1
            if k % 20 == 0:
                time.sleep(0.002)

    try:
        feed(0.3, 0)
        for ep in range(2):
            out = rec.request("start").result(10)
            feed(1.5, ep)
            time.sleep(0.3)
            fut = rec.outcome_future(out["seq"])
            rec.request("stop").result(30)
            outcome = fut.result(30)
            assert outcome.result_code == RESULT_SAVED, outcome.message
        rec.request("finalize").result(30)
    finally:
        rec.close()


SHAPES = {
    "live_recording": make_live_recording,
    "bag_import_resumed": make_bag_import_resumed,
    "lerobot_written_resumed": make_lerobot_written_resumed,
}


@pytest.mark.slow
def test_lerobot_044_loads_every_shape_we_write(tmp_path, lerobot_python):
    python = lerobot_python
    check = _load("check_with_lerobot", CHECK)
    roots = []
    for name, make in SHAPES.items():
        work = tmp_path / f"{name}_work"
        work.mkdir()
        root = tmp_path / name
        make(root, work)
        check.dump_expected(root, Path(f"{root}.expected.npz"))
        roots.append(str(root))
    # A private HF cache: `datasets` file-locks its cache, which other LeRobot users may hold.
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    # without --dataset the script also writes and checks its own several-files-per-chunk dataset
    res = subprocess.run(
        [str(python), str(CHECK), "--python", sys.executable, "--compare", *roots],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
    )
    assert res.returncode == 0 and "RESULT: PASS" in res.stdout, res.stdout[-6000:] + res.stderr[-4000:]
    for name in SHAPES:
        assert f"ok   [{name}] all " in res.stdout
