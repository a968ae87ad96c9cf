"""The real LeRobot 0.4.4 loads every dataset shape we write, frame for frame.

Shapes: several data/video files per chunk (DatasetWriter with tiny file limits), a live recording
(the recorder's worker fed real CDR messages), a bag import resumed with a second bag, and the datasets
LeRobot 0.4.4 and 0.6.1 wrote (fixtures/make_lerobot_fixture.py), each resumed by our writer and
bag-imported into. LeRobot runs in its own venv (scripts/test.sh builds it
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

from lerobot_core.ament import share_path
from lerobot_core.contract import Contract
from lerobot_dataset import DatasetWriter
from lerobot_recorder import bag_io
from lerobot_recorder.bag_import import import_bags
from lerobot_recorder.episode_control import EpisodeConfig
from lerobot_recorder.live_recorder import LiveConfig, LiveRecorder
from lerobot_recorder.live_types import RESULT_SAVED

FIXTURES = share_path("lerobot_dataset") / "test" / "fixtures"  # LeRobot-written datasets, checkers
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


def _lerobot_written(fixture: str):
    """A copy of the dataset a LeRobot version wrote, resumed by our writer, then bag-imported into."""

    def make(root: Path, work: Path) -> None:
        _resume_lerobot_written(FIXTURES / fixture, root)
        contract = Contract.from_flags(
            10, state="/joint_states", action="/leader/joint_states", images={"front": CAM}
        )
        import_bags(
            [_bag(work / "c", 1_700_000_000 * NS, 0.6, 2)], contract, root, resume=True, progress=False
        )

    return make


def _resume_lerobot_written(fixture: Path, root: Path) -> None:
    shutil.copytree(fixture, root)
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
    "lerobot044_written_resumed": _lerobot_written("lerobot_v30_small"),
    "lerobot061_written_resumed": _lerobot_written("lerobot_v30_small_lerobot06"),
}


@pytest.mark.slow
def test_lerobot_loads_every_shape_we_write(tmp_path, lerobot_python):
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


# ----------------------------------------------------------------------------- depth (LeRobot 0.6)
CHECK_DEPTH = FIXTURES / "check_depth_with_lerobot.py"


def _write_depth_dataset(root: Path) -> dict[str, list[np.ndarray]]:
    """RGB + a 16UC1-style (uint16 mm) and a 32FC1-style (float32 m) depth camera, 2 episodes, then a
    resumed third (a new video file); returns the recorded depth per camera."""
    from lerobot_dataset.depth import DepthQuantizer  # noqa: F401  (the writer's quantiser)

    h, w = 48, 64
    feats = {
        "observation.state": {"dtype": "float32", "shape": (6,), "names": JOINTS},
        "observation.images.front": {"dtype": "video", "shape": (h, w, 3), "names": None},
        "observation.images.depth_mm": {
            "dtype": "video",
            "shape": (h, w, 1),
            "names": None,
            "info": {"is_depth_map": True, "depth_unit": "mm"},
        },
        "observation.images.depth_m": {
            "dtype": "video",
            "shape": (h, w, 1),
            "names": None,
            "info": {"is_depth_map": True, "depth_unit": "m"},
        },
    }
    rng = np.random.default_rng(7)
    recorded: dict[str, list[np.ndarray]] = {
        "observation.images.depth_mm": [],
        "observation.images.depth_m": [],
    }

    def episode(writer, n):
        for _ in range(n):
            mm = rng.uniform(5, 11_000, (h, w))  # beyond both range ends too
            mm[:3, :3] = 0
            d_mm, d_m = mm.astype(np.uint16), (mm / 1000).astype(np.float32)
            d_m[-2:, -2:] = np.nan
            recorded["observation.images.depth_mm"].append(d_mm)
            recorded["observation.images.depth_m"].append(d_m)
            writer.add_frame(
                {
                    "observation.state": rng.normal(size=6).astype(np.float32),
                    "observation.images.front": np.full((h, w, 3), 120, np.uint8),
                    "observation.images.depth_mm": d_mm,
                    "observation.images.depth_m": d_m,
                },
                task="look",
            )
        writer.save_episode()

    with DatasetWriter.create(root, 15, feats, vcodec="libx264") as writer:
        episode(writer, 6)
        episode(writer, 4)
    with DatasetWriter.resume(root) as writer:
        episode(writer, 5)
    return recorded


def _dump_depth_expected(root: Path, recorded: dict[str, list[np.ndarray]], rgb_keys: tuple = ()) -> None:
    """What LeRobot 0.6 must return (millimetres): the recorded depth clamped to the quantiser's range
    (invalid pixels: depth_min), within half a code plus the 0.5 mm of its rounding to whole mm."""
    from lerobot_dataset.depth import DepthQuantizer

    out = {"rgb_keys": np.array(rgb_keys, dtype=str)}
    for key, frames in recorded.items():
        unit = "mm" if frames[0].dtype == np.uint16 else "m"
        q = DepthQuantizer(unit)
        to_mm = 1.0 if unit == "mm" else 1000.0
        d = np.stack(frames).astype(np.float64)
        invalid = ~np.isfinite(d) | (d <= 0)
        d = np.where(invalid, q.depth_min * 1000.0 / to_mm, d)
        clamped = np.clip(d, q.depth_min * 1000.0 / to_mm, q.depth_max * 1000.0 / to_mm)
        out[key] = clamped * to_mm
        out[f"{key}.tol"] = q.max_error(clamped) * to_mm + 0.5 + 1e-3
    np.savez(f"{root}.expected.npz", **out)


def _valid_max_diff(image: np.ndarray, decoded: np.ndarray) -> float:
    ref = image.astype(np.float64)
    valid = np.isfinite(ref) & (ref > 0)
    return float(np.abs(ref[valid] - decoded[valid]).max())


@pytest.mark.parametrize("lerobot_version", ["0.6.1"])  # depth video exists from LeRobot 0.6 on
def test_lerobot_06_loads_depth_within_its_quantisation_error(tmp_path, lerobot_python, lerobot_version):
    """LeRobot 0.6.1 loads the depth cameras we write (the writer directly, with a resume, and a
    bag import of a 16UC1 and of a 32FC1 topic) as depth, every pixel within its quantisation
    error. Runs with the plugin's `lerobot_python` for 0.6.1; a LeRobot without depth fails saying so."""
    test_depth = _load("test_depth", Path(__file__).resolve().parent / "test_depth.py")
    roots = []
    root = tmp_path / "writer"
    _dump_depth_expected(root, _write_depth_dataset(root), ("observation.images.front",))
    roots.append(str(root))
    for enc in ("16UC1", "32FC1"):
        images = test_depth._depth_bag(tmp_path / f"bag_{enc}", enc)
        root = tmp_path / f"import_{enc}"
        contract = Contract.from_flags(
            15, state="/joint_states", images={"depth": "/cam/depth/image_raw"}, task="t"
        )
        import_bags([tmp_path / f"bag_{enc}"], contract, root, progress=False)
        # the imported frames are the bag's images (nearest in time): ours decode them, LeRobot's must agree
        from lerobot_dataset import DatasetReader

        ours = DatasetReader(root).video_frames("observation.images.depth", 0)[..., 0]
        picked = [min(images, key=lambda img, f=f: _valid_max_diff(img, f)) for f in ours]
        _dump_depth_expected(root, {"observation.images.depth": picked})
        roots.append(str(root))
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    res = subprocess.run(
        [str(lerobot_python), str(CHECK_DEPTH), *roots],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
    )
    assert res.returncode == 0 and "RESULT: PASS" in res.stdout, res.stdout[-6000:] + res.stderr[-4000:]
    assert f"LeRobot {lerobot_version}" in res.stdout
